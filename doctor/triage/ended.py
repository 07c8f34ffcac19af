"""A torchrun job that has already ended: what its log directory still says about its ranks.

torchrun tears every rank down within a second of one failing, then exits, so
by the time a person looks nothing runs. Its log directory stays behind:
``$TMPDIR/torchelastic_*/<run id>_*/attempt_<N>/<local rank>/`` with each rank's
``error.json`` (written by a rank whose ``main`` is wrapped in torch's
``@record`` when it raised) and, under ``--redirects``, its ``stderr.log``. A
rank killed by a signal writes no error file, so in an attempt where the
others raised (a peer's loss makes gloo and NCCL raise), the silent one is the
likely cause. Ranks are numbered by local rank: a one-node job.

``/tmp`` is shared: any user may create a folder with any run id in it. Only the
folders of the job's owner count (the invoking user's; for root, the owner SLURM
names, else the one user whose folders carry the id), and everything in them is
read through ``safeio.TrustedDir``: no link followed, no FIFO waited on, a bounded
amount of each file.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
from pathlib import Path

from doctor.errors import InputError
from doctor.triage.discover import ERROR_FILE_BYTES, message_of
from doctor.triage.target import LostRank, Target
from doctor.trust.safeio import TrustedDir, UnsafePath

TAIL_BYTES = 64 * 1024
"""Of a rank's ``stderr.log``, the end read for its last line."""


def _attempt(name: str) -> int:
    try:
        return int(name.removeprefix("attempt_"))
    except ValueError:
        return -1


def _runs(job: str, roots: list[Path]) -> list[tuple[float, Path, int]]:
    """Every ``torchelastic_*/<job>_*`` folder (not a link): its time, path and owner."""
    found = []
    for root in roots:
        for path in root.glob(f"torchelastic_*/{job}_*"):
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                found.append((info.st_mtime, path, info.st_uid))
    return found


def _whose(job: str, runs: list[tuple[float, Path, int]], owner: int | None) -> int | None:
    """The user whose folders count: ``owner``, the invoking user, or (root, owner unknown)
    the only user with such folders."""
    if owner is not None or os.geteuid() != 0:
        return os.geteuid() if owner is None else owner
    users = sorted({uid for _, _, uid in runs})
    if len(users) > 1:
        raise InputError(
            f"torchrun folders of several users (uids {', '.join(map(str, users))}) carry "
            f"run id {job!r}; run ids are public, so triage it as the job's owner"
        )
    return users[0] if users else None


def _message(folder: TrustedDir) -> str:
    """The rank's error: its ``error.json`` message, else its ``stderr.log``'s last line."""
    try:
        message = message_of(json.loads(folder.read("error.json", ERROR_FILE_BYTES)))
    except (OSError, ValueError, UnsafePath):
        message = ""
    if message:
        return message
    try:
        start = max(folder.size("stderr.log") - TAIL_BYTES, 0)
        text = folder.read("stderr.log", TAIL_BYTES, start).decode(errors="replace")
    except (OSError, UnsafePath):
        return ""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


def ended_torchrun_job(
    job: str, tmp: Path | None = None, owner: int | None = None
) -> Target | None:
    """The ranks of the last attempt of an ended torchrun job ``job``, all lost; None when
    no torchrun log directory of that run id of the job's owner (see the module
    docstring) is here (in ``$TMPDIR`` or ``/tmp``: torchrun used its own ``TMPDIR``,
    which need not be the one triage runs with)."""
    roots = [tmp] if tmp else list(dict.fromkeys([Path(tempfile.gettempdir()), Path("/tmp")]))
    runs = _runs(job, roots)
    uid = _whose(job, runs, owner)
    runs = [r for r in runs if r[2] == uid]
    if not runs or uid is None:
        return None
    run = max(runs)[1]
    try:
        with TrustedDir.open(run, uid) as folder:
            attempts = sorted((n for n in folder.names() if n.startswith("attempt_")), key=_attempt)
            if not attempts:
                return None
            with folder.sub(attempts[-1]) as attempt:
                ranks = sorted(int(n) for n in attempt.names() if n.isdigit() and len(n) < 7)
                lost = []
                for rank in ranks:
                    try:
                        with attempt.sub(str(rank)) as rank_dir:
                            error = _message(rank_dir)
                    except (OSError, UnsafePath):
                        error = ""
                    lost.append(LostRank(rank, status="dead", error=error))
    except (OSError, UnsafePath):
        return None
    return Target(job, socket.gethostname(), (), len(ranks), tuple(lost))
