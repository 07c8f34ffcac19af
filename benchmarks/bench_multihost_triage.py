"""Issue 10's latency target: invocation to verdict on the 3-host cluster, at most 5 s.

Brings up the test cluster (``tests/multihost/fakecluster.py``: SLURM and sshd
in three host namespaces; needs root, skips otherwise), starts the phased gloo
job (2 ranks per host), puts rank 4 (on h3) in its data loader, then times
``nccl-doctor triage --job ID --once --json`` from the login node, N times
through srun and N times through ssh: median and p95 of the wall time of the
whole command, interpreter start-up included. Tears the cluster down at the end.

    .venv/bin/python benchmarks/bench_multihost_triage.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "multihost"))

from clusterconf import ClusterNames  # noqa: E402
from conftest import start_phased_job  # noqa: E402
from fakecluster import Cluster, unavailable  # noqa: E402

TARGET_S = 5.0


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=10)
    args = p.parse_args()
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
        for via, extra in (("slurm", ()), ("ssh", ("--hosts", "h[1-3]"))):
            walls, right = [], 0
            for _ in range(args.runs):
                doc, wall, _rc = phased.triage("--via", via, *extra)
                walls.append(wall)
                v = doc["verdict"]
                right += (v["hang_class"], v["culprit_ranks"]) == ("cpu_stuck", [4])
            median = statistics.median(walls)
            print(
                f"triage via {via:5s}: median {median:.2f}s, p95 {p95(walls):.2f}s, "
                f"max {max(walls):.2f}s over {args.runs} runs (target {TARGET_S:.0f}s); "
                f"right verdict {right}/{args.runs}; load {os.getloadavg()[0]:.1f}"
            )
            ok &= median <= TARGET_S and right == args.runs
        cluster.scancel(phased.job)
    finally:
        cluster.down()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
