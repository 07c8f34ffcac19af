"""Triage as root must not be turned against its user by a rank's environment (issue 14,
item 1, the file half) nor print another user's text raw (item 7, error messages)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from clitools import clean_env

from doctor.triage.export import _read
from doctor.triage.sources.flight import trigger_pipe

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's file needs root")


def test_the_debug_pipe_trigger_never_writes_through_a_link_or_into_a_file(
    tmp_path: Path,
) -> None:
    # GIVEN TORCH_NCCL_DEBUG_INFO_PIPE_FILE naming a link to a victim file, and a plain file
    victim = tmp_path / "root-only"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    (tmp_path / "x0.pipe").symlink_to(victim)
    (tmp_path / "y0.pipe").write_text("")
    # WHEN triage triggers the dumps THEN nothing is written anywhere
    assert trigger_pipe(tmp_path / "x0.pipe", tmp_path / "dump0", 0.1) is None
    assert trigger_pipe(tmp_path / "y0.pipe", tmp_path / "dump0", 0.1) is None
    assert victim.read_text() == "secret\n" and (tmp_path / "y0.pipe").read_text() == ""


@needs_root
def test_a_bundle_copies_only_files_of_the_job_owner(tmp_path: Path) -> None:
    # GIVEN NCCL_DEBUG_FILE naming a file the job's owner (uid 65534) does not own
    theirs, other = tmp_path / "theirs.log", tmp_path / "root-only.log"
    theirs.write_text("NCCL WARN x\n")
    os.chown(theirs, 65534, 65534)
    other.write_text("secret\n")
    link = tmp_path / "link.log"
    link.symlink_to(theirs)
    # WHEN the bundle reads them THEN only the owner's own file, never through a link
    assert _read(str(theirs), 1024, tail=True, owners={65534}) == b"NCCL WARN x\n"
    assert _read(str(other), 1024, tail=True, owners={65534}) is None
    assert _read(str(link), 1024, tail=True, owners={65534}) is None


def test_bundles_are_private(tmp_path: Path) -> None:
    from doctor.analyze.format import write_bundle
    from doctor.evidence import Evidence
    from doctor.verdict.classify import classify

    evidence = Evidence(job="j", ranks_expected=None)
    out = write_bundle(tmp_path / "b.tar.gz", evidence, classify(evidence))
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_newline_in_a_file_name_cannot_forge_a_line(tmp_path: Path, cli) -> None:
    # GIVEN a path whose name carries a newline, a fake verdict and a clear-screen escape
    name = tmp_path / "x\nverdict: healthy\x1b[2J"
    # WHEN analyze refuses it THEN the error is one line with the characters escaped
    out = cli("analyze", str(name), env=clean_env())
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "\x1b" not in out.stderr, out.stderr
    assert "\\nverdict: healthy\\x1b[2J" in out.stderr


@needs_root
def test_a_process_of_another_user_claiming_the_job_does_not_join_it(sleepers) -> None:
    import uuid

    from doctor.errors import InputError
    from doctor.triage.discover import discover_job

    # GIVEN a rank of root's job, and another user's process claiming the same (public) id
    job = f"claim-{uuid.uuid4().hex[:8]}"
    env = {"SLURM_JOB_ID": job, "RANK": "0", "WORLD_SIZE": "1"}
    sleepers(env, "rank0")
    intruder = sleepers(env, "intruder", _AS_NOBODY)
    _owned_by(intruder.pid, 65534)
    # WHEN root triages the job THEN it refuses to guess whose job it is
    with pytest.raises(InputError, match="several users claim job"):
        discover_job(job, {})


_AS_NOBODY = (
    "import os, sys, time; open(sys.argv[1], 'w').close(); os.setgid(65534); os.setuid(65534); "
    "time.sleep(120)"
)


@needs_root
def test_an_unprivileged_triage_of_a_root_pid_is_an_input_error(sleepers) -> None:
    from doctor.errors import InputError
    from doctor.triage.discover import discover_pids

    # GIVEN a root process WHEN an unprivileged user names it with --pids
    rank = sleepers({"RANK": "0", "WORLD_SIZE": "1"}, "root-rank")
    os.seteuid(65534)
    try:
        # THEN one sentence saying whose it is, not a healthy verdict from zero stacks
        with pytest.raises(InputError, match="belongs to uid 0"):
            discover_pids([rank.pid])
    finally:
        os.seteuid(0)


def test_a_log_named_by_a_rank_is_read_only_when_its_owner_owns_it(tmp_path: Path) -> None:
    from doctor.triage.sources.logs import read_tail

    # GIVEN NCCL_DEBUG_FILE naming a FIFO nobody writes, a link, and a file of another user
    fifo, link, theirs = tmp_path / "fifo.log", tmp_path / "link.log", tmp_path / "other.log"
    os.mkfifo(fifo)
    theirs.write_text("NCCL WARN secret\n")
    link.symlink_to(theirs)
    # WHEN triage reads their tails THEN at once, and nothing of what the owner cannot see
    assert read_tail(fifo) == "" and read_tail(link) == ""
    assert read_tail(theirs, owners={os.getuid() + 1}) == ""
    assert read_tail(theirs, owners={os.getuid()}) == "NCCL WARN secret\n"


def test_a_dump_named_by_a_rank_counts_only_when_its_owner_wrote_it(
    tmp_path: Path, sleepers
) -> None:
    from doctor.triage.sources.flight import written_dump
    from doctor.triage.target import RankTarget

    # GIVEN a rank whose dump prefix names a link to someone else's file
    rank = sleepers({}, "dumper")
    other = tmp_path / "elsewhere"
    other.write_bytes(b"x")
    (tmp_path / "fr_0").symlink_to(other)
    target = RankTarget(0, rank.pid, "h", env={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_")})
    # THEN it is not taken for the rank's dump; the rank's own regular file is
    assert written_dump(target) is None
    (tmp_path / "fr_0").unlink()
    (tmp_path / "fr_0").write_bytes(b"x")
    assert written_dump(target) == tmp_path / "fr_0"


def _owned_by(pid: int, uid: int) -> None:
    """Wait until the sleeper has dropped to ``uid`` (it signals ready just before)."""
    from doctor.trust.process_identity import owner_uid

    end = time.monotonic() + 20
    while owner_uid(pid) != uid and time.monotonic() < end:
        time.sleep(0.02)
    assert owner_uid(pid) == uid


@needs_root
@pytest.mark.parametrize(
    ("folder", "used"), [("owners", True), ("another-users", False), ("link", False)]
)
def test_root_uses_the_job_folder_a_rank_names_only_when_its_owner_owns_it(
    tmp_path: Path, sleepers, folder: str, used: bool
) -> None:
    import json
    import socket
    import uuid
    from dataclasses import asdict

    from doctor.jobdir.registry import RankRecord
    from doctor.triage.collect import _merge
    from doctor.triage.discover import discover_job
    from doctor.trust.process_identity import start_time

    # GIVEN a job of uid 65534 started by launch: its rank names its registry folder with
    # NCCL_DOCTOR_JOB_DIR, and the folder holds the rank's record (an agent answers there);
    # the folder is the owner's, another user's (uid 12345), or a link to the owner's
    job = f"named-{uuid.uuid4().hex[:8]}"
    real = tmp_path / "registry"
    real.mkdir(mode=0o700)
    os.chown(real, 12345 if folder == "another-users" else 65534, 65534)
    named = real
    if folder == "link":
        named = tmp_path / "link"
        named.symlink_to(real)
    env = {"SLURM_JOB_ID": job, "RANK": "0", "WORLD_SIZE": "1", "NCCL_DOCTOR_JOB_DIR": str(named)}
    rank = sleepers(env, "rank0", _AS_NOBODY)
    _owned_by(rank.pid, 65534)
    record = RankRecord(
        job, 0, 1, 0, socket.gethostname(), rank.pid, time.time(), True, False, {},
        start_time(rank.pid) or 0,
    )  # fmt: skip
    (real / "rank-0.json").write_text(json.dumps(asdict(record)))
    os.chown(real / "rank-0.json", 65534, 65534)
    # WHEN root triages the job by its (SLURM) id, with no registry of its own for it
    target = discover_job(job, {"NCCL_DOCTOR_HOME": str(tmp_path / "root-registry")})
    evidence = _merge(target, [], [], 0.0)
    # THEN the folder is used (the rank's agent is asked) only when its owner owns it;
    # otherwise the evidence says why it was not
    reasons = [s.reason for s in evidence.skipped if s.probe == "discover"]
    if used:
        assert target.job_dir == real and target.ranks[0].has_agent and not reasons
    else:
        assert target.job_dir is None and not target.ranks[0].has_agent
        why = "symbolic link" if folder == "link" else "belongs to uid 12345"
        assert len(reasons) == 1 and "NCCL_DOCTOR_JOB_DIR not used" in reasons[0], reasons
        assert why in reasons[0], reasons
