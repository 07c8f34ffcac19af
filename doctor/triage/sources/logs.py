"""NCCL debug logs and the ranks' own output, read for the lines that decide a verdict.

Where the lines are: each rank's ``NCCL_DEBUG_FILE`` (``%h`` is the host,
``%p`` the pid), the launch registry's per-rank log, torchrun's per-rank
``stderr.log`` beside its error file, and any stdout/stderr of a rank or of
its launcher that is redirected to a regular file (``/proc/PID/fd/1,2``).
Only the tail of each file is read. The parser is a pure function over text
so tests feed it recorded NCCL and PyTorch lines.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from doctor.evidence import LogEvent
from doctor.logs import parse_lines
from doctor.triage.sources.interface import Collected, Source
from doctor.triage.target import Target

TAIL_BYTES = 1 << 20


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


def read_tail(path: Path, size: int = TAIL_BYTES) -> str:
    """The last ``size`` bytes of a regular file ('' for pipes, terminals and missing files)."""
    try:
        with path.open("rb") as f:
            if not os.path.isfile(path):
                return ""
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


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
        events: list[LogEvent] = []
        files = log_files(target)
        for rank, path in files:
            if time.monotonic() >= deadline:
                break
            events.extend(parse_log(read_tail(path), rank, pid_ranks))
        return Collected(logs=tuple(_unique(events)), log_files=tuple(p for _, p in files))


def _unique(events: Iterable[LogEvent]) -> list[LogEvent]:
    seen, out = set(), []
    for event in events:
        if (event.rank, event.kind, event.text) not in seen:
            seen.add((event.rank, event.kind, event.text))
            out.append(event)
    return out
