"""Realistic snapshots and fake providers for the TUI tests, the tmux driver and the screenshot.

The default job: N ranks on one host, one rank reading its data loader while
every other rank waits in ``all_reduce`` #1842 of process group 0 (a
``cpu_stuck`` hang, as ``nccl-doctor triage`` reports it on a real job).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from doctor.evidence import (
    Evidence,
    Frame,
    GpuSample,
    ProgressSample,
    RankProcess,
    RankStack,
    ThreadStack,
)
from doctor.flight.align import Divergence, FlightAnalysis, GroupAlignment, Position, RankOp
from doctor.model import CollectiveRef, Confidence, EvidenceLine, HangClass, Skipped, Verdict
from doctor.triage.snapshot import TriageSnapshot
from doctor.verdict.classify import Analysis

TAKEN_AT = 1_795_000_000.0
"""A fixed collection time (2026-11-18 11:06:40 UTC) so screenshots never change."""
SEQ = 1842
TORCH = "/opt/venv/lib/python3.11/site-packages/torch"
TRAIN = "/home/ml/llm/train.py"

WAITING = (
    Frame("all_reduce", f"{TORCH}/distributed/distributed_c10d.py", 2811),
    Frame("wrapper", f"{TORCH}/distributed/c10d_logger.py", 81),
    Frame("train_step", TRAIN, 58),
    Frame("main", TRAIN, 97),
    Frame("<module>", TRAIN, 112),
)
IN_LOADER = (
    Frame("read_shard", "/home/ml/llm/data/shards.py", 44),
    Frame("__getitem__", "/home/ml/llm/data/shards.py", 71),
    Frame("fetch", f"{TORCH}/utils/data/_utils/fetch.py", 52),
    Frame("_next_data", f"{TORCH}/utils/data/dataloader.py", 789),
    Frame("__next__", f"{TORCH}/utils/data/dataloader.py", 733),
    Frame("train_step", TRAIN, 49),
    Frame("main", TRAIN, 97),
    Frame("<module>", TRAIN, 112),
)
PIN_MEMORY = (
    Frame("wait", "/usr/lib/python3.11/threading.py", 331),
    Frame("get", "/usr/lib/python3.11/queue.py", 180),
    Frame("_pin_memory_loop", f"{TORCH}/utils/data/_utils/pin_memory.py", 55),
)


FSDP_STEP = ("_allgather_base", "_allgather_base", "_reduce_scatter_base", "all_reduce")
"""The collectives of one training step, as the Flight Recorder names them."""


def fsdp_op(seq: int) -> str:
    return FSDP_STEP[(seq - SEQ - 1) % len(FSDP_STEP)]


def flight(
    ranks: int,
    culprit: int,
    ops: dict[int, dict[int, str]] | None = None,
    divergence: Divergence | None = None,
) -> FlightAnalysis:
    """Default process group of ``ranks`` ranks: 8 completed collectives, then #1842
    started everywhere except on ``culprit``, which never scheduled it. ``ops``
    overrides what a rank recorded at a sequence number."""
    kept = range(SEQ - 8, SEQ + 1)
    records = tuple(
        RankOp(
            r,
            "0",
            seq,
            (ops or {}).get(r, {}).get(seq, fsdp_op(seq)),
            "started" if seq == SEQ else "completed",
            (),
        )
        for r in range(ranks)
        for seq in kept
        if r != culprit or seq < SEQ
    )
    others = tuple(r for r in range(ranks) if r != culprit)
    if divergence is None and culprit in range(ranks):
        divergence = Divergence(
            "missing",
            SEQ,
            "all_reduce",
            (culprit,),
            others,
            False,
            f"pg 0: rank {culprit} never scheduled seq {SEQ} (all_reduce); "
            f"{len(others)} peer(s) reached seq {SEQ}",
        )
    positions = tuple(Position(r, SEQ - (r == culprit), SEQ - 1) for r in range(ranks))
    group = GroupAlignment("0", "default_pg", tuple(range(ranks)), positions, (), divergence)
    return FlightAnalysis(
        ranks_read=tuple(range(ranks)),
        world_size=ranks,
        backend="nccl",
        versions=("2.9",),
        groups=(group,),
        last_ops=(),
        stragglers=(),
        skipped=(),
        completion_known=True,
        kept_ops=records,
    )


def _stack(rank: int, main: tuple[Frame, ...], holds_gil: bool) -> RankStack:
    threads = (
        ThreadStack(4100 + rank, "MainThread", main, holds_gil=holds_gil, is_main=True),
        ThreadStack(4200 + rank, "Thread-1 (_pin_memory_loop)", PIN_MEMORY, active=False),
    )
    return RankStack(rank=rank, threads=threads, source="py-spy")


def cpu_stuck_snapshot(
    ranks: int = 8, culprit: int = 3, taken_at: float = TAKEN_AT, host: str = "gpu-node-07"
) -> TriageSnapshot:
    """``ranks`` ranks in all_reduce #1842, except ``culprit``, still in its data loader."""
    others = [r for r in range(ranks) if r != culprit]
    evidence = Evidence(
        job="llm-pretrain-0412",
        ranks_expected=ranks,
        processes=tuple(
            RankProcess(
                rank=r,
                pid=41230 + r,
                host=host,
                alive=True,
                local_rank=r % 8,
                world_size=ranks,
                status="running" if r == culprit else "sleeping",
                cpu_seconds_delta=0.93 if r == culprit else 0.01,
                num_threads=9,
            )
            for r in range(ranks)
        ),
        stacks=tuple(
            _stack(r, IN_LOADER if r == culprit else WAITING, r == culprit) for r in range(ranks)
        ),
        gpus=tuple(
            GpuSample(
                rank=r,
                index=r % 8,
                utilization_pct=0.0 if r == culprit else 100.0,
                power_w=88.0 if r == culprit else 312.0,
            )
            for r in range(ranks)
        ),
        progress=tuple(
            ProgressSample(
                rank=r,
                time_s=taken_at,
                last_enqueued_seq=SEQ - (r == culprit),
                last_completed_seq=SEQ - 1,
            )
            for r in range(ranks)
        ),
        seconds=0.8,
    )
    loader = "read_shard (data/shards.py:44)"
    verdict = Verdict(
        hang_class=HangClass.CPU_STUCK,
        culprit_ranks=(culprit,),
        confidence=Confidence.HIGH,
        summary=(
            f"rank {culprit} never reached all_reduce #{SEQ}: its main thread is in the "
            f"data loader at {loader} while {len(others)} ranks wait."
        ),
        collective=CollectiveRef("0", SEQ, "all_reduce"),
        evidence=(
            EvidenceLine("py-spy", culprit, f"main thread in {loader}, holding the GIL"),
            EvidenceLine(
                "py-spy",
                None,
                f"ranks {others[0]}-{others[-1]} (except {culprit}) "
                "wait in all_reduce (distributed_c10d.py:2811)",
            ),
            EvidenceLine("process", culprit, "0.93 s of CPU during a 1 s window"),
            EvidenceLine("nvml", culprit, "GPU idle (0%) while peers spin at 100%"),
        ),
    )
    return TriageSnapshot(evidence, Analysis(verdict, flight(ranks, culprit)), taken_at)


def collective_mismatch_snapshot(ranks: int = 4, culprit: int = 2) -> TriageSnapshot:
    """``culprit`` called all_gather where its peers called all_reduce #1842."""
    snap = cpu_stuck_snapshot(ranks=ranks, culprit=-1)
    gather = (
        Frame("all_gather_into_tensor", f"{TORCH}/distributed/distributed_c10d.py", 3788),
        *WAITING[1:2],
        Frame("sync_metrics", TRAIN, 71),
        *WAITING[3:],
    )
    others = tuple(r for r in range(ranks) if r != culprit)
    divergence = Divergence(
        "mismatch",
        SEQ,
        "all_reduce",
        (culprit,),
        others,
        False,
        f"pg 0 seq {SEQ}: rank {culprit} issued _allgather_base[4096]/Float where "
        f"{len(others)} ranks issued all_reduce[1024]/Float",
    )
    evidence = replace(
        snap.evidence,
        stacks=tuple(
            _stack(r, gather, False) if r == culprit else s
            for r, s in enumerate(snap.evidence.stacks)
        ),
    )
    verdict = Verdict(
        HangClass.COLLECTIVE_MISMATCH,
        (culprit,),
        Confidence.HIGH,
        f"rank {culprit} called all_gather where {len(others)} ranks called all_reduce "
        f"#{SEQ} of process group 0.",
        collective=CollectiveRef("0", SEQ, "all_reduce"),
        evidence=(
            EvidenceLine("flight-recorder", culprit, divergence.text),
            EvidenceLine("py-spy", culprit, "all_gather_into_tensor (train.py:71)"),
        ),
    )
    fa = flight(ranks, -1, {culprit: {SEQ: "_allgather_base"}}, divergence)
    return TriageSnapshot(evidence, Analysis(verdict, fa), TAKEN_AT)


def healthy_snapshot(ranks: int = 4, taken_at: float = TAKEN_AT) -> TriageSnapshot:
    """The same job after the culprit caught up: every rank in the same collective."""
    snap = cpu_stuck_snapshot(ranks=ranks, culprit=-1, taken_at=taken_at)
    verdict = Verdict(HangClass.HEALTHY, (), Confidence.MEDIUM, "all ranks are making progress.")
    return replace(snap, analysis=Analysis(verdict, snap.flight))


def rank_lost_snapshot(ranks: int = 4, lost: int = 2) -> TriageSnapshot:
    """Rank ``lost`` was killed: no process, no stack, a skipped py-spy probe."""
    snap = cpu_stuck_snapshot(ranks=ranks, culprit=-1)
    ev = snap.evidence
    evidence = replace(
        ev,
        processes=tuple(
            replace(p, alive=False, pid=None, status="dead", exit_code=-9, cpu_seconds_delta=None)
            if p.rank == lost
            else p
            for p in ev.processes
        ),
        stacks=tuple(s for s in ev.stacks if s.rank != lost),
        skipped=(Skipped(lost, "py-spy", "process is gone"),),
    )
    verdict = Verdict(
        HangClass.RANK_LOSS,
        (lost,),
        Confidence.HIGH,
        f"rank {lost} died (SIGKILL) while the others wait in all_reduce.",
    )
    return TriageSnapshot(evidence, Analysis(verdict, snap.flight), TAKEN_AT)


class FakeProvider:
    """A snapshot provider that replays ``script`` (snapshots or exceptions), then repeats the last.

    Each call returns the scripted snapshot with ``taken_at`` advanced by the call
    number, so a test can tell which collection is on screen. ``gate`` (if set)
    holds every call until released, to observe the TUI while collection runs.
    """

    def __init__(
        self,
        script: Sequence[TriageSnapshot | Exception] | None = None,
        gate: threading.Event | None = None,
    ) -> None:
        self.script = list(script or [cpu_stuck_snapshot()])
        self.gate = gate
        self.calls = 0
        self.started = 0
        self._lock = threading.Lock()

    def __call__(self) -> TriageSnapshot:
        with self._lock:
            self.started += 1
        if self.gate is not None and not self.gate.wait(timeout=10):
            raise TimeoutError("test gate never opened")
        with self._lock:
            index = min(self.calls, len(self.script) - 1)
            self.calls += 1
            calls = self.calls
        item = self.script[index]
        if isinstance(item, Exception):
            raise item
        return replace(item, taken_at=item.taken_at + calls - 1)


def recorder() -> tuple[list[object], Callable[..., str]]:
    """A callback that records its arguments and answers like ``recover`` does."""
    calls: list[object] = []

    def record(*args: object) -> str:
        calls.append(args)
        return "restart requested for 8 ranks"

    return calls, record
