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
