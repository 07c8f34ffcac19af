"""The trust boundary: what nccl-doctor reads, runs or prints for someone it does not trust."""
