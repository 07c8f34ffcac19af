"""How long the triage TUI takes to show a new snapshot, for 32 to 1024 ranks.

Runs the real app headless (textual's test driver) on fake snapshots in which
every rank's row changes at each refresh (a job that progresses), presses F5
and waits until the new snapshot is on screen. Prints the median per size and
exits 1 when a size misses its target: the screen must keep up with a 1 s
``--interval`` at 32 ranks and stay usable at 1024.

    .venv/bin/python benchmarks/bench_tui.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "tui"))

from tui_fakes import cpu_stuck_snapshot  # noqa: E402

from doctor.triage.snapshot import TriageSnapshot  # noqa: E402
from doctor.triage.tui.app import TriageApp  # noqa: E402

TARGETS_S = {32: 0.5, 256: 1.0, 1024: 2.5}
"""Median seconds from F5 to the new snapshot drawn, per number of ranks."""
REFRESHES = 5


class Progressing:
    """A provider whose ranks all advance one collective per call."""

    def __init__(self, ranks: int) -> None:
        self.base = cpu_stuck_snapshot(ranks=ranks, culprit=ranks - 3)
        self.calls = 0

    def __call__(self) -> TriageSnapshot:
        self.calls += 1
        evidence = self.base.evidence
        progress = tuple(
            replace(p, last_enqueued_seq=(p.last_enqueued_seq or 0) + self.calls)
            for p in evidence.progress
        )
        return replace(
            self.base,
            evidence=replace(evidence, progress=progress),
            taken_at=self.base.taken_at + self.calls,
        )


async def median_refresh(ranks: int) -> float:
    app = TriageApp(Progressing(ranks), 3600, "bench")
    async with app.run_test(size=(160, 48)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        times = []
        for _ in range(REFRESHES):
            before = app.shown
            start = time.perf_counter()
            await pilot.press("f5")
            while app.shown is before:
                await pilot.pause(0.005)
            await pilot.pause()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    missed = []
    for ranks, target in TARGETS_S.items():
        took = asyncio.run(median_refresh(ranks))
        ok = took <= target
        print(
            f"{ranks:>5} ranks: {took * 1000:7.0f} ms per refresh (target {target * 1000:.0f} ms)"
            f" {'ok' if ok else 'MISSED'}"
        )
        if not ok:
            missed.append(ranks)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
