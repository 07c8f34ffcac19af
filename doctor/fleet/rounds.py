"""A round's groups judged by the model (pure): what ``worker``'s rank 0 calls per round.

The first round (every host) sets the reference: the median host's step latency,
link bandwidth and reduction throughput, which is what every link would give if
none were slow; each group's AllReduce is predicted from that reference by the ring
model of ``nccl-doctor bench`` for its own size, and measured as the median
member's fastest AllReduce.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from doctor.bench.model import ModelParams, busbw_factor, predict
from doctor.fleet.bisect import Hosts, Measure


@dataclass(frozen=True)
class Reference:
    """The median host's figures from the first round: a healthy link."""

    alpha_us: float
    link_gbps: float
    reduce_gbps: float

    def predicted(self, nranks: int, nbytes: int) -> float:
        params = ModelParams(nranks, self.alpha_us, self.link_gbps, reduce_gbps=self.reduce_gbps)
        return predict(params, nbytes).busbw_gbps


def group_measure(
    group: Hosts,
    docs: Mapping[str, Mapping[str, Any]],
    ref: Reference,
    nbytes: int,
    reasons: Mapping[str, str],
) -> Measure:
    """A group's bus bandwidth from its members' documents: the median member's AllReduce."""
    predicted = ref.predicted(len(group), nbytes)
    times = [float(docs[h]["allreduce_us"]) for h in group if h in docs]
    if len(times) < len(group):
        why = "; ".join(f"{h}: {reasons.get(h) or 'no result'}" for h in group if h not in docs)
        return Measure(group, None, predicted, why[:300])
    busbw = nbytes / (statistics.median(times) * 1e3) * busbw_factor(len(group))
    return Measure(group, round(busbw, 4), round(predicted, 4))


def reference(docs: Mapping[str, Mapping[str, Any]]) -> Reference:
    values = list(docs.values())
    return Reference(
        statistics.median(float(d["alpha_us"]) for d in values),
        statistics.median(float(d["link_gbps"]) for d in values),
        statistics.median(float(d["reduce_gbps"]) for d in values),
    )
