"""Issue 24's scale target: 2,000 emulated host preflights merged and summarised in <= 10 s.

The documents are made once as ``fleet-host --preflight`` writes them (the real checks
over an H100 multi-node host's facts, ``tests/fleet_helpers.py``), five hosts odd
(another env, torch, GPU count, clock); then timed: read back + merge + exclude list
+ the terminal table + the JSON. Reported: the median of ``--runs`` runs, the table's
line count (no longer than for 11 hosts with the same five odd ones) and the process's
peak RSS. Exits 1 on a miss.

    .venv/bin/python benchmarks/bench_fleet_preflight.py [--runs N] [--hosts N]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fleet_helpers import GPUS, NOW, fleet, host_text, results  # noqa: E402
from rich.console import Console  # noqa: E402

from doctor.fleet.merge import exclude_list, merge_fleet  # noqa: E402
from doctor.fleet.render import fleet_renderable, to_json  # noqa: E402
from doctor.gpu.nvml import Fleet  # noqa: E402

TARGET_S = 10.0
RSS_LIMIT_MB = 400
MAX_LINES = 30
"""The table of any fleet: at most 16 rows, a "more rows" line, the summary and exclude."""


def odd_hosts(n: int) -> dict[str, str]:
    seven = Fleet(gpus=GPUS.gpus[:7], driver=GPUS.driver)
    return {
        "node0007": host_text("node0007", {"NCCL_IB_HCA": "mlx5_9"}),
        f"node{n // 3:04d}": host_text("x", torch="2.12.0+cu128"),
        f"node{n // 2:04d}": host_text("x", fleet=seven),
        f"node{n - 1:04d}": host_text("x", clock=NOW + 90),
        f"node{n:04d}": host_text("x", {"NCCL_NET_PLUGIN": "/opt/gone/libnccl-net.so"}),
    }


def once(texts: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    report = merge_fleet(list(texts), results(texts))
    report = type(report)(**{**report.__dict__, "exclude": exclude_list(report, False)})
    out = io.StringIO()
    Console(file=out, width=120).print(fleet_renderable(report))
    json.dumps(to_json(report))
    return time.perf_counter() - start, len(out.getvalue().splitlines())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=2000)
    args = parser.parse_args()
    small = fleet(11, odd_hosts(11))  # the same five odd hosts among 11
    _, small_lines = once(small)
    texts = fleet(args.hosts, odd_hosts(args.hosts))
    runs = [once(texts) for _ in range(args.runs)]
    median = statistics.median(s for s, _ in runs)
    lines = runs[0][1]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size_kb = sum(len(t) for t in texts.values()) / len(texts) / 1024
    print(
        f"{args.hosts} hosts ({size_kb:.1f} KiB a document): median {median:.2f} s of "
        f"{args.runs} runs (target {TARGET_S:g} s); table {lines} lines "
        f"(11 hosts, the same 5 odd: {small_lines}); "
        f"peak RSS {rss_mb:.0f} MB (limit {RSS_LIMIT_MB})"
    )
    ok = median <= TARGET_S and rss_mb <= RSS_LIMIT_MB and lines <= min(MAX_LINES, small_lines)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
