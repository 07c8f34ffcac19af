"""NCCL RAS reports (text, JSON, monitor) -> events, from NVIDIA's documented samples."""

from __future__ import annotations

from pathlib import Path

from doctor.logs import kinds, parse_lines

REAL = Path(__file__).parents[1] / "fixtures" / "real"


def read(case: str, name: str = "ras.txt"):
    return parse_lines((REAL / case / name).read_text().splitlines())


def test_dead_process_and_the_communicator_rank_it_leaves_missing() -> None:
    events = read("ras-doc-dead-process")
    dead = [e for e in events if e.kind == kinds.RAS_DEAD]
    assert [(e.pid, e.host, e.device) for e in dead] == [(3487984, "172.16.64.213", "5")]
    missing = [e for e in events if e.kind == kinds.RAS_MISSING]
    assert [(e.rank, e.process_group) for e in missing] == [(21, "cf264af53edbe986")]


def test_unresponsive_process_is_missing_not_dead() -> None:
    found = {e.kind for e in read("ras-doc-unresponsive-process")}
    assert kinds.RAS_MISSING in found and kinds.RAS_DEAD not in found


def test_count_mismatch_gives_the_groups_and_the_outliers() -> None:
    events = [e for e in read("ras-doc-counts-in-flight") if e.kind == kinds.RAS_COUNT]
    groups = sorted((e.seq, e.nranks) for e in events if e.rank is None)
    assert groups == [(6649, 6), (6650, 26)]
    outliers = sorted(e.rank for e in events if e.rank is not None)
    assert outliers == [0, 2, 3, 4, 5, 7] and {e.seq for e in events if e.rank == 0} == {6649}


def test_reports_with_nothing_wrong_say_the_job_runs() -> None:
    for case in ("ras-doc-healthy", "ras-doc-finalize-transition"):
        events = read(case)
        assert [e.kind for e in events] == [kinds.PROGRESS], case


def test_json_report_and_monitor_event() -> None:
    events = read("ras-doc-json-missing-rank", "ras.json")
    assert [(e.kind, e.rank, e.pid, e.nranks) for e in events] == [
        (kinds.RAS_MISSING, 1, 1524345, 2)
    ]
    monitor = read("ras-doc-json-missing-rank", "ras-monitor.txt")
    assert [(e.kind, e.pid) for e in monitor] == [(kinds.RAS_DEAD, 1524345)]


def test_json_counts_single_out_the_ranks_behind() -> None:
    doc = """{
  "communicators": [
    {
      "hash": "0xabc", "size": 3,
      "ranks": [
        {"rank": 0, "host": "h", "pid": 1, "collective_counts": {"AllReduce": 90}},
        {"rank": 1, "host": "h", "pid": 2, "collective_counts": {"AllReduce": 90}},
        {"rank": 2, "host": "h", "pid": 3, "collective_counts": {"AllReduce": 41},
         "status": {"init_state": 0, "async_error": 6}}
      ]
    }
  ]
}"""
    events = parse_lines(doc.splitlines())
    counts = {(e.rank, e.seq) for e in events if e.kind == kinds.RAS_COUNT}
    assert counts == {(None, 90), (2, 41)}
    assert [(e.rank, e.code) for e in events if e.kind == kinds.RAS_ERROR] == [(2, 6)]


def _healthy_report_with(old: str, new: str) -> list[str]:
    """NVIDIA's documented healthy report with one line of it changed."""
    text = (REAL / "ras-doc-healthy" / "ras.txt").read_text()
    assert old in text
    return text.replace(old, new).splitlines()


def test_a_report_whose_counts_disagree_is_never_healthy() -> None:
    # GIVEN NVIDIA's healthy report with a count that no longer adds up: a node short of
    # ranks (7-8 per node, 31 in the communicator), a group short of ranks, a job summary
    # with a node of 7 processes, or a gathering timeout
    row = "    0         8         4         1         4        32   RUNNING      OK"
    summary = "      4          8            1         32       32"
    changed = [
        _healthy_report_with(row, row.replace("1         4        32", "0-1       3        32")),
        _healthy_report_with(row, row.replace("4        32", "4        28")),
        _healthy_report_with(
            summary, f"{summary}\n{summary.replace('4          8', '1          7')}"
        ),
        _healthy_report_with(summary, summary.replace("32       32", "31       31")),
        _healthy_report_with(row, row + "\n\nWarnings\n========\n\nTIMEOUT\n"),
    ]
    for lines in changed:
        # WHEN each is read THEN none says the job runs
        assert kinds.PROGRESS not in {e.kind for e in parse_lines(lines)}, lines
    # AND the report as documented still does
    assert [e.kind for e in read("ras-doc-healthy")] == [kinds.PROGRESS]
