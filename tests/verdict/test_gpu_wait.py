"""A rank whose CPU waits for its GPU (a CUDA synchronize): waiting, like a rank in a
collective, never "its own code"; with NCCL, whose collectives return once queued, this is
where the ranks of a hung job are found."""

from __future__ import annotations

from dataclasses import replace

from triage_helpers import hung_evidence, recorded_stack

from doctor.evidence import Evidence, Frame, GpuSample, LogEvent, RankStack, ThreadStack
from doctor.model import HangClass
from doctor.verdict.classify import classify
from doctor.verdict.stacks import RankState, rank_state

SYNC = Frame("synchronize", "/venv/lib/python3.12/site-packages/torch/cuda/__init__.py", 1162)
STEP = Frame("train_step", "train.py", 57)


def rank_at(rank: int, *frames: Frame) -> RankStack:
    return RankStack(rank, (ThreadStack(rank, "MainThread", frames, is_main=True),), "py-spy")


def test_a_cuda_synchronize_is_a_gpu_wait_in_python_or_native_frames() -> None:
    assert rank_state(rank_at(0, SYNC, STEP)) is RankState.GPU_WAIT
    native = Frame("cudaStreamSynchronize", "libcudart.so.13", 0, native=True)
    item = Frame("at::native::_local_scalar_dense_cuda", "libtorch_cuda.so", 0, native=True)
    assert rank_state(rank_at(0, native, STEP)) is RankState.GPU_WAIT
    assert rank_state(rank_at(0, item, STEP)) is RankState.GPU_WAIT
    # a user's own function named synchronize is not torch.cuda's
    assert rank_state(rank_at(0, Frame("synchronize", "mylib/sync.py", 3), STEP)) is (
        RankState.USER_CODE
    )


def test_one_rank_frozen_on_its_gpu_is_a_stall_not_health_whatever_ras_says() -> None:
    """The H200 recording's shape: one rank parked in torch.cuda.synchronize in every
    sample, no read/write calls, and NCCL RAS reporting every communicator running."""
    evidence = hung_evidence([rank_at(0, SYNC, STEP)], world=1)
    ras = LogEvent(None, "progress", "RAS: every communicator is running with no errors")
    verdict = classify(replace(evidence, logs=(ras,)))
    assert verdict.hang_class is HangClass.UNKNOWN
    assert "waits for its GPU" in verdict.summary


def test_a_rank_waiting_on_its_gpu_while_the_others_wait_in_a_collective_is_the_culprit() -> None:
    stacks = [recorded_stack("dataloader", r) for r in range(4)]
    waiting = [s for s in stacks if rank_state(s) is RankState.IN_COLLECTIVE]
    assert len(waiting) == 3, "the recording: three ranks wait in all_reduce"
    behind = next(s.rank for s in stacks if s not in waiting)
    verdict = classify(hung_evidence([*waiting, rank_at(behind, SYNC, STEP)]))
    assert verdict.hang_class is HangClass.GPU_HANG
    assert verdict.culprit_ranks == (behind,)
    assert "waiting for its GPU" in verdict.summary


def busy_gpu(rank: int, pct: float) -> GpuSample:
    return GpuSample(rank, rank, utilization_pct=pct, power_w=122.4, sm_clock_mhz=1980)


def alone(pct: float, world_size: int | None = 1) -> Evidence:
    """One rank waiting in synchronize, its GPU ``pct`` busy, in a job of ``world_size``."""
    evidence = hung_evidence([rank_at(0, SYNC, STEP)], world=1)
    return replace(evidence, gpus=(busy_gpu(0, pct),), world_size=world_size)


def test_the_only_rank_waiting_for_a_busy_gpu_is_that_gpus_hang() -> None:
    """The H100 and H200 recordings' shape: one rank, NVML sees its GPU 100 % busy."""
    verdict = classify(alone(100))
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.GPU_HANG, (0,))
    assert "GPU 0: 100% busy, 122 W, SM clock 1980 MHz" in {e.text for e in verdict.evidence}
    assert "NVML GPU state" not in verdict.missing_evidence


def test_an_idle_gpu_or_peers_leave_the_wait_unexplained_with_nvml_as_evidence() -> None:
    """An idle GPU is not running the kernel; with peers, a busy GPU may be NCCL spinning for
    one of them: unknown, as before, but NVML is evidence read, not evidence missing."""
    four = hung_evidence([rank_at(r, SYNC, STEP) for r in range(4)])
    four_busy = replace(four, gpus=tuple(busy_gpu(r, 100) for r in range(4)))
    # the one rank of this host, in a job whose size nobody reported: peers may exist
    for evidence in (alone(0), four_busy, alone(100, world_size=None)):
        verdict = classify(evidence)
        assert verdict.hang_class is HangClass.UNKNOWN, verdict
        assert "NVML GPU state" not in verdict.missing_evidence
        assert any(e.source == "nvml" for e in verdict.evidence)
    assert "NVML GPU state" in classify(four).missing_evidence, "not read: still missing"
