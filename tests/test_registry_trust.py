"""The registry in a shared /tmp: taken-over directories, planted links, stale and hostile
records (issue 14, item 2)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clitools import clean_env

from doctor.jobdir.agent import Agent, agent_pid, request_stack
from doctor.jobdir.registry import RankRecord, job_dir, read_ranks, register_rank
from doctor.trust.process_identity import ProcessId, start_time
from doctor.trust.safeio import UnsafePath
from doctor.trust.subproc import stop_all

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="creating another user's file needs root")
NOBODY = 65534


@needs_root
def test_a_registry_root_another_user_created_is_refused(tmp_path: Path) -> None:
    # GIVEN /tmp/nccl-doctor-<uid> created first by another user (no XDG_RUNTIME_DIR)
    root = tmp_path / f"nccl-doctor-{os.getuid()}"
    root.mkdir(mode=0o777)
    os.chown(root, NOBODY, NOBODY)
    env = {"TMPDIR": str(tmp_path)}
    # WHEN launch registers a rank there THEN it refuses, naming the owner
    with pytest.raises(UnsafePath, match="belongs to uid 65534"):
        register_rank(RankRecord("j", 0, 1, 0, "h", os.getpid(), 0.0), job_dir("j", env))
    assert not (root / "jobs").exists()


def test_a_registry_others_can_write_is_refused_and_ours_is_closed(tmp_path: Path) -> None:
    # GIVEN a registry of ours that anyone may write into
    open_root = tmp_path / "open"
    open_root.mkdir()
    open_root.chmod(0o777)
    # WHEN a rank registers there THEN it refuses: files may have been planted
    with pytest.raises(UnsafePath, match="other users can write"):
        register_rank(RankRecord("j", 0, 1, 0, "h", 1, 0.0), open_root / "jobs" / "j")
    # AND a directory of ours others may only read is closed to 0700
    readable = tmp_path / "readable"
    readable.mkdir(mode=0o755)
    readable.chmod(0o755)
    register_rank(RankRecord("j", 0, 1, 0, "h", 1, 0.0), readable)
    assert readable.stat().st_mode & 0o777 == 0o700


def test_planted_links_in_the_job_directory_are_never_written_through(tmp_path: Path) -> None:
    # GIVEN the predictable paths of torchrun's default run id, planted as links to a victim file
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    directory = job_dir("none", {"NCCL_DOCTOR_HOME": str(tmp_path / "home")})
    directory.mkdir(parents=True, mode=0o700)
    (directory / "agent-0.pid").symlink_to(victim)
    (directory / "rank-0.json").symlink_to(victim)
    # WHEN launch registers rank 0 and starts its agent
    register_rank(RankRecord("none", 0, 1, 0, "h", os.getpid(), 0.0), directory)
    with Agent(directory, 0):
        pass
    # THEN the links were replaced, the victim is untouched
    assert victim.read_text() == "precious\n"
    # AND the stack file, appended to, refuses a planted link instead of following it
    (directory / "stack-1.txt").symlink_to(victim)
    with pytest.raises(UnsafePath):
        Agent(directory, 1)
    assert victim.read_text() == "precious\n"


@pytest.fixture
def bystander(tmp_path: Path):
    """An unrelated process of the victim's, ready when it returns."""
    ready = tmp_path / "bystander.ready"
    code = "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, str(ready)])
    while not ready.exists():
        assert proc.poll() is None
        time.sleep(0.02)
    yield proc
    stop_all([proc])


@pytest.mark.parametrize("content", ["{pid}", "{pid} 12345"])
def test_a_pid_file_naming_another_process_is_never_signalled(
    tmp_path: Path, bystander: subprocess.Popen[bytes], content: str
) -> None:
    # GIVEN an agent pid file (old format, or a stale start time) that names a bystander
    directory = tmp_path / "job"
    directory.mkdir(mode=0o700)
    (directory / "agent-0.pid").write_text(content.format(pid=bystander.pid))
    # WHEN triage asks rank 0 for its stack
    answer = request_stack(directory, 0, bystander.pid, timeout=0.3)
    # THEN nothing is sent: SIGUSR2 would have killed the bystander
    time.sleep(0.2)
    assert answer is None and bystander.poll() is None


def test_a_live_agent_is_named_by_pid_and_start_time(tmp_path: Path) -> None:
    with Agent(tmp_path, 2):
        assert agent_pid(tmp_path, 2) == ProcessId(os.getpid(), start_time(os.getpid()) or 0)
    assert agent_pid(tmp_path, 2) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("world_size", 100_000_000),
        ("rank", "a"),
        ("rank", 7),
        ("pid", None),
        ("started_at", "inf"),
        ("files", ["x"]),
        ("job", "../x"),
    ],
)
def test_hostile_records_are_skipped(tmp_path: Path, field: str, value: object) -> None:
    # GIVEN one good record and one with a hostile field
    register_rank(RankRecord("j", 0, 2, 0, "h", os.getpid(), 0.0), tmp_path)
    bad = {**json.loads((tmp_path / "rank-0.json").read_text()), field: value}
    (tmp_path / "rank-1.json").write_text(json.dumps(bad))
    # WHEN the records are read THEN the hostile one is skipped, with no exception
    assert [r.rank for r in read_ranks(tmp_path)] == [0]


@pytest.mark.parametrize("record", [{"world_size": 100_000_000}, {"rank": "a"}])
def test_triage_survives_a_hostile_record(tmp_path: Path, cli, record: dict[str, object]) -> None:
    # GIVEN a planted record with a huge world size or a rank that is not a number
    home = tmp_path / "home"
    register_rank(RankRecord("hj", 0, 1, 0, socket.gethostname(), 2**22 + 9, 0.0), tmp_path / "x")
    data = {**json.loads((tmp_path / "x" / "rank-0.json").read_text()), **record}
    directory = job_dir("hj", {"NCCL_DOCTOR_HOME": str(home)})
    directory.mkdir(parents=True, mode=0o700)
    (directory / "rank-0.json").write_text(json.dumps(data))
    # WHEN triage looks for the job THEN one sentence, exit 2, no traceback
    out = cli("triage", "--job", "hj", "--once", env=clean_env({"NCCL_DOCTOR_HOME": str(home)}))
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "no rank of job 'hj'" in out.stderr


def _launch(tmp_path: Path, *cmd: str) -> subprocess.Popen[str]:
    env = clean_env({"NCCL_DOCTOR_HOME": str(tmp_path / "home"), "RANK": "0", "WORLD_SIZE": "1"})
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "doctor",
            "launch",
            "--lane",
            "single-node",
            "--job",
            "lt",
            "--",
            *cmd,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_removes_the_record_and_pid_file(tmp_path: Path) -> None:
    # GIVEN a launched rank that is running (its record and agent pid file exist)
    ready = tmp_path / "ready"
    script = tmp_path / "train.py"
    script.write_text(f"import time\nopen({str(ready)!r}, 'w').close()\ntime.sleep(60)\n")
    proc = _launch(tmp_path, sys.executable, str(script))
    directory = tmp_path / "home" / "jobs" / "lt"
    try:
        end = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        assert {"rank-0.json", "agent-0.pid"} <= {p.name for p in directory.iterdir()}
        # WHEN the launcher terminates it
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        stop_all([proc])
        proc.communicate()
    # THEN it still dies of SIGTERM, and both files are gone
    assert proc.returncode == -signal.SIGTERM
    assert not {"rank-0.json", "agent-0.pid"} & {p.name for p in directory.iterdir()}


@pytest.mark.parametrize(
    ("cmd", "sentence"),
    [
        (("python", "/nonexistent.py"), "cannot run /nonexistent.py: no such file"),
        (("/nonexistent-binary",), "cannot run /nonexistent-binary: no such file"),
        (("nonexistent-binary-x",), "cannot run nonexistent-binary-x: not found on PATH"),
        (("python", "-m", "no_such_module_x"), "no module named no_such_module_x"),
    ],
)
def test_a_launch_that_cannot_start_is_one_sentence_and_leaves_no_record(
    tmp_path: Path, cmd: tuple[str, ...], sentence: str
) -> None:
    proc = _launch(tmp_path, *cmd)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and sentence in err and "Traceback" not in err, err
    directory = tmp_path / "home" / "jobs" / "lt"
    assert not directory.exists() or not list(directory.glob("rank-*.json"))
