"""The Flight Recorder grid rows, from the Flight Recorder analysis."""

from __future__ import annotations

import pytest
from tui_fakes import SEQ, cpu_stuck_snapshot, flight, fsdp_op

from doctor.flight.align import Divergence, RankOp
from doctor.triage.tui.grid import ABSENT, GridCell, flight_grid, grid_groups, op_label


def _ops(pg: str, ops_by_rank: dict[int, list[str]], state: str = "completed") -> list[RankOp]:
    return [
        RankOp(rank, pg, seq, op, state, ())
        for rank, ops in ops_by_rank.items()
        for seq, op in enumerate(ops, start=1)
    ]


def _odd(group) -> list[tuple[int, int]]:
    return [
        (row.ranks, seq)
        for row in group.rows
        for seq, cell in zip(group.seqs, row.cells, strict=True)
        if cell and cell.odd
    ]


def test_grid_marks_the_rank_whose_op_differs():
    # GIVEN rank 2 issued all_gather where ranks 0, 1, 3 issued all_reduce at position 3
    ops = {r: ["all_reduce", "broadcast", "all_reduce"] for r in range(4)}
    ops[2][2] = "all_gather"
    (group,) = grid_groups(_ops("0", ops))
    # THEN position 3 is a mismatch and only rank 2's cell there is odd
    assert group.divergence == "mismatch at #3"
    assert _odd(group) == [((2,), 3)]


def test_grid_marks_what_the_analysis_blames_even_when_op_names_agree():
    # GIVEN a size mismatch: same op names, the analysis blames rank 1 at seq 2
    flight_ = flight(
        2,
        culprit=-1,
        divergence=Divergence("mismatch", SEQ - 3, "all_reduce", (1,), (0,), False, "sizes differ"),
    )
    (group,) = grid_groups(flight_.ops, flight_.groups)
    assert group.divergence == f"mismatch at #{SEQ - 3}"
    assert _odd(group) == [((1,), SEQ - 3)]


def test_grid_of_a_rank_that_never_scheduled_the_collective():
    # GIVEN the realistic cpu_stuck job: rank 3 never scheduled #1842
    (group,) = flight_grid(cpu_stuck_snapshot(ranks=8, culprit=3).flight)
    # THEN its row has a blamed hole where its peers started all_reduce #1842
    assert (group.process_group, group.desc) == ("0", "default_pg")
    assert group.seqs == tuple(range(SEQ - 8, SEQ + 1))
    assert group.divergence == f"missing at #{SEQ}"
    assert group.rows[3].cells[-1] == GridCell("", ABSENT, True)
    assert group.rows[0].cells[-1] == GridCell(fsdp_op(SEQ), "started", False)
    assert fsdp_op(SEQ) == "all_reduce"
    assert _odd(group) == [((3,), SEQ)]


def test_grid_shows_a_member_that_left_no_dump_as_an_empty_row():
    flight_ = flight(4, culprit=-1)
    ops = tuple(o for o in flight_.ops if o.rank != 2)
    (group,) = grid_groups(ops, flight_.groups)
    assert [row.ranks for row in group.rows] == [(0,), (1,), (2,), (3,)]
    assert set(group.rows[2].cells) == {None}


def test_grid_of_a_large_group_collapses_identical_rows():
    # GIVEN 32 ranks, rank 29 never scheduled #1842
    (group,) = flight_grid(cpu_stuck_snapshot(ranks=32, culprit=29).flight)
    # THEN two rows: the 31 alike, then the odd one
    assert [row.ranks for row in group.rows] == [tuple(r for r in range(32) if r != 29), (29,)]
    assert _odd(group) == [((29,), SEQ)]


def test_grid_shows_a_lagging_rank_as_gaps_not_as_a_mismatch():
    ops = {0: ["all_reduce"] * 5, 1: ["all_reduce"] * 3}
    (group,) = grid_groups(_ops("0", ops))
    assert group.divergence == ""
    assert [c is None for c in group.rows[1].cells] == [False] * 3 + [True] * 2


def test_grid_window_keeps_the_first_mismatch_in_view():
    # GIVEN 40 positions with a mismatch at 5
    ops = {r: ["all_reduce"] * 40 for r in range(2)}
    ops[1][4] = "broadcast"
    (group,) = grid_groups(_ops("0", ops), width=16)
    # THEN the window starts just before it instead of showing only the last 16
    assert group.seqs == tuple(range(3, 19))


def test_grid_has_one_group_per_process_group_in_numeric_order():
    ops = _ops("10", {0: ["all_reduce"]}) + _ops("2", {0: ["barrier"]})
    assert [g.process_group for g in grid_groups(ops)] == ["2", "10"]


def test_no_flight_recorder_no_grid():
    assert flight_grid(None) == []


@pytest.mark.parametrize(
    ("op", "label"),
    [
        ("nccl:all_reduce", "AR"),
        ("gloo:all_gather", "AG"),
        ("_allgather_base", "AG"),
        ("allgather_into_tensor_coalesced", "AGc"),
        ("nccl:all_to_all", "A2A"),
        ("custom_op", "cus"),
    ],
)
def test_op_label_fits_a_grid_cell(op, label):
    assert op_label(op) == label
