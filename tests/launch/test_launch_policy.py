"""The launch env policy per lane, and the prologue end to end (real CLI, real ranks)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from doctor.launch.policy import apply_policy

LEAKY = {
    "NCCL_IB_HCA": "mlx5_0",
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_NET_PLUGIN": "aws-ofi",
    "NCCL_NVLS_ENABLE": "1",
    "PATH": "/bin",
}


@pytest.mark.parametrize(
    ("lane", "wrap", "unset", "forced"),
    [
        (
            "single-node",
            False,
            ["NCCL_IB_HCA", "NCCL_NET_PLUGIN"],
            {"NCCL_IB_DISABLE": "1", "NCCL_NET_PLUGIN": "none"},
        ),
        ("multi-node", False, [], {}),
        ("multi-node", True, [], {"NCCL_NVLS_ENABLE": "0", "NCCL_NET_PLUGIN": "none"}),
    ],
)
def test_policy_per_lane(
    tmp_path: Path, lane: str, wrap: bool, unset: list[str], forced: dict[str, str]
) -> None:
    policy = apply_policy(LEAKY, lane, wrap, "j1", tmp_path, rank=3)
    assert policy.unset == unset
    assert policy.changed == forced
    env = policy.env
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"  # not multi-node tuning: kept
    if lane == "multi-node":
        assert env["NCCL_IB_HCA"] == "mlx5_0", "the multi-node lane keeps IB"
    assert env["NCCL_DEBUG_FILE"] == str(tmp_path / "nccl-3.log")
    assert env["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert env["NCCL_DOCTOR_JOB_DIR"] == str(tmp_path) and env["NCCL_DOCTOR_JOB"] == "j1"


def test_policy_keeps_the_users_flight_recorder_size(tmp_path: Path) -> None:
    env = apply_policy({"TORCH_FR_BUFFER_SIZE": "64"}, "single-node", False, "j", tmp_path, 0).env
    assert env["TORCH_FR_BUFFER_SIZE"] == "64"


def test_launch_runs_the_script_in_the_rank_and_registers_it(tmp_path: Path, cli) -> None:
    # GIVEN a single-rank job and a script that reports its environment
    script = tmp_path / "show.py"
    script.write_text(
        "import json, os, sys\nfrom doctor.jobdir.agent import running_agent\n"
        "record = json.load(open(os.environ['NCCL_DOCTOR_JOB_DIR'] + '/rank-0.json'))\n"
        "print(json.dumps({'argv': sys.argv, 'ib': os.environ.get('NCCL_IB_HCA'),"
        " 'agent': running_agent() is not None, 'record': record}))\n"
    )
    env = {
        "PATH": os.environ["PATH"],
        "NCCL_DOCTOR_HOME": str(tmp_path / "home"),
        "NCCL_IB_HCA": "mlx5_0",
        "RANK": "0",
        "WORLD_SIZE": "1",
    }
    # WHEN it is launched through the prologue
    out = cli(
        "launch",
        "--lane",
        "single-node",
        "--job",
        "j7",
        "--",
        sys.executable,
        str(script),
        "--flag",
        env=env,
    )
    # THEN the script ran in-process with the agent, the sanitised env and its argv
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout.strip().splitlines()[-1])
    record = shown.pop("record")
    assert shown == {"argv": [str(script), "--flag"], "ib": None, "agent": True}
    assert "unset NCCL_IB_HCA" in out.stderr and "preflight" in out.stderr
    assert record["agent"] and record["files"]["nccl_debug_file"].endswith("nccl-0.log")
    # AND the record and the agent's pid file are gone once the rank has exited
    left = {p.name for p in (tmp_path / "home" / "jobs" / "j7").iterdir()}
    assert not left & {"rank-0.json", "agent-0.pid"}, left


def test_launch_without_a_job_id_is_a_usage_error(tmp_path: Path, cli) -> None:
    out = cli("launch", "--", "true", env={"PATH": os.environ["PATH"]})
    assert out.returncode == 2 and "no job id" in out.stderr and "Traceback" not in out.stderr
