"""How a set of ranks reads on one line, wherever ranks are listed to a person."""

from __future__ import annotations

from collections.abc import Iterable


def rank_ranges(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 4]`` -> ``"0-2,4"``: 32 ranks stay one short line."""
    spans: list[list[int]] = []
    for rank in sorted(set(ranks)):
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
