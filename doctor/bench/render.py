"""The bench table in nccl-tests' layout, with the model's columns beside the measured ones.

nccl-tests prints ``time`` with one decimal below 10 ms and none above, and
bandwidths with two decimals; we keep that so the numbers line up with what
users already read, then add predicted busbw, efficiency and the algorithm the
model expects at that size.
"""

from __future__ import annotations

import statistics

from doctor.bench.result import DTYPE, BenchResult, Row
from doctor.trust.escape import escape_control

HEADER = (
    "#       size         count      type   redop     time   algbw   busbw  predicted     eff  algo"
)
UNITS = "#        (B)    (elements)                      (us)  (GB/s)  (GB/s)     (GB/s)"


def _time(us: float) -> str:
    return f"{us:8.0f}" if us >= 10000 else f"{us:8.1f}"


def format_row(row: Row) -> str:
    return (
        f"{row.bytes:12d}  {row.count:12d}  {DTYPE:>8s}  {'sum':>6s} {_time(row.time_us)}"
        f" {row.algbw_gbps:7.2f} {row.busbw_gbps:7.2f}  {row.predicted_busbw_gbps:9.2f}"
        f"  {row.efficiency:6.2f}  {escape_control(row.algorithm)}"
    )


def format_table(result: BenchResult) -> str:
    """The whole table as text: a header naming the model, one line per size, the average."""
    p = result.params
    # the device name comes from the driver and the model's source names it: shown escaped
    lines = [
        f"# nccl-doctor bench: {result.nproc} ranks, backend {escape_control(result.backend)},"
        f" device {escape_control(result.device)}",
        f"# model: {escape_control(p.source)}",
        "#",
        HEADER,
        UNITS,
    ]
    lines += [format_row(row) for row in result.rows]
    if result.rows:
        avg = statistics.fmean(row.busbw_gbps for row in result.rows)
        lines.append(f"# Avg bus bandwidth    : {avg:.4g}")
    median = result.median_efficiency()
    if median is not None:
        lines.append(f"# Median efficiency (sizes >= 1 MiB): {median:.2f}")
    return "\n".join(lines)
