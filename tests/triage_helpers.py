"""Triage test helpers: recorded stacks, evidence builders, a fake source, cheap rank processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from doctor.evidence import Evidence, ProgressSample, RankProcess, RankStack
from doctor.triage.sources.interface import Collected, Source
from doctor.triage.sources.pyspy import parse_dump
from doctor.triage.target import Target
from doctor.verdict.stacks import rank_state, signature

DATA = Path(__file__).parent / "triage" / "data"
FAULT_FIXTURES = (
    "dataloader",
    "gil",
    "compile",
    "wrong-collective",
    "except-clause",
    "subgroup-mismatch",
)
"""Recorded ``py-spy dump --json`` of the four ranks of a real hung demo job per fault."""


def recorded_stack(fault: str, rank: int) -> RankStack:
    return parse_dump((DATA / "stacks" / f"{fault}_rank{rank}.json").read_text(), rank)


def hung_evidence(stacks: list[RankStack], io: int = 0, world: int = 4) -> Evidence:
    """Evidence of a job whose live ranks made ``io`` read/write calls in the window."""
    procs = tuple(
        RankProcess(
            r, 1000 + r, "h", True, status="sleeping", cpu_seconds_delta=0.0, io_calls_delta=io
        )
        for r in range(world)
    )
    progress = tuple(
        ProgressSample(s.rank, t, stack_signature=signature(s), state=rank_state(s).value)
        for t in (0.0, 0.5, 1.0)
        for s in stacks
    )
    return Evidence("job", world, processes=procs, stacks=tuple(stacks), progress=progress)


def fault_evidence(fault: str) -> Evidence:
    return hung_evidence([recorded_stack(fault, r) for r in range(4)])


def kill_rank(evidence: Evidence, rank: int, status: str = "zombie") -> Evidence:
    procs = tuple(
        replace(p, alive=False, status=status) if p.rank == rank else p for p in evidence.processes
    )
    return replace(
        evidence, processes=procs, stacks=tuple(s for s in evidence.stacks if s.rank != rank)
    )


class FakeSource(Source):
    """A source whose ``collect`` is a plain function (``httpx``'s MockTransport idea)."""

    def __init__(self, name: str, fn: Callable[[Target, float], Collected]) -> None:
        self.name = name
        self.fn = fn

    def collect(self, target: Target, deadline: float) -> Collected:
        return self.fn(target, deadline)


SLEEPER = "import os, sys, time; open(sys.argv[1], 'w').close(); time.sleep(120)"
"""A cheap stand-in for a rank: says it is ready, then waits (no torch import)."""


def start_sleeper(
    tmp: Path, env: Mapping[str, str], name: str, code: str = SLEEPER
) -> subprocess.Popen[bytes]:
    ready = tmp / f"{name}.ready"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(ready)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # stop_all then stops the workers it starts, too
    )
    end = time.monotonic() + 20
    while not ready.exists() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.02)
    assert ready.exists(), f"{name} did not start"
    return proc


def healthy_or_honest_lag(verdict: Mapping[str, object]) -> bool:
    """A healthy job's verdict: ``healthy``, or on a loaded 2-core host a rank that honestly
    lags (a straggler of medium confidence, not a hang)."""
    found = (verdict["hang_class"], verdict["culprit_ranks"])
    return found == ("healthy", []) or (
        found[0] == "straggler" and verdict["confidence"] == "medium"
    )
