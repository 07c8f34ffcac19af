"""Ranks that cannot be read: ptrace denied, py-spy hanging, a process gone mid-collection.

py-spy is wrapped by a script (``NCCL_DOCTOR_PYSPY``) that, for one chosen pid,
really drops to user ``nobody`` (so the kernel denies ptrace), sleeps (py-spy
timing out), or kills the target first (gone mid-collection). The result must
be partial, say what is missing, arrive in bounded time, and leave the other
ranks running.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from pathlib import Path

import psutil
import pytest

from doctor.jobdir.registry import RankRecord, register_rank
from doctor.triage.discover import discover_job
from doctor.triage.sources.pyspy import PySpySource, pyspy_binary
from doctor.trust.process_identity import start_time

WRAPPER = """#!/bin/sh
pid=""
prev=""
for a in "$@"; do [ "$prev" = "--pid" ] && pid="$a"; prev="$a"; done
if [ "$pid" = "$DENY_PID" ]; then
  exec setpriv --reuid=65534 --regid=65534 --clear-groups {pyspy} "$@"
fi
if [ "$pid" = "$SLOW_PID" ]; then sleep 30; fi
if [ "$pid" = "$GONE_PID" ]; then kill -9 "$pid"; sleep 0.2; fi
exec {pyspy} "$@"
"""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="dropping privileges to deny ptrace needs root and setpriv",
)


@pytest.fixture
def wrapper(tmp_path: Path) -> Path:
    real = pyspy_binary(os.environ)
    assert real, "py-spy is a dependency"
    path = tmp_path / "py-spy-wrapper"
    path.write_text(WRAPPER.format(pyspy=real))
    path.chmod(0o755)
    return path


@needs_root
def test_denied_slow_and_gone_ranks_give_a_partial_answer(cli, sleepers, wrapper) -> None:
    # GIVEN four rank processes: one py-spy may not trace, one where py-spy hangs,
    # one that dies as py-spy starts, one readable
    ranks = [sleepers({"RANK": str(r), "WORLD_SIZE": "4"}, f"r{r}") for r in range(4)]
    env = {
        "PATH": os.environ["PATH"],
        "NCCL_DOCTOR_PYSPY": str(wrapper),
        "DENY_PID": str(ranks[1].pid),
        "SLOW_PID": str(ranks[2].pid),
        "GONE_PID": str(ranks[3].pid),
    }
    pids = ",".join(str(p.pid) for p in ranks)
    # WHEN triage looks once
    start = time.monotonic()
    done = cli("triage", "--pids", pids, "--once", "--json", "--interval", "0.3", env=env)
    took = time.monotonic() - start
    # THEN it answers in bounded time, with what is missing per rank
    assert took < 8, took
    doc = json.loads(done.stdout)
    reasons = {(s["rank"], s["probe"]): s["reason"] for s in doc["skipped"]}
    assert "ptrace denied" in reasons[(1, "py-spy")]
    assert "nccl-doctor launch" in reasons[(1, "py-spy")]
    assert "did not answer within" in reasons[(2, "py-spy")]
    assert "exited during collection" in reasons[(3, "py-spy")]
    alive = {r["rank"]: r["alive"] for r in doc["ranks"]}
    assert alive == {0: True, 1: True, 2: True, 3: False}
    # AND the ranks it looked at still run, none stopped
    for proc in ranks[:3]:
        assert psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED
        assert proc.poll() is None


AGENT_RANK = (
    "import os, sys, time\n"
    "from pathlib import Path\n"
    "from doctor.jobdir.agent import Agent\n"
    "agent = Agent(Path(os.environ['JOBDIR']), 0)\n"
    "def load_batch():\n"
    "    open(sys.argv[1], 'w').close()\n"
    "    time.sleep(120)\n"
    "load_batch()\n"
)


@needs_root
def test_when_ptrace_is_denied_the_in_rank_agent_answers(sleepers, wrapper, tmp_path) -> None:
    # GIVEN a rank started with the in-rank agent and registered like `nccl-doctor launch` does
    job = f"agent-{uuid.uuid4().hex[:8]}"
    directory = tmp_path / "jobs" / job
    rank = sleepers({"JOBDIR": str(directory), "RANK": "0", "WORLD_SIZE": "1"}, "agent", AGENT_RANK)
    register_rank(
        RankRecord(
            job,
            *(0, 1, 0, socket.gethostname(), rank.pid, time.time()),
            agent=True,
            pid_start=start_time(rank.pid) or 0,
        ),
        directory,
    )
    target = discover_job(job, {"NCCL_DOCTOR_HOME": str(tmp_path)})
    # WHEN py-spy is denied for it
    source = PySpySource(
        {**os.environ, "NCCL_DOCTOR_PYSPY": str(wrapper), "DENY_PID": str(rank.pid)},
        window=0.2,
        samples=2,
        probe_timeout=2.0,
    )
    got = source.collect(target, time.monotonic() + 5)
    # THEN its stack comes from the agent's faulthandler dump, with no problem reported
    assert not got.skipped
    (stack,) = got.stacks
    assert stack.source == "agent"
    assert stack.main is not None and "load_batch" in [f.name for f in stack.main.frames]
    assert rank.poll() is None
