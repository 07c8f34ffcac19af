"""Issue 4's targets, measured: invocation -> verdict on a hung 4-rank job within 2 s; 32 ranks.

Starts the demo job (gloo, CPU) with one rank stuck in its data loader, runs
``nccl-doctor triage --job ID --once --json`` as a user would (a fresh
interpreter each time), and prints the wall time of every run, the time the
collection itself took, and the verdict. Then does the same on a 32-rank job
(one process per rank) to show that collection scales: the ranks are probed
in parallel, so the time stays near the sampling window. Exits 1 when the
4-rank median exceeds 2 s or a verdict is wrong.

    .venv/bin/python benchmarks/bench_triage.py [--runs N] [--skip-32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from doctor.demo.local import LocalJob

TARGET_S = 2.0


def timed_triage(job: LocalJob) -> tuple[float, dict]:
    start = time.monotonic()
    done = job.triage("--once", "--json")
    took = time.monotonic() - start
    if not done.stdout.strip():
        raise SystemExit(f"triage printed nothing (exit {done.returncode}): {done.stderr[-500:]}")
    return took, json.loads(done.stdout)


def measure(
    world: int, launch: str, culprit: int, runs: int, workdir: Path
) -> tuple[list[float], bool]:
    started = time.monotonic()
    job = LocalJob(
        f"bench-{world}-{os.getpid()}",
        "dataloader",
        workdir,
        launch=launch,
        world=world,
        fault_rank=culprit,
    )
    try:
        job.start(timeout=60 + 8 * world)
        print(
            f"{world} ranks ({launch}): job reached its fault in {time.monotonic() - started:.1f}s"
        )
        times, ok = [], True
        for i in range(runs):
            took, doc = timed_triage(job)
            verdict = doc["verdict"]
            right = (verdict["hang_class"], verdict["culprit_ranks"]) == ("cpu_stuck", [culprit])
            ok &= right
            times.append(took)
            seen = doc["collected"]
            print(
                f"  run {i + 1}: {took:.2f}s to verdict (collection {seen['seconds']:.2f}s, "
                f"{seen['ranks_found']}/{seen['ranks_expected']} ranks): "
                f"{verdict['hang_class']} {verdict['culprit_ranks']}"
                f"{'' if right else '  <-- WRONG'}"
            )
    finally:
        job.stop()
    return times, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-32", action="store_true", help="only the 4-rank target")
    args = parser.parse_args()
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="bench-triage-") as tmp:
        four, ok4 = measure(4, "torchrun", 2, args.runs, Path(tmp))
        median = statistics.median(four)
        print(f"4 ranks: median {median:.2f}s, max {max(four):.2f}s (target <= {TARGET_S:.1f}s)")
        ok32 = True
        if not args.skip_32:
            big, ok32 = measure(32, "per-rank", 17, 2, Path(tmp))
            print(f"32 ranks: median {statistics.median(big):.2f}s to verdict")
    if median > TARGET_S or not (ok4 and ok32):
        print("FAILED: a target of issue 4 is missed")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
