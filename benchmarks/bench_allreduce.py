"""Issue 6's targets, measured: a real 4-rank gloo bench under 60 s, predicted busbw within 25 %.

Runs ``nccl-doctor bench --nproc 4 --backend gloo --json`` as a user would,
then prints the wall time, the probe's parameters, each size's measured and
predicted busbw, and the median relative error over sizes of 1 MiB and up.
Also prints the model's figures for the published 8-GPU systems. Exits 1 when
a target is missed.

    .venv/bin/python benchmarks/bench_allreduce.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

WALL_LIMIT_S = 60.0
ERROR_LIMIT = 0.25


def published() -> list[str]:
    from doctor.bench.links import GPUS, Topology, params_from_topology
    from doctor.bench.model import peak

    lines = []
    for gpu, nvls, figure in (
        ("H100", False, "~370 ring"),
        ("H100", True, "~480 NVLS"),
        ("A100", True, "~235"),
    ):
        spec = GPUS[gpu]
        topo = Topology(gpu, 8, spec.nvlinks, spec.nvlink, nvswitch=True, nvls_enabled=nvls)
        best = peak(params_from_topology(topo))
        lines.append(
            f"8x{gpu} {best.algorithm.value:5s} model {best.busbw_gbps:6.1f} GB/s busbw "
            f"(published {figure})"
        )
    return lines


def one_run() -> tuple[float, float, dict]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "doctor", "bench", "--nproc", "4", "--backend", "gloo", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"bench failed: {done.stderr.strip()}")
    data = json.loads(done.stdout)
    errors = [
        row["predicted_busbw_gbps"] / row["busbw_gbps"] - 1
        for row in data["rows"]
        if row["bytes"] >= 1 << 20
    ]
    return wall, statistics.median(errors), data


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    runs = parser.parse_args().runs
    for line in published():
        print(line)
    missed = False
    for run in range(1, runs + 1):
        wall, error, data = one_run()
        model = data["model"]
        print(
            f"\nrun {run}: wall {wall:.1f} s; probe step {model['alpha_us']:.0f} us, link "
            f"{model['link_gbps']:.3f} GB/s, reduce {model['reduce_gbps']:.2f} GB/s"
        )
        for row in data["rows"]:
            if row["bytes"] >= 1 << 20:
                print(
                    f"  {row['bytes']:>10d} B  measured {row['busbw_gbps']:.3f}  predicted "
                    f"{row['predicted_busbw_gbps']:.3f} GB/s  efficiency {row['efficiency']:.2f}"
                )
        ok = wall < WALL_LIMIT_S and abs(error) <= ERROR_LIMIT
        missed |= not ok
        print(
            f"  median (predicted/measured - 1) over sizes >= 1 MiB: {error:+.1%} "
            f"[{'ok' if ok else 'MISSED'}: wall < {WALL_LIMIT_S:.0f} s, |error| <= 25%]"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
