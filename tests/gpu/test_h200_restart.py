"""The in-process restart wrapper on a real ProcessGroupNCCL, recorded on an H200
(tests/fixtures/gpu/h200/restart, tests/gpu_capture/restart.sh): one rank on cuda:0,
started by a plain launcher and by torchrun, healthy, raising, and asleep past the soft
timeout. What only a GPU shows: the wrapper aborts a real NCCL communicator and creates a
new one in the same process, and that abort is most of the restart's time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nvml_replay import GPU_FIXTURES

from doctor.restart.events import PHASES, SCHEMA

RECORDED = GPU_FIXTURES / "h200" / "restart"


def _result(run: Path) -> dict:
    [line] = [x for x in (run / "out").read_text().splitlines() if x.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))["result"]


@pytest.mark.parametrize("launcher", ["plain", "torchrun"])
@pytest.mark.parametrize(
    ("fault", "cause"),
    [("none", None), ("raise", "exception"), ("hang_gil_released", "soft_timeout")],
)
def test_the_wrapper_recovers_a_real_nccl_rank_in_process(
    launcher: str, fault: str, cause: str | None
) -> None:
    run = RECORDED / f"{launcher}-{fault}"
    # GIVEN what the rank printed: the job's sum is right after any restart
    result = _result(run)
    assert result["value"] == result["expected"] and result["steps"] == 8
    events = run / "events.jsonl"
    if cause is None:  # THEN a healthy job never restarts
        assert result["iteration"] == 0 and not events.exists()
        return
    # THEN a fault costs exactly one in-process restart, of the cause the fault is
    [event] = [json.loads(line) for line in events.read_text().splitlines()]
    assert result["iteration"] == 1
    assert (event["schema"], event["cause"], event["iteration"]) == (SCHEMA, cause, 1)
    assert set(event["phases"]) <= set(PHASES)
    # AND the real communicator's abort is most of the time to re-entry (gloo: ~1 ms of 10)
    phases = event["phases"]
    assert 0.5 < phases["abort"] / phases["reentry"] <= 1.0 and phases["reentry"] < 5


def test_aborting_a_rank_s_nccl_groups_in_parallel_takes_one_abort_not_one_per_group() -> None:
    # GIVEN the abort times recorded on the H200 (abort_time.jsonl): 3 runs per count
    runs = [json.loads(line) for line in (RECORDED / "abort_time.jsonl").read_text().splitlines()]
    took: dict[tuple[str, int], list[float]] = {}
    for run in runs:
        took.setdefault((run["mode"], run["groups"]), []).append(run["abort_s"])
    # THEN one after another grows by about 0.5 s a group; in parallel it stays one abort
    assert max(took["serial", 1]) < 1.5 and min(took["serial", 8]) > 4.0
    assert all(max(took["parallel", k]) < 1.5 for k in (1, 4, 8))
    # AND the wrapper's restart of a rank in 8 groups: re-entry under 1.5 s now, 4 s before
    reentry = {}
    for line in (RECORDED / "groups.txt").read_text().splitlines():
        code, fault = line.split()[:2]
        phases = json.loads(line[line.index("{") : line.index("}") + 1])
        reentry[code, fault.split(":")[0]] = phases["reentry"]
    assert all(
        reentry["new", f] < 1.5 < 4.0 < reentry["old", f] for f in ("raise", "hang_gil_released")
    )
