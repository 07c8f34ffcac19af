"""Find a job's ranks on this host: the process table first, the launch registry beside it.

``--job ID`` matches ``TORCHELASTIC_RUN_ID``, ``SLURM_JOB_ID`` or
``NCCL_DOCTOR_JOB`` in ``/proc/PID/environ`` (no prologue needed), plus the
records ``nccl-doctor launch`` wrote. A rank's children (data loader
workers, compile workers) and wrappers (``timeout``, shells) inherit its
``RANK``, so each rank is the topmost Python process carrying it. Ranks
expected from ``WORLD_SIZE`` but not alive are kept as ``LostRank`` with
what the launcher's error file says, because a missing rank is the answer
to many hangs.
"""

from __future__ import annotations

import json
import os
import socket
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from doctor.errors import InputError, NoSuchJobError, UsageError
from doctor.jobdir.registry import (
    JOB_DIR_ENV,
    RankRecord,
    job_dir,
    list_jobs,
    read_ranks,
    valid_job_id,
)
from doctor.model import Skipped
from doctor.triage.target import ENV_KEYS, Launcher, LostRank, RankTarget, Target
from doctor.trust.process_identity import may_inspect, owner_uid, start_time
from doctor.trust.safeio import UnsafePath, check_ancestors, check_dir, read_owned

JOB_KEYS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "NCCL_DOCTOR_JOB")
PROC = Path("/proc")


@dataclass(frozen=True)
class ProcInfo:
    """The little of ``/proc/PID`` discovery needs."""

    pid: int
    ppid: int
    state: str
    """The one-letter kernel state: R, S, D, Z, T..."""
    name: str
    env: Mapping[str, str]
    exit_code: int | None = None
    """A zombie's exit status, as ``Popen.returncode`` spells it (``-9``: killed by SIGKILL)."""

    @property
    def is_python(self) -> bool:
        return self.name.startswith("python") or self.name == "pt_main_thread"


def read_proc(pid: int, proc: Path = PROC) -> ProcInfo | None:
    """``/proc/PID`` stat, name and the ``ENV_KEYS`` of its environment; None if gone."""
    base = proc / str(pid)
    try:
        stat = (base / "stat").read_text()
    except OSError:
        return None
    name = stat[stat.find("(") + 1 : stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2 :].split()
    state, ppid = fields[:2]
    code = None
    if state == "Z" and len(fields) >= 50:  # field 52, exit_code, in waitpid(2) form
        status = int(fields[49])
        code = -(status & 0x7F) if status & 0x7F else status >> 8
    try:
        raw = (base / "environ").read_bytes()
    except OSError:
        raw = b""
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key.decode(errors="replace") in ENV_KEYS:
            env[key.decode()] = value.decode(errors="replace")
    return ProcInfo(pid, int(ppid), state, name, env, code)


def _all_pids(proc: Path) -> list[int]:
    return [int(p.name) for p in proc.iterdir() if p.name.isdigit()]


def _int(env: Mapping[str, str], key: str) -> int | None:
    try:
        return int(env[key])
    except (KeyError, ValueError):
        return None


def pick_rank_processes(procs: Iterable[ProcInfo]) -> dict[int, ProcInfo]:
    """One process per ``RANK``: the topmost Python process, else the topmost process."""
    by_rank: dict[int, list[ProcInfo]] = {}
    for info in procs:
        rank = _int(info.env, "RANK")
        if rank is not None and info.state != "Z":
            by_rank.setdefault(rank, []).append(info)
    chosen = {}
    for rank, group in by_rank.items():
        python = [p for p in group if p.is_python] or group
        pids = {p.pid for p in python}
        top = [p for p in python if p.ppid not in pids] or python
        chosen[rank] = min(top, key=lambda p: p.pid)
    return chosen


def _launcher(ranks: Sequence[ProcInfo], proc: Path) -> Launcher | None:
    parents = Counter(p.ppid for p in ranks if p.ppid > 1)
    if not parents:
        return None
    pid = parents.most_common(1)[0][0]
    try:
        cmd = (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").strip()
    except OSError:
        return None
    return Launcher(pid, cmd.decode(errors="replace"))


ERROR_FILE_BYTES = 1 << 20
"""The most of a torchrun error file read (its message and a traceback: a few KiB)."""


def error_file_message(path: Path, owner: int) -> str:
    """The first line of ``owner``'s torchrun error file (``{"message": {"message": ...}}``),
    read through checked folders (``safeio.read_owned``): a rank's environment names it, so
    a link, a FIFO or another user's file is no error file."""
    try:
        data = json.loads(read_owned(path, owner, ERROR_FILE_BYTES))
    except (OSError, ValueError, UnsafePath):
        return ""
    return message_of(data)


def message_of(data: object) -> str:
    """The first line of the message of a parsed torchrun error file."""
    message = data.get("message", "") if isinstance(data, dict) else ""
    if isinstance(message, dict):
        message = message.get("message", "")
    return str(message).strip().splitlines()[0] if str(message).strip() else ""


def _lost_rank(rank: int, live: Sequence[RankTarget], zombie: int | None, proc: Path) -> LostRank:
    """What is known about a rank that is not alive: its zombie and its error file."""
    error = ""
    for peer in live:
        err_file = peer.env.get("TORCHELASTIC_ERROR_FILE")
        owner = owner_uid(peer.pid, proc)
        if err_file and peer.local_rank is not None and owner is not None:
            local = rank - (peer.rank - peer.local_rank)
            path = Path(err_file).parent.parent / str(local) / "error.json"
            error = error_file_message(path, owner)
            break
    status = "zombie" if zombie is not None else ("dead" if error else "missing")
    info = read_proc(zombie, proc) if zombie is not None else None
    return LostRank(
        rank, pid=zombie, status=status, exit_code=info.exit_code if info else None, error=error
    )


def _start_ticks(pid: int, proc: Path) -> int | None:
    """When ``pid`` started, in clock ticks after boot (``/proc/PID/stat`` field 22)."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        return int(stat[stat.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


ZOMBIE_SLACK_TICKS = 3000
"""A zombie counts for a job only if it started at most this long (30 s at USER_HZ 100)
before the job's first live rank: an older one is another job's, not yet reaped."""


def _zombie_children(
    launcher: Launcher | None, proc: Path, live: Sequence[RankTarget] = ()
) -> list[int]:
    if launcher is None:
        return []
    starts = [t for r in live if (t := _start_ticks(r.pid, proc)) is not None]
    oldest = min(starts) - ZOMBIE_SLACK_TICKS if starts else None
    zombies = []
    for pid in _all_pids(proc):
        info = read_proc(pid, proc)
        if info and info.ppid == launcher.pid and info.state == "Z":
            started = _start_ticks(pid, proc)
            if oldest is None or started is None or started >= oldest:
                zombies.append(pid)
    return sorted(zombies)


def _assemble(
    job: str,
    chosen: Mapping[int, ProcInfo],
    records: Sequence[RankRecord],
    proc: Path,
    job_path: Path | None,
    host: str,
    only: Sequence[int] | None = None,
) -> Target:
    """Live, lost and remote ranks from the chosen processes and the registry.

    ``only`` (``--pids``) fixes the expected ranks; otherwise they come from
    ``WORLD_SIZE`` and the registry.
    """
    by_rank = {r.rank: r for r in records}
    exited = {rank: info.pid for rank, info in chosen.items() if info.state == "Z"}
    chosen = {rank: info for rank, info in chosen.items() if info.state != "Z"}
    live = tuple(
        RankTarget(
            rank,
            info.pid,
            host,
            _int(info.env, "LOCAL_RANK"),
            _int(info.env, "WORLD_SIZE"),
            dict(info.env),
            by_rank.get(rank),
            job_path if rank in by_rank else None,
        )
        for rank, info in sorted(chosen.items())
    )
    sizes = [r.world_size for r in live if r.world_size] + [r.world_size for r in records]
    world = len(only) if only is not None else (max(sizes) if sizes else None)
    remote = {r.rank for r in records if r.host != host and r.rank not in chosen}
    local_size = next(
        (_int(r.env, "LOCAL_WORLD_SIZE") for r in live if _int(r.env, "LOCAL_WORLD_SIZE")), None
    )
    if world and local_size and local_size < world and live and live[0].local_rank is not None:
        base = live[0].rank - live[0].local_rank
        remote |= {r for r in range(world) if not base <= r < base + local_size}
    launcher = _launcher(list(chosen.values()), proc)
    zombies = _zombie_children(launcher, proc, live)
    expected = set(only) if only is not None else set(range(world or 0)) | set(by_rank)
    lost_ranks = sorted(expected - set(chosen) - remote)
    lost = []
    for rank in lost_ranks:
        record_pid = by_rank[rank].pid if rank in by_rank else None
        zombie = exited.get(rank, record_pid if record_pid in zombies else None)
        if zombie is None and record_pid is None and len(zombies) == len(lost_ranks):
            zombie = zombies[lost_ranks.index(rank)]
        lost.append(_lost_rank(rank, live, zombie, proc))
    return Target(job, host, live, world, tuple(lost), tuple(sorted(remote)), launcher, job_path)


def discover_job(
    job: str, env: Mapping[str, str], proc: Path = PROC, owner: int | None = None
) -> Target:
    """The ranks of ``job`` on this host; ``NoSuchJobError`` when nothing knows the job.
    ``owner``: the job's owner, known from an earlier look (a watcher's): processes of
    other users that claim the id later are strangers, named in ``refused``."""
    if not valid_job_id(job):
        raise UsageError(f"job id {job!r} may only hold letters, digits and . _ : -")
    host = socket.gethostname()
    needle = job.encode()
    matches = []
    unreadable = 0
    for pid in _all_pids(proc):
        try:
            raw = (proc / str(pid) / "environ").read_bytes()
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue
        if needle not in raw or b"RANK=" not in raw:
            continue
        info = read_proc(pid, proc)
        if info and any(info.env.get(k) == job for k in JOB_KEYS):
            matches.append(info)
    matches, strangers = job_owners_processes(job, matches, proc, owner)
    directory = job_dir(job, env)
    records = read_ranks(directory) if directory.is_dir() else []
    chosen = pick_rank_processes(matches)
    refused: tuple[Skipped, ...] = ()
    if not records and chosen:  # root, or a user without the job's registry in their env
        named, refused = ranks_job_dir(chosen.values(), proc)
        if named is not None:
            directory, records = named[0], read_ranks(*named)
    for record in records:
        # the record's pid counts only while it is still the process launch registered
        # (same start time): a reused pid is someone else's process
        alive = record.host == host and start_time(record.pid, proc) == record.pid_start
        info = read_proc(record.pid, proc) if alive else None
        if info and _int(info.env, "RANK") in (record.rank, None):
            chosen.setdefault(
                record.rank,
                ProcInfo(
                    info.pid,
                    info.ppid,
                    info.state,
                    info.name,
                    {**info.env, "RANK": str(record.rank)},
                ),
            )
    if not chosen and not records:
        known = list_jobs(env)
        hint = f"; the launch registry here knows: {', '.join(known)}" if known else ""
        if unreadable and os.geteuid() != 0:  # root reads every user's; its misses are not theirs
            hint += (
                f"; {unreadable} processes of other users could not be read "
                "(run triage as root to look at another user's job)"
            )
        raise NoSuchJobError(
            f"no rank of job {job!r} runs on this host (looked for "
            f"TORCHELASTIC_RUN_ID, SLURM_JOB_ID and the launch registry){hint}"
        )
    target = _assemble(job, chosen, records, proc, directory if records else None, host)
    return replace(target, refused=refused + strangers)


def ranks_job_dir(
    ranks: Iterable[ProcInfo], proc: Path = PROC
) -> tuple[tuple[Path, int] | None, tuple[Skipped, ...]]:
    """The launch registry the ranks' own environment names (``NCCL_DOCTOR_JOB_DIR``), when
    the job's owner owns it: the directory and each of its parents theirs or root's, not a
    link, no one else able to write into it. The rank's agent answers there, so triage
    (root, for another user's job) writes requests into it and reads dumps from it; a
    directory that fails is refused, and the evidence says why. Returns the directory and
    its owner, or None."""
    infos = list(ranks)
    named = {i.env[JOB_DIR_ENV] for i in infos if i.env.get(JOB_DIR_ENV)}
    if not named or not any(os.path.lexists(n) for n in named):  # an ended job's, removed
        return None, ()
    owners = {owner_uid(i.pid, proc) for i in infos}
    why = ""
    if len(named) > 1:
        why = f"the ranks name {len(named)} different folders"
    elif len(owners) != 1 or None in owners:
        why = "the ranks' owner is not known"
    path = Path(next(iter(named)))
    if not why and not path.is_absolute():
        why = f"{path} is not an absolute path"
    owner = next(iter(owners))
    if not why and owner is not None:
        try:
            check_ancestors(path, owner)
            check_dir(path, owner)
        except UnsafePath as exc:
            why = str(exc)
    if why or owner is None:
        return None, (Skipped(None, "discover", f"{JOB_DIR_ENV} not used: {why}"),)
    return (path, owner), ()


def job_owners_processes(
    job: str, matches: list[ProcInfo], proc: Path, owner: int | None = None
) -> tuple[list[ProcInfo], tuple[Skipped, ...]]:
    """The processes that count for ``job``: the invoking user's, and for root those of the
    job's owner. Job ids are public, so another user's process may claim one; when
    processes of several users claim it, root cannot tell whose job it is and says so,
    unless it knows the ``owner`` already: then the others are named as strangers."""
    owners: dict[int, list[ProcInfo]] = {}
    for info in matches:
        uid = owner_uid(info.pid, proc)
        if uid is not None and may_inspect(uid):
            owners.setdefault(uid, []).append(info)
    if owner is not None:
        strangers = tuple(
            Skipped(
                None,
                "discover",
                f"uid {uid}'s processes (pids {', '.join(str(i.pid) for i in found[:8])}) "
                f"also claim job {job!r}: not the job's (it is uid {owner}'s), ignored",
            )
            for uid, found in sorted(owners.items())
            if uid != owner
        )
        return owners.get(owner, []), strangers
    if len(owners) > 1:
        counts = ", ".join(f"uid {uid}: {len(found)}" for uid, found in sorted(owners.items()))
        raise InputError(
            f"processes of several users claim job {job!r} ({counts}); job ids are public, "
            "so name the ranks with --pids"
        )
    return next(iter(owners.values()), []), ()


def discover_pids(pids: Sequence[int], proc: Path = PROC) -> Target:
    """Explicit processes; ranks come from their ``RANK``, else from their order."""
    if not pids:
        raise UsageError("--pids names no process")
    host = socket.gethostname()
    infos = []
    for pid in pids:
        info = read_proc(pid, proc)
        if info is None:
            raise NoSuchJobError(f"no process with pid {pid} on this host")
        owner = owner_uid(pid, proc)
        if not may_inspect(owner):
            raise InputError(
                f"pid {pid} belongs to uid {owner}: nccl-doctor looks only at your own "
                "processes (run it as root to triage another user's job)"
            )
        infos.append(info)
    ranked = all(_int(i.env, "RANK") is not None for i in infos)
    if not ranked or len({i.env["RANK"] for i in infos}) != len(infos):
        infos = [
            ProcInfo(i.pid, i.ppid, i.state, i.name, {**i.env, "RANK": str(n)})
            for n, i in enumerate(infos)
        ]
    chosen = {int(i.env["RANK"]): i for i in infos}
    job = next((i.env[k] for i in infos for k in JOB_KEYS if i.env.get(k)), "pids")
    return _assemble(job, chosen, [], proc, None, host, only=sorted(chosen))


def parse_pids(text: str) -> list[int]:
    """``"12,13, 14"`` -> ``[12, 13, 14]``; a ``UsageError`` names the bad item."""
    pids = []
    for item in text.split(","):
        if not item.strip().isdigit():
            raise UsageError(f"--pids wants process ids separated by commas, not {item.strip()!r}")
        pids.append(int(item))
    return pids
