"""Issue 10's and 26's latency target: invocation to verdict on the 3-host cluster, at most 5 s.

Brings up the test cluster (``tests/multihost/fakecluster.py``: SLURM and sshd
in three host namespaces; needs root, skips otherwise), starts the phased gloo
job (2 ranks per host), puts rank 4 (on h3) in its data loader, then times
``nccl-doctor triage --job ID --once --json`` from the login node, N times
through srun and N times through ssh: median and p95 of the wall time of the
whole command, interpreter start-up included, and its CPU time (user + system,
its children included). Then the same with h3 cut off from the network (the
lost host, default deadline): the verdict must be ``network`` on ranks 4-5.
Tears the cluster down at the end.

    .venv/bin/python benchmarks/bench_multihost_triage.py [--runs N] [--cases found,lost]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "multihost"))

from clusterconf import ClusterNames  # noqa: E402
from conftest import PhasedJob, start_phased_job  # noqa: E402
from fakecluster import Cluster, unavailable  # noqa: E402

TARGET_S = 5.0
VIA = (("slurm", ()), ("ssh", ("--hosts", "h[1-3]")))
CASES = {
    # case: (extra triage flags, the verdict it must give)
    "found": ((), ("cpu_stuck", [4])),
    "lost": (("--timeout", "6"), ("network", [4, 5])),
}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def measure(phased: PhasedJob, case: str, runs: int) -> bool:
    """``runs`` triages of ``case`` by each transport, one line each; whether all held."""
    flags, want = CASES[case]
    ok = True
    for via, extra in VIA:
        walls, cpus, rounds, right = [], [], [], 0
        ended, wrong = Counter[str](), Counter[str]()
        loads = [os.getloadavg()[0]]
        for _ in range(runs):
            cpu, start = children_cpu(), time.monotonic()
            try:
                doc, wall, _rc = phased.triage("--via", via, *extra, *flags)
            except subprocess.TimeoutExpired:  # a starved machine: a run, not the end
                walls.append(time.monotonic() - start)
                wrong["no verdict: the command timed out"] += 1
                continue
            cpus.append(children_cpu() - cpu)
            walls.append(wall)
            rounds.append(doc["collected"]["seconds"])
            v = doc["verdict"]
            got = (v["hang_class"], v["culprit_ranks"])
            right += got == want
            if got != want:
                wrong[f"{got[0]} {got[1]}: {v['summary'][:120]}"] += 1
            ended[str(doc["collected"].get("ended", "-"))] += 1
        loads.append(os.getloadavg()[0])
        median = statistics.median(walls)
        print(
            f"{case:5s} via {via:5s}: median {median:.2f}s, p95 {p95(walls):.2f}s, "
            f"max {max(walls):.2f}s over {runs} runs (target {TARGET_S:.0f}s); "
            f"CPU median {statistics.median(cpus or [0]):.2f}s; "
            f"round median {statistics.median(rounds or [0]):.2f}s; right verdict {right}/{runs}; "
            f"round ended {dict(ended)}; load {loads[0]:.1f}-{loads[1]:.1f}",
            flush=True,
        )
        for what, count in wrong.items():
            print(f"    wrong {count}x: {what}")
        ok &= median <= TARGET_S and right == runs
    return ok


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--cases", default=",".join(CASES), help="found, lost, or both")
    args = p.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        p.error(f"unknown case {unknown[0]!r}: the cases are {', '.join(CASES)}")
    names = ClusterNames.from_env(os.environ)
    why = unavailable(names)
    if why:
        print(f"skipped: {why}")
        return 0
    base = Path(tempfile.mkdtemp(prefix="nccl-doctor-bench-cluster-"))
    cluster = Cluster(names, base)
    ok = True
    try:
        cluster.up()
        phased = start_phased_job(cluster)
        phased.enter("dataloader", 4)
        time.sleep(1)
        for case in cases:
            if case == "lost":
                cluster.cut(3)
            try:
                ok &= measure(phased, case, args.runs)
            finally:
                if case == "lost":
                    cluster.cut(3, connected=True)
        cluster.scancel(phased.job)
    finally:
        cluster.down()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
