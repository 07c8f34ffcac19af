"""Root's triage and watcher on a node other users share, and hostile hosts (issue 21).

Every attack is played as it would be: two real ordinary users (the job's owner and
another), real links and FIFOs, root running nccl-doctor; a hostile host through a
stand-in ``srun`` or ``ssh`` on PATH.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from users import User, ordinary_user

from doctor.errors import InputError, NoSuchJobError, UsageError

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="playing two users needs root")


@pytest.fixture
def owner() -> User:
    return ordinary_user("ncdt-owner")


@pytest.fixture
def other() -> User:
    return ordinary_user("ncdt-other")


def _root_only(tmp_path: Path) -> Path:
    folder = tmp_path / "root-only"
    folder.mkdir(mode=0o700)
    (folder / "secret").write_text("root's secret\n")
    (folder / "rank_0.error").write_text("root's file\n")
    return folder


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``'s value; fails (instead of hanging the suite) when it takes longer."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _release(fifo: Path) -> None:
    """Let a reader stuck on ``fifo`` (the old code) go."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@needs_root
def test_root_never_writes_or_deletes_through_a_linked_requests_or_fr_folder(
    tmp_path: Path, owner: User
) -> None:
    from doctor.jobdir.agent import ask_for_stacks, request_fr_dump

    # GIVEN the owner's job folder whose requests/ and fr/ are links to a root-only folder
    victim = _root_only(tmp_path)
    job = tmp_path / "job"
    job.mkdir(mode=0o700)
    (job / "requests").symlink_to(victim)
    (job / "fr").symlink_to(victim)
    owner.own(job, job / "requests", job / "fr")
    before = sorted(p.name for p in victim.iterdir())
    # WHEN root's triage asks rank 0 for a dump and for its stacks
    assert request_fr_dump(job, 0, 0.3) is None
    assert ask_for_stacks(job, 0, lambda: True, 0.3, owner.uid) is None
    # THEN nothing was created or deleted in the root-only folder
    assert sorted(p.name for p in victim.iterdir()) == before
    assert (victim / "rank_0.error").read_text() == "root's file\n"


@needs_root
def test_the_walk_refuses_links_strangers_and_fifos_at_every_step(
    tmp_path: Path, owner: User, other: User
) -> None:
    from doctor.trust.safeio import TrustedDir, UnsafePath

    # GIVEN the owner's folder, a link in its path, another user's folder inside, a FIFO
    home = tmp_path / "home"
    (home / "job").mkdir(parents=True, mode=0o700)
    (home / "theirs").mkdir(mode=0o700)
    (home / "via").symlink_to(home / "job")
    os.mkfifo(home / "job" / "fifo")
    (home / "job" / "rootfile").write_text("x")
    owner.own(home, home / "job", home / "via", home / "job" / "fifo")
    other.own(home / "theirs")
    # THEN each is refused, at once, by name
    with pytest.raises(UnsafePath, match="symbolic link"):
        TrustedDir.open(home / "via", owner.uid)
    with pytest.raises(UnsafePath, match="belongs to uid"):
        TrustedDir.open(home / "theirs", owner.uid)
    with TrustedDir.open(home / "job", owner.uid) as folder:
        with pytest.raises(UnsafePath, match="not a regular file"):
            _within(5, lambda: folder.read("fifo", 100))
        with pytest.raises(UnsafePath, match="belongs to uid 0"):
            folder.read("rootfile", 100)
    # AND a folder of the owner's that others may write is no folder to trust
    (home / "job").chmod(0o777)
    with pytest.raises(UnsafePath, match="other users can write"):
        TrustedDir.open(home / "job", owner.uid)


def _plant_ended(tmp: Path, job: str, user: User, victim: Path) -> Path:
    """``tmp/torchelastic_x/<job>_1/attempt_0/{0,1}`` of ``user``: rank 0's error file a
    FIFO, rank 1's stderr.log a link to ``victim``."""
    run = tmp / "torchelastic_x" / f"{job}_1"
    attempt = run / "attempt_0"
    (attempt / "0").mkdir(parents=True)
    (attempt / "1").mkdir()
    os.mkfifo(attempt / "0" / "error.json")
    (attempt / "1" / "stderr.log").symlink_to(victim)
    user.own(
        tmp / "torchelastic_x",
        run,
        attempt,
        attempt / "0",
        attempt / "1",
        attempt / "0" / "error.json",
        attempt / "1" / "stderr.log",
    )
    (tmp / "torchelastic_x").chmod(0o700)
    return attempt


@needs_root
def test_a_planted_ended_job_folder_reads_no_secret_and_never_blocks(
    tmp_path: Path, other: User
) -> None:
    from doctor.triage.ended import ended_torchrun_job

    # GIVEN another user's folder for run id "planted": a FIFO and a link to root's secret
    victim = _root_only(tmp_path) / "secret"
    attempt = _plant_ended(tmp_path, "planted", other, victim)
    try:
        # WHEN root triages the ended job THEN at once, and no line of the secret
        target = _within(10, lambda: ended_torchrun_job("planted", tmp=tmp_path))
    finally:
        _release(attempt / "0" / "error.json")
    assert target is not None
    assert all("secret" not in lost.error for lost in target.lost)


@needs_root
def test_folders_of_two_users_for_one_run_id_are_not_guessed_between(
    tmp_path: Path, owner: User, other: User
) -> None:
    from doctor.triage.ended import ended_torchrun_job

    # GIVEN the owner's ended run and another user's planted one with the same run id
    for user, name in ((owner, "torchelastic_a"), (other, "torchelastic_b")):
        rank = tmp_path / name / "train_1" / "attempt_0" / "0"
        rank.mkdir(parents=True)
        (rank / "error.json").write_text(json.dumps({"message": f"{user.name} wrote this"}))
        for path in (tmp_path / name, *rank.parents[:3], rank, rank / "error.json"):
            user.own(path)
    # WHEN root triages it THEN it says whose they are instead of picking one
    with pytest.raises(InputError, match="several users"):
        ended_torchrun_job("train", tmp=tmp_path)
    # AND with the owner known, only the owner's folder counts
    target = ended_torchrun_job("train", tmp=tmp_path, owner=owner.uid)
    assert target is not None and target.lost[0].error == "ncdt-owner wrote this"


def _scontrol(tmp: Path, user: User, state: str, nodes: str) -> dict[str, str]:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    path = bindir / "scontrol"
    path.write_text(
        f"#!/bin/sh\necho 'JobId=777 UserId={user.name}({user.uid}) JobState={state} "
        f"NodeList={nodes} NumNodes=2'\n"
    )
    path.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


@pytest.fixture
def tmpdir_is(tmp_path: Path) -> Iterator[Path]:
    """``tempfile.gettempdir()`` is ``tmp_path`` (where torchrun's folders are looked for)."""
    import tempfile

    saved, tempfile.tempdir = tempfile.tempdir, str(tmp_path)
    try:
        yield tmp_path
    finally:
        tempfile.tempdir = saved


@needs_root
def test_a_slurm_job_id_is_asked_of_slurm_not_of_a_planted_folder(
    tmpdir_is: Path, owner: User, other: User
) -> None:
    from doctor.remote.reach import Via, plan_job
    from doctor.triage.hostjobs import find_job

    # GIVEN another user's folder for SLURM job 777, which runs on n1 and n2 for the owner
    victim = _root_only(tmpdir_is) / "secret"
    attempt = _plant_ended(tmpdir_is, "777", other, victim)
    _release(attempt / "0" / "error.json")
    (attempt / "0" / "error.json").unlink()
    env = _scontrol(tmpdir_is, owner, "RUNNING", "n[1-2]")
    # WHEN root plans triage of job 777 THEN SLURM's nodes are asked, the folder ignored
    reach = plan_job("777", env)
    assert reach is not None and reach.via is Via.SLURM and reach.hosts == ("n1", "n2")
    # AND once the job ended, only its owner's folder could count: there is none
    env = _scontrol(tmpdir_is, owner, "COMPLETED", "(null)")
    with pytest.raises(NoSuchJobError):
        find_job("777", env)


@needs_root
def test_a_lost_ranks_error_file_is_read_only_through_the_owners_folders(
    tmp_path: Path, owner: User
) -> None:
    from doctor.triage.discover import _lost_rank
    from doctor.triage.target import RankTarget

    # GIVEN a live rank 0 of the owner whose TORCHELASTIC_ERROR_FILE is under the owner's
    # attempt folder, where rank 1's folder is a link to a root-only folder
    victim = _root_only(tmp_path)
    (victim / "error.json").write_text(json.dumps({"message": "root's secret"}))
    attempt = tmp_path / "torchelastic_x" / "job_1" / "attempt_0"
    (attempt / "0").mkdir(parents=True)
    (attempt / "1").symlink_to(victim)
    for path in (*list(attempt.parents)[:2], attempt, attempt / "0", attempt / "1"):
        owner.own(path)
    rank0 = owner.run(["sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{rank0.pid}").stat().st_uid != owner.uid:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        env = {"TORCHELASTIC_ERROR_FILE": str(attempt / "0" / "error.json")}
        peer = RankTarget(0, rank0.pid, "h", 0, 2, env)
        # WHEN root looks at lost rank 1 THEN the secret is not its error
        lost = _lost_rank(1, [peer], None, Path("/proc"))
    finally:
        rank0.kill()
        rank0.wait()
    assert "secret" not in lost.error and lost.status == "missing"


@needs_root
def test_the_watcher_keeps_its_ranks_when_another_user_claims_the_job(
    owner: User, other: User, capsys: pytest.CaptureFixture[str]
) -> None:
    import uuid

    from doctor.watch.roster import DiscoveryRoster

    # GIVEN the owner's rank 0 of job J, watched by root
    job = f"claim-{uuid.uuid4().hex[:8]}"
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": job, "RANK": "0", "WORLD_SIZE": "1"}
    procs = [owner.run(["sleep", "60"], env)]
    try:
        roster = DiscoveryRoster(job, {}, 1.0)
        _eventually(lambda: [m.target.pid for m in roster.members()] == [procs[0].pid])
        # WHEN another user's process claims the same job id mid-run
        procs.append(other.run(["sleep", "60"], env))
        stranger = f"uid {other.uid}'s processes (pids {procs[1].pid})"
        said: list[str] = []

        def named() -> bool:
            # THEN the watcher keeps watching the owner's rank on every look
            assert [m.target.pid for m in roster.members()] == [procs[0].pid]
            said.append(capsys.readouterr().err)
            return stranger in "".join(said)

        # AND names the stranger as soon as its process is there (setpriv's own moments as
        # root, before it runs as the other user, are not the stranger yet), and only once
        try:
            _eventually(named, seconds=20)
        except AssertionError as exc:  # what the stranger's process was, for the failure
            state = _proc_status(procs[1].pid)
            raise AssertionError(f"{exc}; said {said!r}; the stranger's status {state!r}") from exc
        roster.members()
        assert "".join(said + [capsys.readouterr().err]).count(stranger) == 1
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _proc_status(pid: int) -> str:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as exc:
        return str(exc)
    return "; ".join(line for line in lines if line.split(":")[0] in ("Name", "State", "Uid"))


def _eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_a_hostfile_that_is_a_fifo_or_a_link_to_dev_zero_is_refused_at_once(
    tmp_path: Path,
) -> None:
    import subprocess

    # GIVEN --hostfile naming a FIFO nobody writes, and a link to /dev/zero
    fifo, zero = tmp_path / "hosts.fifo", tmp_path / "hosts.zero"
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    code = (
        "import resource, sys; from pathlib import Path\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))\n"
        "from doctor.errors import InputError\n"
        "from doctor.remote.hosts import read_hostfile\n"
        "try:\n    read_hostfile(Path(sys.argv[1]))\n"
        "except InputError as exc:\n    print('refused:', exc)\n"
    )
    for path in (fifo, zero):
        # WHEN triage reads it THEN it is refused within seconds, in one sentence
        try:
            done = subprocess.run(
                [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=30
            )
        finally:
            _release(fifo)
        assert done.returncode == 0 and done.stdout.startswith("refused:"), done.stderr[-300:]
        assert "not a regular file" in done.stdout


def test_host_names_are_host_names_and_ssh_gets_them_after_a_double_dash(tmp_path: Path) -> None:
    from doctor.remote.frames import encode
    from doctor.remote.hosts import parse_hosts
    from doctor.remote.ssh import collect_via_ssh

    # GIVEN a host name that ssh would read as an option
    with pytest.raises(UsageError, match="not a host name"):
        parse_hosts("good1,-oProxyCommand=touch_pwned")
    # AND a launch record naming one (records reach ssh without parse_hosts), with a fake
    # ssh that logs its arguments
    log = tmp_path / "argv"
    lines = " ".join(f"'{line}'" for line in encode("good1", '{"ok": true}'))
    ssh = tmp_path / "ssh"
    ssh.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {log}\nprintf "%s\\n" {lines}\n')
    ssh.chmod(ssh.stat().st_mode | stat.S_IEXEC)
    answers = collect_via_ssh(
        ["good1", "-oProxyCommand=touch_pwned"], ["true"], 5.0, {"NCCL_DOCTOR_SSH": str(ssh)}
    )
    # THEN the bad name never reaches ssh, and the good one comes after --
    argv = log.read_text().splitlines()
    assert "-oProxyCommand=touch_pwned" not in argv
    assert argv[argv.index("good1") - 1] == "--"
    assert answers["good1"].text == '{"ok": true}'
    assert answers["-oProxyCommand=touch_pwned"].reason == "not a host name"


def test_a_node_cannot_answer_for_another_node_through_srun(tmp_path: Path) -> None:
    from doctor.remote.frames import encode
    from doctor.remote.slurm import collect_via_srun

    # GIVEN an srun whose task 0 (gpu001) sends a document tagged as gpu002's, and whose
    # own unlabelled output carries another forged one; gpu002 (task 1) stays silent
    forged = list(encode("gpu002", '{"forged": 1}'))
    unlabelled = list(encode("gpu003", '{"forged": 2}'))
    script = "#!/bin/sh\n" + "".join(f"echo '0: {line}'\n" for line in forged)
    script += "".join(f"echo '{line}'\n" for line in unlabelled) + "exec sleep 30\n"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "srun").write_text(script)
    (bindir / "srun").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    # WHEN collected
    answers = collect_via_srun("4242", ["gpu001", "gpu002", "gpu003"], ["collect"], 1.5, env)
    # THEN the document is gpu001's (its sender), gpu002 and gpu003 did not answer
    assert answers["gpu001"].text == '{"forged": 1}'
    assert answers["gpu002"].text is None and answers["gpu003"].text is None


def test_a_small_gz_that_inflates_to_a_gib_of_newlines_stops_at_a_bound(tmp_path: Path) -> None:
    import gzip

    from doctor.logs.reader import read_logs

    # GIVEN a 256 KiB .gz that inflates to 256 MiB of newlines
    bomb = tmp_path / "rank_0.log.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        chunk = b"\n" * (1 << 20)
        for _ in range(256):
            f.write(chunk)
    # WHEN analyze reads it THEN it stops at a bound within seconds and says so
    reading = _within(60, lambda: read_logs([bomb]))
    assert any("bound file_bytes" in s.reason for s in reading.skipped), reading.skipped


@needs_root
def test_a_log_a_rank_names_is_not_read_through_a_linked_folder(
    tmp_path: Path, owner: User
) -> None:
    from doctor.triage.export import _read
    from doctor.triage.sources.logs import read_tail

    # GIVEN NCCL_DEBUG_FILE under the owner's folder that links into a root-only folder,
    # where a file of the owner's sits (one the owner can no longer reach)
    victim = _root_only(tmp_path)
    (victim / "nccl.log").write_text("NCCL WARN root-only folder\n")
    owner.own(victim / "nccl.log")
    logs = tmp_path / "logs"
    logs.symlink_to(victim)
    owner.own(logs)
    # WHEN root's triage reads its tail, or bundles it THEN nothing
    assert read_tail(logs / "nccl.log", owners={owner.uid}) == ""
    assert _read(str(logs / "nccl.log"), 1024, tail=True, owners={owner.uid}) is None
    # AND the same file in a folder of the owner's (or in /tmp-like root folders) is read
    assert read_tail(victim / "nccl.log", owners={owner.uid}) == "NCCL WARN root-only folder\n"


@needs_root
def test_a_dump_is_read_through_its_owner_s_folders_never_through_a_swapped_link(
    tmp_path: Path, owner: User
) -> None:
    """Triage checks a written dump's path, then reads it: a folder on the way that the owner
    swaps for a link in between must not make root read a root-only file as the dump."""
    from doctor.triage.sources.flight import _Reads

    # GIVEN a root-only folder holding a readable dump, and the owner's job folder whose
    # fr/ is (by now) a link to it
    victim = _root_only(tmp_path)
    real = Path(__file__).parent / "fixtures" / "fr" / "gloo-wrong-collective" / "rank_0"
    (victim / "rank_0").write_bytes(real.read_bytes())
    job = tmp_path / "job"
    job.mkdir()
    (job / "fr").symlink_to(victim)
    owner.own(job, job / "fr")
    # WHEN root reads rank 0's dump at job/fr/rank_0 for that owner
    reads = _Reads()
    dumps = reads.take({0: job / "fr" / "rank_0"}, {0: owner.uid})
    # THEN nothing is read as the dump, and the skip says why
    assert dumps == () and 0 not in reads.dumps
    [why] = reads.unreadable[0]
    assert "rank_0" in why.reason and "fr" in why.reason, why
