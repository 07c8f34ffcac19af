"""nccl-doctor: preflight, triage and in-process recovery for PyTorch jobs over NCCL."""

__version__ = "0.1.0"
