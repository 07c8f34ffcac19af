"""A torchrun job that has already ended: what its log directory still says about its ranks.

torchrun tears every rank down within a second of one failing, then exits, so
by the time a person looks nothing runs. Its log directory stays behind:
``$TMPDIR/torchelastic_*/<run id>_*/attempt_<N>/<local rank>/`` with each rank's
``error.json`` (written by a rank whose ``main`` is wrapped in torch's
``@record`` when it raised) and, under ``--redirects``, its ``stderr.log``. A
rank killed by a signal writes no error file, so in an attempt where the
others raised (a peer's loss makes gloo and NCCL raise), the silent one is the
likely cause. Ranks are numbered by local rank: a one-node job.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

from doctor.triage.discover import error_file_message
from doctor.triage.target import LostRank, Target


def _attempt(path: Path) -> int:
    try:
        return int(path.name.removeprefix("attempt_"))
    except ValueError:
        return -1


def _owned(path: Path) -> bool:
    """Only the invoking user's directories (root reads every user's)."""
    try:
        return os.getuid() == 0 or path.stat().st_uid == os.getuid()
    except OSError:
        return False


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:300] if lines else ""


def ended_torchrun_job(job: str, tmp: Path | None = None) -> Target | None:
    """The ranks of the last attempt of an ended torchrun job ``job``, all lost; None when
    no torchrun log directory of that run id is here (in ``$TMPDIR`` or ``/tmp``: torchrun
    used its own ``TMPDIR``, which need not be the one triage runs with)."""
    roots = [tmp] if tmp else list(dict.fromkeys([Path(tempfile.gettempdir()), Path("/tmp")]))
    runs = [
        p
        for root in roots
        for p in root.glob(f"torchelastic_*/{job}_*")
        if p.is_dir() and _owned(p)
    ]
    if not runs:
        return None
    run = max(runs, key=lambda p: p.stat().st_mtime)
    attempts = sorted(run.glob("attempt_*"), key=_attempt)
    if not attempts:
        return None
    ranks = sorted(int(p.name) for p in attempts[-1].iterdir() if p.name.isdigit())
    lost = []
    for rank in ranks:
        folder = attempts[-1] / str(rank)
        error = error_file_message(folder / "error.json") or _last_line(folder / "stderr.log")
        lost.append(LostRank(rank, status="dead", error=error))
    return Target(job, socket.gethostname(), (), len(ranks), tuple(lost))
