"""``bench.allreduce``: measured AllReduce bus bandwidth against the model's prediction.

Measured only under ``preflight --bench`` (it takes seconds, not milliseconds),
by ``doctor.checks.gather``. The verdict is a pure function of the result: the median efficiency
(measured/predicted busbw) over the largest sizes of the sweep, where the
bandwidth and not the latency decides, against a minimum that
``NCCL_DOCTOR_BENCH_MIN_EFFICIENCY`` (in the job's environment) can change.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from doctor.bench.result import BenchResult
from doctor.bench.sizes import human
from doctor.checks.facts import Facts
from doctor.model import Finding, Severity

CHECK = "bench.allreduce"
MIN_EFFICIENCY_ENV = "NCCL_DOCTOR_BENCH_MIN_EFFICIENCY"
DEFAULT_MIN_EFFICIENCY = 0.7
LARGE_SIZES = 3
"""How many of the largest sizes (of at least 1 MiB) the verdict looks at."""
PREFLIGHT_SIZES = "64K:16M:4"
"""A short sweep: preflight must stay quick."""


def min_efficiency(env: Mapping[str, str]) -> float:
    """The share of the model's busbw that passes (``NCCL_DOCTOR_BENCH_MIN_EFFICIENCY``)."""
    raw = env.get(MIN_EFFICIENCY_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_MIN_EFFICIENCY
    except ValueError:
        return DEFAULT_MIN_EFFICIENCY
    return value if 0 < value <= 1.5 else DEFAULT_MIN_EFFICIENCY


def likely_causes(result: BenchResult, env: Mapping[str, str]) -> list[str]:
    """What usually makes AllReduce slower than the links allow, most specific first."""
    causes = []
    if result.backend == "nccl":
        if env.get("NCCL_P2P_DISABLE") == "1":
            causes.append("NCCL_P2P_DISABLE=1 forces traffic through host memory")
        if env.get("NCCL_P2P_LEVEL"):
            causes.append(f"NCCL_P2P_LEVEL={env['NCCL_P2P_LEVEL']} may rule out the direct path")
        for name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_ALGO", "NCCL_PROTO"):
            if env.get(name):
                causes.append(f"{name}={env[name]} limits what NCCL may use")
        if result.params.nvls_gbps and env.get("NCCL_NVLS_ENABLE") == "0":
            causes.append("NVLS is off (NCCL_NVLS_ENABLE=0)")
        causes += [
            "a PCIe fallback: P2P disabled by ACS/IOMMU or a PCIe switch setting",
            "too few channels for the links (NCCL_MIN_NCHANNELS)",
            "a degraded link or throttled GPU (see gpu.pcie-link, nvlink.down, gpu.throttle)",
        ]
    else:
        causes += [
            "other work on the same cores (a shared host)",
            "more ranks than free cores",
            "GLOO_SOCKET_IFNAME on a slow interface",
        ]
    return causes


def judge(result: BenchResult, minimum: float, env: Mapping[str, str]) -> Finding:
    """Pass when the largest sizes reach ``minimum`` of the predicted busbw; fail naming them."""
    large = result.large_rows()[-LARGE_SIZES:]
    ranks = f"ranks 0-{result.nproc - 1} ({result.backend}, {result.device})"
    if not large:
        return Finding(CHECK, Severity.SKIP, ranks, "the sweep had no size of 1 MiB or more.")
    efficiency = statistics.median(r.efficiency for r in large)
    worst = min(large, key=lambda r: r.efficiency)
    sizes = f"{human(large[0].bytes)}B-{human(large[-1].bytes)}B"
    if efficiency >= minimum:
        return Finding(
            CHECK,
            Severity.PASS,
            ranks,
            f"busbw reaches {efficiency:.0%} of the model at {sizes} "
            f"(worst {worst.busbw_gbps:.2f} of {worst.predicted_busbw_gbps:.2f} GB/s "
            f"at {human(worst.bytes)}B).",
        )
    return Finding(
        CHECK,
        Severity.FAIL,
        ranks,
        f"busbw is {efficiency:.0%} of the model at {sizes}, below {minimum:.0%}: "
        f"{worst.busbw_gbps:.2f} GB/s measured against {worst.predicted_busbw_gbps:.2f} GB/s "
        f"predicted at {human(worst.bytes)}B ({result.params.source}). Likely causes: "
        + "; ".join(likely_causes(result, env))
        + ".",
        "run `nccl-doctor bench` for the whole table; NCCL_DEBUG=INFO shows the transport "
        "and channel count each rank chose",
    )


def run(facts: Facts) -> list[Finding]:
    """The verdict over what ``preflight --bench`` measured (``Facts.bench``)."""
    if facts.bench is None:
        return [
            Finding(
                CHECK,
                Severity.SKIP,
                "allreduce",
                "not run (it takes seconds): use preflight --bench.",
            )
        ]
    if facts.bench.error:
        return [
            Finding(
                CHECK,
                Severity.FAIL,
                "allreduce",
                f"the AllReduce benchmark could not run: {facts.bench.error}",
            )
        ]
    if facts.bench.result is None:
        return [Finding(CHECK, Severity.SKIP, "allreduce", "rank 0 of this job reports it.")]
    return [judge(facts.bench.result, min_efficiency(facts.env), facts.env)]
