"""The fleet benchmark's outcome as findings and JSON (pure: from the isolation's rounds)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from doctor.fleet.bisect import Culprit, Hosts, Isolation, Measure, max_rounds
from doctor.fleet.outliers import low_outliers
from doctor.model import Finding, Severity
from doctor.remote.document import DocumentError
from doctor.remote.hosts import fold, valid_host

MAX_ROUNDS = 64
FIGURES = ("link_gbps", "alpha_us", "reduce_gbps", "allreduce_us")


@dataclass(frozen=True)
class FleetBench:
    """The rounds, what they named, and the per-host figures of the first round."""

    isolation: Isolation
    nbytes: int
    round_seconds: tuple[float, ...]
    per_host: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    wall_seconds: float = 0.0
    """The whole benchmark as the login node saw it: the hosts' start-up and the rounds."""

    @property
    def culprit_hosts(self) -> tuple[str, ...]:
        return tuple(h for c in self.isolation.culprits for h in c.hosts)

    @property
    def link_outliers(self) -> list[str]:
        return low_outliers({h: v["link_gbps"] for h, v in self.per_host.items()})


def _gbps(m: Measure) -> str:
    got = "did not complete" if m.busbw_gbps is None else f"{m.busbw_gbps:.3f} GB/s"
    peer = f", {m.peer_gbps:.3f} GB/s in the best group beside it" if m.peer_gbps else ""
    return f"{got} against {m.predicted_gbps:.3f} GB/s predicted{peer}"


def bench_findings(b: FleetBench) -> list[Finding]:
    """One finding for the whole allocation, one per culprit set, one per link outlier."""
    iso, n = b.isolation, len(b.isolation.full.hosts)
    took = f"{len(iso.rounds)} round(s), {sum(b.round_seconds):.1f} s"
    full = f"AllReduce of {b.nbytes >> 20} MiB across {n} hosts: {_gbps(iso.full)}"
    if b.wall_seconds:
        took += f" ({b.wall_seconds:.1f} s with the hosts' start-up)"
    if not iso.full.short:
        out = [Finding("fleet.bench", Severity.PASS, "allreduce", f"{full} ({took})")]
    elif iso.culprits:
        out = [Finding("fleet.bench", Severity.FAIL, "allreduce", f"{full}; isolated in {took}")]
    else:  # no subset reproduced it: say so, fail nothing
        out = [Finding("fleet.bench", Severity.WARN, "allreduce", f"{full}; searched in {took}")]
    for c in iso.culprits:
        how = (
            "its sibling half was clean" if c.deduced else f"measured among {fold(c.measure.hosts)}"
        )
        why = c.measure.error or _gbps(c.measure)
        out.append(
            Finding(
                "fleet.bench-culprit",
                Severity.FAIL,
                fold(c.hosts),
                f"slow AllReduce ({how}): {why}",
            )
        )
    for group in iso.inconclusive:
        out.append(
            Finding(
                "fleet.bench-culprit",
                Severity.WARN,
                fold(group),
                "short together, but neither half was short alone: noise or the link between "
                "the halves; no host is named",
            )
        )
    figures = {h: v["link_gbps"] for h, v in b.per_host.items()}
    median = sorted(figures.values())[len(figures) // 2] if figures else 0.0
    ring = list(b.per_host)  # round 1's ring order: each host sends on, receives from behind
    for host in b.link_outliers:
        i = ring.index(host)
        nxt, prev = ring[(i + 1) % len(ring)], ring[i - 1]
        out.append(
            Finding(
                "fleet.link-outlier",
                Severity.WARN,
                host,
                f"ring exchange (to {nxt}, from {prev}) {figures[host]:.3f} GB/s, the median "
                f"host {median:.3f} GB/s (median absolute deviation)",
            )
        )
    return out


def _measure(m: Measure) -> dict[str, Any]:
    return {
        "hosts": list(m.hosts),
        "busbw_gbps": m.busbw_gbps,
        "predicted_gbps": m.predicted_gbps,
        "short": m.short,
        "error": m.error,
        "peer_gbps": m.peer_gbps,
    }


def bench_json(b: FleetBench) -> dict[str, Any]:
    iso = b.isolation
    return {
        "bytes": b.nbytes,
        "rounds": [[_measure(m) for m in r] for r in iso.rounds],
        "round_count": len(iso.rounds),
        "round_seconds": list(b.round_seconds),
        "seconds": round(sum(b.round_seconds), 2),
        "wall_seconds": round(b.wall_seconds, 2),
        "bound": max_rounds(len(iso.full.hosts)) - 2,
        "culprits": [
            {"hosts": list(c.hosts), "deduced": c.deduced, "measure": _measure(c.measure)}
            for c in iso.culprits
        ],
        "inconclusive": [list(g) for g in iso.inconclusive],
        "per_host": {h: dict(v) for h, v in b.per_host.items()},
        "link_outliers": b.link_outliers,
    }


# ---- reading (the document comes from the benchmark's rank 0, on another host) -----------


def _hosts(value: Any) -> Hosts:
    if not isinstance(value, list) or not all(isinstance(h, str) and valid_host(h) for h in value):
        raise DocumentError("a host list is not a list of host names")
    return tuple(value)


def _number(value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise DocumentError(f"{value!r} is not a number")
    return float(value)


def _read_measure(data: Any) -> Measure:
    if not isinstance(data, dict):
        raise DocumentError("a measure is not an object")
    busbw, peer = data.get("busbw_gbps"), data.get("peer_gbps")
    error = data.get("error", "")
    return Measure(
        _hosts(data.get("hosts")),
        None if busbw is None else _number(busbw),
        _number(data.get("predicted_gbps")),
        error[:300] if isinstance(error, str) else "",
        None if peer is None else _number(peer),
    )


def bench_from_json(data: Any) -> FleetBench:
    """The benchmark's outcome from rank 0's ``bench`` object, checked."""
    try:
        rounds = tuple(tuple(_read_measure(m) for m in r) for r in data["rounds"][:MAX_ROUNDS])
        culprits = tuple(
            Culprit(_hosts(c["hosts"]), _read_measure(c["measure"]), bool(c["deduced"]))
            for c in data["culprits"][: MAX_ROUNDS * 4]
        )
        inconclusive = tuple(_hosts(g) for g in data["inconclusive"][: MAX_ROUNDS * 4])
        per_host = {
            h: {k: _number(v) for k, v in figures.items() if k in FIGURES}
            for h, figures in data["per_host"].items()
            if valid_host(h) and isinstance(figures, dict)
        }
        seconds = tuple(_number(x) for x in data["round_seconds"][:MAX_ROUNDS])
        nbytes = int(_number(data["bytes"]))
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise DocumentError(f"the benchmark's document is incomplete ({exc})") from None
    if not rounds or not rounds[0]:
        raise DocumentError("the benchmark's document has no first round")
    return FleetBench(Isolation(rounds, culprits, inconclusive), nbytes, seconds, per_host)
