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


MAX_WORLD_SIZE = 1 << 18
"""The largest world size any reader accepts (262,144 ranks: above the largest jobs run
today). A rank number or world size past it in a record, an environment or a dump is
input to refuse, not memory to allocate for."""


def bounded_rank_count(value: object) -> int | None:
    """``value`` as a world size (1..MAX_WORLD_SIZE), or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= MAX_WORLD_SIZE else None
