"""Sentences that say what the table shows: pure, from the result alone.

What users ask about, in order: where the bandwidth peaks and against what;
why busbw can exceed the line rate (NVLS); why small sizes say nothing about
the links (latency-bound); which algorithm the model expects where; and
which sizes fall short of the model.
"""

from __future__ import annotations

import math

from doctor.bench.model import busbw_factor
from doctor.bench.result import BenchResult
from doctor.bench.sizes import human

SHORT_OF_MODEL = 0.75
"""Efficiency below which a size is called out as short of the model."""


def latency_bound_below(result: BenchResult) -> int:
    """The size (to a power of two) below which the model's latency term outweighs its bandwidth."""
    p = result.params
    n = p.nranks
    per_byte_us = busbw_factor(n) / (p.link_gbps * 1e3)
    latency_us = p.base_us + 2 * (n - 1) * p.alpha_us
    return 1 << max(round(math.log2(max(latency_us / per_byte_us, 1.0))), 0)


def explain(result: BenchResult) -> list[str]:
    if not result.rows:
        return []
    p = result.params
    notes = []
    best = max(result.rows, key=lambda r: r.busbw_gbps)
    ceiling = (
        f"the host probe measured {p.link_gbps:.2f} GB/s per link before the sweep, and "
        "each size is predicted from the ring step measured beside it"
        if p.measured_steps
        else f"the model's ceiling is {p.link_gbps:.2f} GB/s per link"
        + (f" on a {p.line_gbps:.0f} GB/s line" if p.line_gbps else "")
    )
    notes.append(
        f"Peak busbw {best.busbw_gbps:.2f} GB/s at {human(best.bytes)}B "
        f"(model {best.predicted_busbw_gbps:.2f} GB/s there, efficiency "
        f"{best.efficiency:.2f}); {ceiling}."
    )
    if p.line_gbps and best.busbw_gbps > p.line_gbps:
        notes.append(
            f"busbw {best.busbw_gbps:.0f} GB/s is above the {p.line_gbps:.0f} GB/s line "
            "rate: NVLS lets the NVSwitch reduce, so each GPU moves about (1+1/n) of the "
            "buffer instead of 2(n-1)/n; busbw is then the bandwidth a ring would need."
        )
    cutoff = latency_bound_below(result)
    small = [r for r in result.rows if r.bytes < cutoff]
    if small:
        notes.append(
            f"Sizes below about {human(cutoff)}B are latency-bound "
            f"({small[0].time_us:.0f} us at {human(small[0].bytes)}B): their busbw "
            "measures step latency, not the links."
        )
    algorithms: list[tuple[str, int]] = []
    for row in result.rows:
        if not algorithms or algorithms[-1][0] != row.algorithm:
            algorithms.append((row.algorithm, row.bytes))
    if len(algorithms) > 1:
        notes.append(
            "The model expects "
            + ", then ".join(f"{algo} from {human(size)}B" for algo, size in algorithms)
            + "."
        )
    short = [r for r in result.large_rows() if r.efficiency < SHORT_OF_MODEL]
    if short:
        notes.append(
            "Below the model at "
            + ", ".join(f"{human(r.bytes)}B ({r.efficiency:.2f})" for r in short)
            + "."
        )
    return notes
