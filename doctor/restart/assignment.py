"""Rank reassignment: which live ranks run the next iteration, under which rank."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class Assignment:
    """One rank's place in an iteration: ``rank`` is None for a waiting spare."""

    rank: int | None
    world_size: int


@dataclass(frozen=True)
class RankAssignment:
    """Shift ranks to close the gaps left by dead ranks; keep ``spares`` in reserve.

    The live initial ranks are sorted; the lowest ``target`` of them run the
    function as ranks ``0..target-1`` and the rest wait as spares, where
    ``target`` is the initial active world size (``initial - spares``) capped by
    the live count and rounded down to a multiple of ``group_size`` (groups such
    as a tensor-parallel group that must stay whole). A dead active rank is
    therefore replaced by the lowest spare, and the world shrinks only when no
    spare is left.
    """

    spares: int = 0
    group_size: int = 1

    def __post_init__(self) -> None:
        if self.spares < 0 or self.group_size < 1:
            raise ValueError("spares must be >= 0 and group_size >= 1")

    def assign(self, live: Collection[int], initial_world_size: int) -> dict[int, Assignment]:
        """The assignment of every live initial rank; empty active set when too few remain."""
        ordered = sorted(live)
        target = min(initial_world_size - self.spares, len(ordered))
        target -= target % self.group_size
        world = max(target, 0)
        return {
            initial: Assignment(index if index < world else None, world)
            for index, initial in enumerate(ordered)
        }
