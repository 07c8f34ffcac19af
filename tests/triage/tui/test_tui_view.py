"""The pure functions that decide what each TUI pane shows."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.markdown import Markdown
from tui_fakes import IN_LOADER, WAITING, cpu_stuck_snapshot, rank_lost_snapshot

from doctor import playbooks
from doctor.triage.tui.app import bundle_name
from doctor.triage.tui.view import (
    frame_text,
    playbook_section,
    rank_detail,
    rank_rows,
    short_path,
    stack_groups,
)
from doctor.triage.tui.widgets.verdict_panel import render_verdict


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
            "torch/distributed/distributed_c10d.py",
        ),
        ("/usr/lib/python3/dist-packages/numpy/core.py", "numpy/core.py"),
        ("/home/ml/llm/train.py", "llm/train.py"),
        ("train.py", "train.py"),
    ],
)
def test_short_path_keeps_the_recognisable_part(path, expected):
    assert short_path(path) == expected


def test_frame_text_brief_keeps_only_the_file_name():
    frame = WAITING[0]
    assert frame_text(frame) == "all_reduce (torch/distributed/distributed_c10d.py:2811)"
    assert frame_text(frame, brief=True) == "all_reduce (distributed_c10d.py:2811)"


def test_rank_rows_mark_the_culprit_and_the_odd_stack():
    # GIVEN 8 ranks, rank 3 in its data loader, culprit of a cpu_stuck verdict
    rows = rank_rows(cpu_stuck_snapshot(ranks=8, culprit=3))
    # THEN one row per rank, rank 3 alone flagged, with its own state and position
    assert [r.rank for r in rows] == list(range(8))
    assert [r.rank for r in rows if r.culprit] == [3]
    assert [r.rank for r in rows if r.odd] == [3]
    assert rows[3].state == "data_loading"
    assert rows[3].top_frame == "__next__ (dataloader.py:733)"
    assert rows[3].fr_position == "1841/1841"
    assert rows[0].fr_position == "1842/1841"
    assert rows[3].gpu == "0% 88W"
    assert (rows[0].host, rows[0].pid, rows[0].state) == ("gpu-node-07", "41230", "in_collective")


def test_rank_rows_include_ranks_expected_but_never_seen():
    # GIVEN a job of 4 ranks where rank 3 left no process and no stack at all
    snap = cpu_stuck_snapshot(ranks=4, culprit=-1)
    evidence = replace(
        snap.evidence, processes=snap.evidence.processes[:3], stacks=snap.evidence.stacks[:3]
    )
    rows = rank_rows(replace(snap, evidence=evidence))
    # THEN it still has a row, that says so
    assert [(r.rank, r.state, r.pid, r.top_frame) for r in rows][3] == (3, "missing", "–", "–")


def test_rank_rows_mark_a_dead_rank_as_the_odd_culprit():
    rows = rank_rows(rank_lost_snapshot(ranks=4, lost=2))
    assert rows[2].state == "dead"
    assert rows[2].culprit and rows[2].odd


def test_stack_groups_collapse_identical_stacks_largest_first():
    # GIVEN 32 ranks, one of them (17) elsewhere
    groups = stack_groups(cpu_stuck_snapshot(ranks=32, culprit=17))
    # THEN two groups: the 31 waiting ranks, then the odd one out
    assert [(len(g.ranks), g.state, g.odd, g.culprit) for g in groups] == [
        (31, "in_collective", False, False),
        (1, "data_loading", True, True),
    ]
    assert groups[1].ranks == (17,)
    assert groups[0].frames == WAITING


def test_stack_groups_keep_a_rank_without_stack_apart_with_the_reason():
    groups = stack_groups(rank_lost_snapshot(ranks=4, lost=2))
    assert [(g.ranks, g.state, g.note) for g in groups] == [
        ((0, 1, 3), "in_collective", ""),
        ((2,), "dead", "py-spy: process is gone"),
    ]


def test_stack_groups_of_a_tie_mark_no_group_odd():
    # GIVEN two ranks that disagree 1:1
    groups = stack_groups(cpu_stuck_snapshot(ranks=2, culprit=1))
    # THEN neither is the odd one out: that is the classifier's call, not the display's
    assert [g.odd for g in groups] == [False, False]


def test_rank_detail_lists_the_main_thread_first_and_what_is_missing():
    detail = rank_detail(cpu_stuck_snapshot(), 3)
    assert detail.summary == (
        "rank 3 · data_loading · pid 41233 on gpu-node-07 · "
        "cpu 0.93 s during collection · stack from py-spy"
    )
    assert [t.name for t in detail.threads] == ["MainThread", "Thread-1 (_pin_memory_loop)"]
    assert detail.threads[0].frames == IN_LOADER
    lost = rank_detail(rank_lost_snapshot(lost=2), 2)
    assert (lost.threads, lost.missing) == ((), ("py-spy: process is gone",))
    assert lost.summary == "rank 2 · dead · on gpu-node-07 · exit code -9"


def test_bundle_name_is_safe_and_names_the_snapshot_time():
    assert bundle_name("job/a b", 1_795_000_000.0) == "nccl-doctor-job_a_b-20261118-110640.tar.gz"


def test_playbook_section_takes_one_heading_body():
    markdown = (
        "# cpu_stuck\n\n## Why it matters\nx\n\n## What to do\n1. look\n2. fix\n\n## References\n"
    )
    assert playbook_section(markdown) == "1. look\n2. fix"
    assert playbook_section("# no sections\n") == ""


def test_the_verdict_pane_ends_with_the_playbooks_steps():
    # GIVEN the shipped playbook of the verdict's hang class
    steps = playbook_section(playbooks.load("cpu_stuck"))
    assert steps
    # THEN the verdict pane shows it, after the panel --once prints
    parts = render_verdict(cpu_stuck_snapshot()).renderables
    assert parts[0].title == "verdict: cpu_stuck"
    assert isinstance(parts[-1], Markdown) and parts[-1].markup == steps
