"""AllReduce bandwidth against the ring/tree/NVLS model (``nccl-doctor bench``).

sizes    nccl-tests' -b/-e/-f sweep
links    per-link figures (NVLink, PCIe, InfiniBand) and GPU topology -> link parameters
model    the alpha-beta model: ring, tree, NVLS
probe    the point-to-point probe that runs inside the ranks
worker   one rank: probe, sweep, report
runner   start local ranks (or join a torchrun/srun job) and collect the result
session  request -> result: the one call behind ``bench`` and ``preflight --bench``
result   the result values and their JSON form
explain, render, plot   what the user reads
"""
