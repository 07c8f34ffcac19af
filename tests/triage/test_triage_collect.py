"""The collector: parallel sources, a hard deadline, failures as Skipped, progress events."""

from __future__ import annotations

import threading
import time

from triage_helpers import FakeSource, recorded_stack

from doctor.evidence import RankProcess
from doctor.model import HangClass
from doctor.triage.collect import CollectOptions, ProgressHook, collect_evidence, collect_snapshot
from doctor.triage.sources.interface import Collected, SourceError
from doctor.triage.target import Target

TARGET = Target("job", "h", (), 4)
FAST = CollectOptions(interval=0.2, probe_timeout=0.2, native_timeout=0.2, env={})


def test_sources_run_in_parallel_and_a_stuck_one_is_cut_at_the_deadline() -> None:
    # GIVEN a source that never returns, one that cannot run and one that works
    release = threading.Event()

    def stuck(target, deadline):
        release.wait(30)
        return Collected()

    def broken(target, deadline):
        raise SourceError("py-spy is not installed")

    def works(target, deadline):
        return Collected(stacks=(recorded_stack("gil", 2),))

    sources = [FakeSource("stuck", stuck), FakeSource("broken", broken), FakeSource("works", works)]
    try:
        # WHEN the collector runs them
        start = time.monotonic()
        evidence = collect_evidence(TARGET, FAST, sources=sources)
        took = time.monotonic() - start
    finally:
        release.set()
    # THEN it returns at the deadline with what finished and says what did not
    assert took < FAST.interval + FAST.probe_timeout + 1.0
    assert [s.rank for s in evidence.stacks] == [2]
    reasons = {s.probe: s.reason for s in evidence.skipped}
    assert reasons == {
        "stuck": "did not finish before the deadline",
        "broken": "py-spy is not installed",
    }


def test_progress_hook_sees_every_source_and_the_snapshot() -> None:
    events: list[str] = []

    class Hook(ProgressHook):
        def discovered(self, target):
            events.append("discovered")

        def source_done(self, source, seconds, problems):
            events.append(f"{source}:{problems}")

        def finished(self, snapshot):
            events.append(f"verdict:{snapshot.verdict.hang_class.value}")

    dead = Collected(
        processes=tuple(
            RankProcess(
                r,
                None if r == 1 else 100 + r,
                "h",
                alive=r != 1,
                status="missing" if r == 1 else "sleeping",
            )
            for r in range(4)
        )
    )
    snapshot = collect_snapshot(
        TARGET, FAST, progress=Hook(), sources=[FakeSource("proc", lambda t, d: dead)]
    )
    assert events == ["discovered", "proc:0", "verdict:rank_loss"]
    assert snapshot.verdict.hang_class is HangClass.RANK_LOSS
    assert snapshot.verdict.culprit_ranks == (1,)
