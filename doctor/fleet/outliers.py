"""Statistical outliers among per-host figures: median absolute deviation, no fixed threshold.

A host is an outlier when its robust z-score ``0.6745 (x - median) / MAD`` is past
``Z_LIMIT`` (Iglewicz and Hoaglin's 3.5) on the bad side. The MAD has a floor of
``MIN_SPREAD`` of the median: on a fleet whose hosts agree to within a percent, a host
two percent off is noise, not a culprit; with the floor, an outlier is below about a
fifth of the median (hosts sharing a busy CPU were seen at a third of it, and a link
rate-limited to 200 Mbit/s at a twentieth).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

Z_LIMIT = 3.5
MIN_SPREAD = 0.15


def robust_z(values: Mapping[str, float]) -> dict[str, float]:
    """Each host's robust z-score (0 for all when fewer than 3 hosts)."""
    if len(values) < 3:
        return dict.fromkeys(values, 0.0)
    median = statistics.median(values.values())
    mad = statistics.median(abs(v - median) for v in values.values())
    spread = max(mad, MIN_SPREAD * abs(median), 1e-12)
    return {h: 0.6745 * (v - median) / spread for h, v in values.items()}


def low_outliers(values: Mapping[str, float]) -> list[str]:
    """Hosts whose figure is far below the others' (a bandwidth), worst first."""
    z = robust_z(values)
    return sorted((h for h, s in z.items() if s < -Z_LIMIT), key=z.__getitem__)
