"""How a set of ranks reads, wherever ranks are listed to a person.

One way for prose (``rank_prose``: "rank 2", "ranks 0, 1 and 3", "ranks 0-127
and 130") and one compact label for narrow cells (``rank_ranges``: "0-2,4").
Both fold runs of consecutive ranks, so 4096 ranks stay one short line, as
ClusterShell's ``NodeSet`` folds host lists.
"""

from __future__ import annotations

from collections.abc import Iterable

FOLD_FROM = 3
"""Consecutive ranks from which prose writes a run as a range (``0-2``), not one by one."""


def runs(ranks: Iterable[int]) -> list[tuple[int, int]]:
    """``[0, 1, 2, 4]`` -> ``[(0, 2), (4, 4)]``: sorted runs of consecutive ranks."""
    spans: list[list[int]] = []
    for rank in sorted(set(ranks)):
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return [(a, b) for a, b in spans]


def rank_ranges(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 4]`` -> ``"0-2,4"``: a label for a table cell or a grid row."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs(ranks))


def rank_list(ranks: Iterable[int]) -> str:
    """``[0, 1, 3]`` -> ``"0, 1 and 3"``; ``range(128) + [130]`` -> ``"0-127 and 130"``."""
    items: list[str] = []
    for a, b in runs(ranks):
        if b - a + 1 >= FOLD_FROM:
            items.append(f"{a}-{b}")
        else:
            items += [str(r) for r in range(a, b + 1)]
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def rank_noun(ranks: set[int]) -> str:
    """``rank`` for one rank, ``ranks`` for several: the word before a rank set."""
    return "ranks" if len(ranks) > 1 else "rank"


def rank_prose(ranks: Iterable[int], none: str = "no rank") -> str:
    """``[2]`` -> ``"rank 2"``; ``[0, 1, 3]`` -> ``"ranks 0, 1 and 3"``; ``[]`` -> ``none``
    (``"a rank"`` where the logs say something happened but not to whom)."""
    unique = set(ranks)
    if not unique:
        return none
    return f"{rank_noun(unique)} {rank_list(unique)}"


def rank_does(ranks: Iterable[int], verb: str) -> str:
    """``([2], "wait")`` -> ``"rank 2 waits"``; ``([0, 1], "wait")`` -> ``"ranks 0 and 1 wait"``."""
    unique = set(ranks)
    return f"{rank_prose(unique)} {verb if len(unique) != 1 else verb + 's'}"


MAX_WORLD_SIZE = 1 << 18
"""The largest world size any reader accepts (262,144 ranks: above the largest jobs run
today). A rank number or world size past it in a record, an environment or a dump is
input to refuse, not memory to allocate for."""


def bounded_rank_count(value: object) -> int | None:
    """``value`` as a world size (1..MAX_WORLD_SIZE), or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= MAX_WORLD_SIZE else None
