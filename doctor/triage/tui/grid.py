"""The Flight Recorder grid: ranks x collective sequence, per process group.

Built from the Flight Recorder analysis: ``FlightAnalysis.ops`` (every
collective a rank's dump kept: its pending ones and a short tail of completed
ones) gives the cells, ``FlightAnalysis.groups`` the members (so a rank that
left no dump is an empty row, not a missing one) and the first divergence,
which the grid keeps in view and marks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from doctor.flight.align import FlightAnalysis, GroupAlignment, RankOp

WINDOW = 16
"""Sequence numbers shown per process group; enough to see a mismatch and its context."""
COLLAPSE_ABOVE = 8
"""Groups with more members show one row per distinct sequence, as stack groups do."""
ABSENT = "absent"
"""The state of a cell the analysis blames for having no record (a collective never issued)."""

_OP_ABBREVIATIONS = {
    "all_reduce": "AR",
    "allreduce": "AR",
    "all_reduce_coalesced": "ARc",
    "all_gather": "AG",
    "allgather": "AG",
    "_allgather_base": "AG",
    "all_gather_into_tensor": "AG",
    "allgather_into_tensor_coalesced": "AGc",
    "all_gather_into_tensor_coalesced": "AGc",
    "reduce_scatter": "RS",
    "reduce_scatter_tensor": "RS",
    "_reduce_scatter_base": "RS",
    "reduce_scatter_tensor_coalesced": "RSc",
    "broadcast": "BC",
    "reduce": "RD",
    "gather": "GA",
    "scatter": "SC",
    "all_to_all": "A2A",
    "alltoall": "A2A",
    "alltoall_base": "A2A",
    "all_to_all_single": "A2A",
    "barrier": "BAR",
}


@dataclass(frozen=True)
class GridCell:
    """One rank's record at one sequence number."""

    op: str
    state: str
    """``scheduled``, ``started`` or ``completed``, as the Flight Recorder says, or ``ABSENT``."""
    odd: bool
    """This rank recorded something else than its peers here (or the analysis blames it)."""


@dataclass(frozen=True)
class GridRow:
    """One row of the grid: a rank, or the ranks that recorded the same."""

    ranks: tuple[int, ...]
    """One rank, or every rank with this same row when the group is large."""
    cells: tuple[GridCell | None, ...]
    """One per column; None where the rank has no record of that sequence number."""


@dataclass(frozen=True)
class GridGroup:
    """The grid of one process group: sequence numbers across, ranks down."""

    process_group: str
    desc: str
    seqs: tuple[int, ...]
    rows: tuple[GridRow, ...]
    divergence: str
    """``mismatch at #12`` and the like: the first place members disagree ('' if none)."""


def op_name(op: str) -> str:
    """``nccl:all_reduce`` -> ``all_reduce``: backends prefix the profiling name."""
    return op.rsplit(":", 1)[-1]


def op_label(op: str) -> str:
    """A short label that fits a grid cell; unknown ops keep their first letters."""
    name = op_name(op)
    return _OP_ABBREVIATIONS.get(name, name[:3])


def _window(seqs: list[int], focus: int | None, width: int) -> tuple[int, ...]:
    """The last ``width`` positions, moved back so the divergent one stays in view."""
    start = max(0, len(seqs) - width)
    if focus is not None and focus in seqs:
        start = min(start, max(0, seqs.index(focus) - 2))
    return tuple(seqs[start : start + width])


def _group(
    name: str, cells: dict[tuple[int, int], RankOp], alignment: GroupAlignment | None, width: int
) -> GridGroup:
    members = alignment.members if alignment else ()
    ranks = sorted({rank for rank, _ in cells} | set(members))
    seqs = sorted({seq for _, seq in cells})
    majority = {}
    mismatches = []
    for seq in seqs:
        votes = Counter(op_name(cells[r, seq].op) for r in ranks if (r, seq) in cells)
        majority[seq] = votes.most_common(1)[0][0]
        if len(votes) > 1:
            mismatches.append(seq)
    div = alignment.divergence if alignment else None
    blamed = set(div.culprits) if div else set()
    focus = div.seq if div and div.seq is not None else (mismatches[0] if mismatches else None)
    shown = _window(seqs, focus, width)

    def cell(rank: int, seq: int) -> GridCell | None:
        op = cells.get((rank, seq))
        at_fault = rank in blamed and seq == focus
        if op is None:
            return GridCell("", ABSENT, True) if at_fault else None
        return GridCell(op.op, op.state, at_fault or op_name(op.op) != majority[seq])

    if div is not None:
        label = f"{div.kind.replace('_', ' ')} at #{div.seq}" if div.seq is not None else div.kind
    else:
        label = f"mismatch at #{mismatches[0]}" if mismatches else ""
    row_of = {rank: tuple(cell(rank, s) for s in shown) for rank in ranks}
    collapse = len(ranks) > COLLAPSE_ABOVE
    alike: dict[object, list[int]] = {}
    for rank in ranks:
        alike.setdefault(row_of[rank] if collapse else rank, []).append(rank)
    rows = tuple(GridRow(tuple(members), row_of[members[0]]) for members in alike.values())
    return GridGroup(name, alignment.desc if alignment else "", shown, rows, label)


def grid_groups(
    ops: Iterable[RankOp], alignments: Iterable[GroupAlignment] = (), width: int = WINDOW
) -> list[GridGroup]:
    """One grid per process group with recorded collectives, in group order (0, 1, .., 10)."""
    by_group: dict[str, dict[tuple[int, int], RankOp]] = {}
    for op in ops:
        by_group.setdefault(op.group, {})[(op.rank, op.seq)] = op
    known = {a.name: a for a in alignments}
    return [
        _group(name, by_group[name], known.get(name), width)
        for name in sorted(by_group, key=lambda g: (len(g), g))
    ]


def flight_grid(flight: FlightAnalysis | None, width: int = WINDOW) -> list[GridGroup]:
    """The grids of a snapshot's Flight Recorder analysis; none when there was no dump."""
    if flight is None:
        return []
    return grid_groups(flight.ops, flight.groups, width)
