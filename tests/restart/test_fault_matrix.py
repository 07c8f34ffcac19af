"""The fault-injection matrix: real 4-rank gloo jobs, one process per rank, real faults.

Each case checks the world size and the numeric result of every surviving rank
(the all-reduced value only matches when every rank restarted together), the
restart event, and that no rank or monitor process is left behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from restart_jobs import WORLD, JobRun, run_job

pytestmark = pytest.mark.slow


def assert_finished(run: JobRun, ranks: list[int], world_size: int, iteration: int) -> None:
    assert sorted(run.results) == ranks, stderr_tails(run)
    for rank in ranks:
        result = run.results[rank]
        assert result["world_size"] == world_size
        assert result["iteration"] == iteration
        assert result["value"] == result["expected"]
        assert run.returncodes[rank] == 0
    assert sorted(result_rank["rank"] for result_rank in run.results.values()) == list(
        range(world_size)
    ), "ranks are shifted to close the gaps"
    assert run.leftovers == [], "no process may outlive the job"


def stderr_tails(run: JobRun, lines: int = 15) -> str:
    """Each rank's last stderr lines, as text: pytest prints a string message in full
    (a dict's repr is cut in the middle, where a traceback's last line is)."""
    return "\n".join(
        f"--- rank {r} stderr:\n" + "\n".join(text.splitlines()[-lines:])
        for r, text in sorted(run.stderr.items())
    )


def only_event(run: JobRun) -> dict:
    events = run.events()
    assert len(events) == 1, events
    return events[0]


@pytest.mark.parametrize("fault", ["raise:1:5", "hang_gil_released:2:3", "busy_loop:2:3"])
def test_in_process_restart_keeps_every_rank(tmp_path: Path, fault: str) -> None:
    # GIVEN a healthy 4-rank job WHEN one rank raises, sleeps in C, or loops without ping()
    # (a raise restarts by itself: its soft timeout is longer, so that a loaded host's slow
    # re-entry, seconds without ping(), is not a second fault; seen once in a full suite; and
    # the group's own timeout is below the hard one, so that a gloo all_reduce the release
    # did not end, now and then, ends by it: docs/restart-launchers.md)
    patient = {"SOFT": "10", "HARD": "15", "PG_TIMEOUT": "8"} if fault.startswith("raise") else None
    run = run_job(tmp_path, fault, env=patient)
    # THEN all four ranks re-enter the function once and finish with the full world
    assert_finished(run, [0, 1, 2, 3], WORLD, iteration=1)
    event = only_event(run)
    kind, rank, _ = fault.split(":")
    assert event["rank"] == int(rank)
    assert event["cause"] == ("exception" if kind == "raise" else "soft_timeout")
    assert set(event["phases"]) == {"detect", "abort", "delivered", "barrier", "reentry"}
    if kind != "raise":
        assert "inject" in event["stack"], "a soft timeout carries the stuck rank's stack"


def test_ranks_in_several_process_groups_restart_in_process(tmp_path: Path) -> None:
    # GIVEN a 4-rank job whose ranks are in three process groups each (aborted in parallel)
    # WHEN rank 2 sleeps in C while the others wait in a collective
    run = run_job(tmp_path, "hang_gil_released:2:3", env={"PG_GROUPS": "3"})
    # THEN every group is released and all four ranks finish after one restart
    assert_finished(run, [0, 1, 2, 3], WORLD, iteration=1)
    assert only_event(run)["cause"] == "soft_timeout"


@pytest.mark.parametrize(
    ("fault", "code"),
    [("exit:2:3", 3), ("sigkill:2:3", -9), ("sigterm:2:3", -15), ("hang_gil_held:2:3", -15)],
)
def test_a_lost_rank_is_dropped_and_ranks_shift(tmp_path: Path, fault: str, code: int) -> None:
    # GIVEN a 4-rank job WHEN rank 2 exits, is killed, or holds the GIL past the hard timeout
    run = run_job(tmp_path, fault)
    # THEN it is gone and the other three finish as a world of three
    assert run.returncodes[2] == code
    assert_finished(run, [0, 1, 3], 3, iteration=1)
    event = only_event(run)
    assert event["rank"] == 2 and event["terminated_ranks"] == [2]


def test_hard_timeout_stack_names_the_gil_holder(tmp_path: Path) -> None:
    # GIVEN rank 2 stuck in C while holding the GIL WHEN the soft timeout fires
    run = run_job(tmp_path, "hang_gil_held:2:3")
    event = only_event(run)
    # THEN faulthandler's stack (taken without the GIL) shows where it is stuck
    assert event["cause"] == "soft_timeout" and "in inject" in event["stack"]


def test_fault_during_a_restart(tmp_path: Path) -> None:
    # GIVEN rank 1 raises WHEN rank 3 dies inside its finalize hook, during the restart
    run = run_job(tmp_path, "during_restart:1:2")
    # THEN the other three still meet and finish without it
    assert run.returncodes[3] == -9
    assert_finished(run, [0, 1, 2], 3, iteration=1)


def test_repeated_faults_stop_at_the_retry_limit(tmp_path: Path) -> None:
    # GIVEN rank 1 raises in every iteration and max_iterations=3
    run = run_job(tmp_path, "repeat:1:2", env={"MAX_ITER": "3"})
    # THEN every rank stops cleanly with the retry-limit error, no result, nothing left
    assert run.results == {}
    for rank in range(WORLD):
        assert run.returncodes[rank] == 1
        assert "RestartLimitError" in run.stderr[rank] and "max_iterations=3" in run.stderr[rank]
    assert len(run.events()) == 2
    assert run.leftovers == []


def test_a_spare_rank_takes_over(tmp_path: Path) -> None:
    # GIVEN 3 active ranks and one spare WHEN active rank 1 is killed
    run = run_job(tmp_path, "sigkill:1:3", env={"SPARES": "1"})
    # THEN the spare (initial rank 3) joins and the world stays at three
    assert_finished(run, [0, 2, 3], 3, iteration=1)
    assert run.results[3]["rank"] == 2


def test_atomic_section_is_never_interrupted(tmp_path: Path) -> None:
    # GIVEN rank 2 inside atomic() (1 s) WHEN rank 1 raises once rank 2 is in it
    run = run_job(tmp_path, "atomic:2:3")
    assert_finished(run, [0, 1, 2, 3], WORLD, iteration=1)
    # THEN rank 2 finished the section before its abort and exception came
    end = float((run.out_dir / "atomic-end").read_text())
    event = only_event(run)
    rank2 = event["per_rank"]["2"]
    assert end - event["fault_time"] <= rank2["abort"] <= rank2["delivered"]
    assert json.loads(json.dumps(event))["rank"] == 1


@pytest.mark.parametrize("policy", ["warn", "refuse"])
def test_process_group_timeout_checked_against_hard_timeout(tmp_path: Path, policy: str) -> None:
    # GIVEN a job whose gloo timeout (3 s) is not longer than the hard timeout (4 s)
    # (warned, it goes on through a restart: rank 1 raises at step 30, 1.5 s in)
    run = run_job(
        tmp_path,
        "raise:1:30" if policy == "warn" else "none:-1:-1",
        env={"PG_TIMEOUT": "3", "TIMEOUT_POLICY": policy, "STEPS": "60", "STEP_SLEEP": "0.05"},
    )
    said = {r: run.stderr[r].count("fail timeout.watchdog-vs-hard") for r in range(WORLD)}
    if policy == "warn":  # THEN every rank says so, with preflight's check id, and goes on
        assert_finished(run, [0, 1, 2, 3], WORLD, iteration=1)
        # once: the restart's new group, with the same timeout, is not said again
        assert said == dict.fromkeys(range(WORLD), 1), said
    else:  # or the first rank to see it stops the job, and every rank refuses to go on
        assert any(said.values())
        assert run.results == {} and run.leftovers == []
        assert all("refused to go on" in run.stderr[r] for r in range(WORLD))
