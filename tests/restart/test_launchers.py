"""The wrapper under each launcher on one host, no key set by hand (issue 22, item 1).

Each job is the real 4-rank gloo job with a fault and its recovery: embedded in
the script (``Wrapper()(train)``) under a plain one-process-per-rank launcher
and under torchrun, and run by ``nccl-doctor launch --wrap`` under the plain
launcher. Ranks that cannot share rank 0's key fail at once with the sentence.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from clitools import wait_and_reap
from restart_jobs import RANK_JOB, REPO, WORLD, finish_job, start_job
from test_fault_matrix import assert_finished, only_event
from test_recover_cli import wait_running

from doctor.jobdir.registry import read_states
from doctor.trust.subproc import free_port

pytestmark = pytest.mark.slow
FAILED_AUTH = "failed authentication"


def test_plain_launcher_on_one_host_needs_no_setup(tmp_path: Path) -> None:
    # GIVEN a plain launcher: one process per rank, RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*
    # only (no job id, no job directory, no key) WHEN rank 1 raises at step 5
    run = finish_job(*start_job(tmp_path, "raise:1:5", shared_dir=False))
    # THEN every rank agreed on one key, restarted in place and finished (it hung at start)
    assert_finished(run, [0, 1, 2, 3], WORLD, iteration=1)
    assert only_event(run)["rank"] == 1
    assert not any(FAILED_AUTH in run.stderr[r] for r in range(WORLD))


def test_torchrun_embedded_wrapper_recovers_on_a_loopback_store(tmp_path: Path) -> None:
    # GIVEN the script's own Wrapper under torchrun (its agent store, its run id), one host
    out_dir, stop = tmp_path / "out", tmp_path / "stop"
    out_dir.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "NCCL_DOCTOR_HOME": str(tmp_path / "home"),
        "FAULT": "raise:2:4",
        "STOP_FILE": str(stop),
        "SOFT": "10",  # a loaded host starts four ranks unevenly
        "HARD": "15",
        "OUT_DIR": str(out_dir),
        "TORCH_CPP_LOG_LEVEL": "ERROR",
    }
    torchrun = Path(sys.executable).with_name("torchrun")
    agent_port = free_port()
    argv = [str(torchrun), "--nproc-per-node", str(WORLD), "--log-dir", str(tmp_path / "logs")]
    argv += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{agent_port}"]
    argv += ["--rdzv-id", "embedded", str(RANK_JOB)]
    job_dir = tmp_path / "home" / "jobs" / "embedded"
    # WHEN rank 2 raises at step 4
    with (tmp_path / "stdout").open("w") as out, (tmp_path / "stderr").open("w") as err:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
    try:
        wait_running(job_dir, iteration=1)
        # THEN the wrapper's store is its own, on loopback only (torch binds the agent's
        # store on every interface)
        host, _, port = read_states(job_dir)[0]["store"].rpartition(":")
        assert host == "127.0.0.1" and int(port) != agent_port
        listening = [
            c.laddr.ip
            for c in psutil.net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == int(port)
        ]
        assert listening == ["127.0.0.1"]
    finally:
        stop.touch()
        proc.wait(120)
    # AND every rank re-entered once and finished with the full world
    assert proc.returncode == 0, (tmp_path / "stderr").read_text()[-3000:]
    stdout = (tmp_path / "stdout").read_text()  # torchrun may interleave the ranks' lines
    results = [json.loads(m) for m in re.findall(r"RESULT (\{[^{}]*\{[^{}]*\}\})", stdout)]
    assert sorted(r["result"]["iteration"] for r in results) == [1] * WORLD
    assert all(r["result"]["value"] == r["result"]["expected"] for r in results)
    events = (job_dir / "events.jsonl").read_text().splitlines()
    assert [json.loads(e)["rank"] for e in events] == [2]


def test_launch_under_a_plain_launcher_recovers(tmp_path: Path) -> None:
    # GIVEN `nccl-doctor launch --wrap` started once per rank by a plain launcher
    (tmp_path / "nccl-doctor.toml").write_text(
        '[distributed]\ntimeout = "5m"\n[restart]\nsoft_timeout = "20s"\nhard_timeout = "30s"\n'
    )
    token = f"{time.time_ns()}"
    base = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "NCCL_DOCTOR_HOME": str(tmp_path / "home"),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": str(WORLD),
        "INJECT": "1",
        "STEPS": "10",
        "TORCH_CPP_LOG_LEVEL": "ERROR",
        "NCCL_DOCTOR_TEST_TOKEN": token,
    }
    argv = [sys.executable, "-m", "doctor", "launch", "--wrap", "--job", "plain", "--"]
    argv += ["python", str(REPO / "docs/examples/train_wrapped.py")]
    outs = [tmp_path / f"out{r}" for r in range(WORLD)]
    procs = []
    for rank in range(WORLD):
        with outs[rank].open("w") as out:
            env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}
            procs.append(
                subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
            )
    # WHEN rank 1 raises once at step 5
    leftovers = wait_and_reap(procs, token, 120)
    # THEN every rank re-enters the script and finishes with the full world
    text = [o.read_text() for o in outs]
    assert [p.returncode for p in procs] == [0] * WORLD, text[0][-3000:]
    for rank in range(WORLD):
        assert f"rank {rank}/4 iteration 1: value 1398100" in text[rank], text[rank][-2000:]
    event = json.loads((tmp_path / "home/jobs/plain/events.jsonl").read_text())
    assert (event["cause"], event["rank"]) == ("exception", 1) and leftovers == []


def test_ranks_without_rank_0s_key_fail_at_once_with_the_fix(tmp_path: Path) -> None:
    # GIVEN ranks 2 and 3 whose registry is not rank 0's (as on a host that does not share
    # rank 0's directory), no key in the environment
    start = time.monotonic()
    run = finish_job(*_split_job(tmp_path, tmp_path / "other-host"), timeout=60)
    took = time.monotonic() - start
    # THEN every rank stops within seconds (the barrier timeout is 20 s) with the sentence
    sentence = "set NCCL_DOCTOR_JOB_DIR to a directory every host shares"
    for rank in range(WORLD):
        assert run.returncodes[rank] not in (0, None), run.stderr[rank][-2000:]
        assert sentence in run.stderr[rank], run.stderr[rank][-2000:]
    assert "finds no store key of rank 0" in run.stderr[2] + run.stderr[3]
    # ... by the key check, not by a timeout: no rank waited out its 20 s barrier. The wall
    # time also holds four Python starts: 13-15 s here idle, 26 s at load 6 (2026-11-26)
    assert not any("timed out" in run.stderr[rank] for rank in range(WORLD)), run.stderr
    assert took < 45 and run.leftovers == []


def _split_job(tmp: Path, other: Path) -> tuple:
    """The plain job again, with ranks 2 and 3 on a registry of their own."""
    import uuid

    token = uuid.uuid4().hex
    out_dir = tmp / "out"
    out_dir.mkdir()
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": str(WORLD),
        "OUT_DIR": str(out_dir),
        "TORCH_CPP_LOG_LEVEL": "ERROR",
        "NCCL_DOCTOR_TEST_TOKEN": token,
    }
    procs = {}
    for rank in range(WORLD):
        home = tmp / "home" if rank < 2 else other
        env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank), "NCCL_DOCTOR_HOME": str(home)}
        with (out_dir / f"out{rank}").open("w") as out, (out_dir / f"err{rank}").open("w") as err:
            procs[rank] = subprocess.Popen(
                [sys.executable, str(RANK_JOB)], env=env, stdout=out, stderr=err
            )
    return procs, f"NCCL_DOCTOR_TEST_TOKEN={token}", out_dir, tmp / "home"
