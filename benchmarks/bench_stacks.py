"""Stack requests to a rank whose threads run Python: does the rank survive, how long do
they take?

Two ways to get every thread's stack without ptrace, against the same rank
(``stack_bench_rank.py``: three helper threads pushing and freeing frames):

* **signal** — SIGUSR2 straight to ``faulthandler``'s C handler, what the agent did
  before: its walk of the other threads is not synchronised with them. Sent every
  2 ms, ``--signals`` per rank, over ``--ranks`` fresh ranks; crashes counted.
* **request** — ``doctor.jobdir.agent.request_stack``: the agent dumps under the GIL, and
  signals only when the GIL is held. ``--requests`` in a row; crashes counted and the
  latency's median and 95th percentile, for a rank with its GIL free and one whose
  main thread holds it in C (the signal fallback, after the handoff wait).

Exits 1 when a request crashed a rank or a request went unanswered.

    .venv/bin/python benchmarks/bench_stacks.py [--ranks 10] [--signals 1000] [--requests 100]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from doctor.jobdir.agent import request_stack

RANK = Path(__file__).resolve().parent / "stack_bench_rank.py"


def start(directory: Path, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(RANK), str(directory), "600", mode], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def raw_signals(ranks: int, signals: int) -> tuple[int, int]:
    """(crashed ranks, signals sent in all)."""
    crashed = sent = 0
    for _ in range(ranks):
        with tempfile.TemporaryDirectory() as folder:
            proc = start(Path(folder), "free")
            for _ in range(signals):
                if proc.poll() is not None:
                    break
                os.kill(proc.pid, signal.SIGUSR2)
                sent += 1
                time.sleep(0.002)
            time.sleep(0.1)
            crashed += proc.poll() is not None
            stop(proc)
    return crashed, sent


def requests(mode: str, count: int) -> tuple[list[float], int, bool]:
    """(latencies of answered requests, unanswered, crashed)."""
    latencies, unanswered = [], 0
    with tempfile.TemporaryDirectory() as folder:
        proc = start(Path(folder), mode)
        for _ in range(count):
            began = time.monotonic()
            text = request_stack(Path(folder), 0, proc.pid, timeout=5)
            if text is None:
                unanswered += 1
            else:
                latencies.append(time.monotonic() - began)
        crashed = proc.poll() is not None
        stop(proc)
    return latencies, unanswered, crashed


def quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    p95 = statistics.quantiles(values, n=20)[18]
    return f"median {statistics.median(values):.3f} s, p95 {p95:.3f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=10)
    parser.add_argument("--signals", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()
    crashed, sent = raw_signals(args.ranks, args.signals)
    print(f"signal:  {crashed} of {args.ranks} ranks crashed ({sent} signals)")
    failed = False
    for mode in ("free", "gil"):
        latencies, unanswered, died = requests(mode, args.requests)
        print(
            f"request (GIL {mode}): {args.requests} requests, {unanswered} unanswered, "
            f"rank {'CRASHED' if died else 'alive'}; {quantiles(latencies)}"
        )
        failed |= died or unanswered > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
