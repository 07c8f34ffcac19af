"""NCCL debug logs and the ranks' own output, read for the lines that decide a verdict.

Where the lines are: each rank's ``NCCL_DEBUG_FILE`` (``%h`` is the host,
``%p`` the pid), the launch registry's per-rank log, torchrun's per-rank
``stderr.log`` beside its error file, and any stdout/stderr of a rank or of
its launcher that is redirected to a regular file (``/proc/PID/fd/1,2``).
Only the tail of each file is read, and only the current restart attempt of
it: under ``--max-restarts`` torchrun logs the failure that ends an attempt
(and, at INFO, "will restart worker group") before it starts every rank
again, and what the previous attempt's ranks wrote (a transport error when
one of them was killed) says nothing about the ranks running now, whose
``TORCHELASTIC_RESTART_COUNT`` says which attempt they are
(``current_attempt``). The parser is a pure function over text so
tests feed it recorded NCCL and PyTorch lines.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from doctor.evidence import LogEvent
from doctor.logs import parse_lines
from doctor.triage.sources.interface import Collected, Source
from doctor.triage.target import Target
from doctor.trust.process_identity import owner_uid
from doctor.trust.safeio import UnsafePath, open_owned

TAIL_BYTES = 1 << 20


ATTEMPT_END = re.compile(
    r"will restart worker group|"
    r"elastic/multiprocessing/api\.py:\d+\] failed \(exitcode: -?\d+\) local_rank: \d+"
)
"""torchrun's agent lines that end an attempt: the failure it observed (logged at ERROR, so
always there) and, at INFO, its decision to restart every rank (``--max-restarts``)."""
RESTART = re.compile(r"will restart worker group")


def current_attempt(text: str, restarts: int) -> str:
    """The part of a launcher's log written by attempt ``restarts`` (the ranks'
    ``TORCHELASTIC_RESTART_COUNT``): what follows the attempt ends before it. An agent
    logs one failure line, and maybe one restart line, per ended attempt, so the last
    line of the ``restarts``-th failure ends the previous attempt."""
    if restarts <= 0:
        return text
    failures = [m for m in ATTEMPT_END.finditer(text) if "failed (exitcode" in m.group(0)]
    marks = failures[:restarts] or list(ATTEMPT_END.finditer(text))
    if not marks:
        return text
    cut = marks[-1].end()
    restart = RESTART.search(text, cut)
    if restart is not None and text.count("\n", cut, restart.start()) < 3:
        cut = restart.end()  # the agent's INFO line right after the failure
    end = text.find("\n", cut)
    return text[end + 1 :] if end >= 0 else ""


def parse_log(text: str, rank: int | None, pid_ranks: Mapping[int, int]) -> list[LogEvent]:
    """The meaningful lines of one log (``doctor.logs`` reads them); ``rank`` is the file's
    rank, if it belongs to one.

    A line's own ``[rankN]:``/``[Rank N]`` label or NCCL ``host:pid`` prefix wins
    over the file's rank, because launcher logs mix every rank's lines; a line that
    names only its process gets that process's rank from ``pid_ranks``.
    """
    return [
        replace(e, rank=pid_ranks[e.pid])
        if e.rank is None and e.pid is not None and e.pid in pid_ranks
        else e
        for e in parse_lines(text.splitlines(), file_rank=rank)
    ]


def resolve_debug_file(template: str, host: str, pid: int) -> Path:
    """``NCCL_DEBUG_FILE`` with NCCL's ``%h`` (host) and ``%p`` (pid) filled in."""
    return Path(template.replace("%h", host).replace("%p", str(pid)))


def read_tail(path: Path, size: int = TAIL_BYTES, owners: set[int] | None = None) -> str:
    """The last ``size`` bytes of a regular file ('' for pipes, terminals, links, missing
    files, and files of none of ``owners``: a rank's environment may name a file its owner
    could not read, for root to show)."""
    try:
        fd = open_owned(path, owners)
    except (OSError, UnsafePath):
        return ""
    with os.fdopen(fd, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - size))
        return f.read().decode(errors="replace")


def _redirected(pid: int) -> list[Path]:
    """stdout/stderr of ``pid`` when they are regular files."""
    paths = []
    for fd in (1, 2):
        try:
            target = Path(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        if target.is_absolute() and target.is_file() and target not in paths:
            paths.append(target)
    return paths


def log_files(target: Target) -> list[tuple[int | None, Path]]:
    """Every log worth reading, with the rank it belongs to (None: a launcher's mixed log)."""
    files: list[tuple[int | None, Path]] = []
    for rank in target.ranks:
        if rank.env.get("NCCL_DEBUG_FILE"):
            files.append(
                (rank.rank, resolve_debug_file(rank.env["NCCL_DEBUG_FILE"], rank.host, rank.pid))
            )
        if rank.record and rank.record.files.get("nccl_debug_file"):
            files.append((rank.rank, Path(rank.record.files["nccl_debug_file"])))
        if rank.env.get("TORCHELASTIC_ERROR_FILE"):
            files.append(
                (rank.rank, Path(rank.env["TORCHELASTIC_ERROR_FILE"]).with_name("stderr.log"))
            )
        files.extend((rank.rank, path) for path in _redirected(rank.pid))
    if target.launcher:
        files.extend((None, path) for path in _redirected(target.launcher.pid))
    unique: dict[Path, int | None] = {}
    for rank_of, path in files:
        if path in unique and unique[path] != rank_of:
            unique[path] = None  # one file shared by several ranks: trust each line's label
        else:
            unique.setdefault(path, rank_of)
    return [(rank_of, path) for path, rank_of in unique.items() if path.is_file()]


class LogSource(Source):
    name = "nccl-log"

    def collect(self, target: Target, deadline: float) -> Collected:
        pid_ranks = {r.pid: r.rank for r in target.ranks}
        owners = {u for r in target.ranks if (u := owner_uid(r.pid)) is not None}
        restarts = max(
            (int(r.env.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) for r in target.ranks),
            default=0,
        )
        events: list[LogEvent] = []
        files = log_files(target)
        for rank, path in files:
            if time.monotonic() >= deadline:
                break
            text = current_attempt(read_tail(path, owners=owners or None), restarts)
            events.extend(parse_log(text, rank, pid_ranks))
        return Collected(logs=tuple(_unique(events)), log_files=tuple(p for _, p in files))


def _unique(events: Iterable[LogEvent]) -> list[LogEvent]:
    seen, out = set(), []
    for event in events:
        if (event.rank, event.kind, event.text) not in seen:
            seen.add((event.rank, event.kind, event.text))
            out.append(event)
    return out
