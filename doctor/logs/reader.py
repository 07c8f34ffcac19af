"""The I/O edge of ``doctor.logs``: which files are logs, and reading them line by line
within bounds, so a 2 GB combined log costs a line's worth of memory at a time.

Everything else (what the lines mean, whose they are) is pure and lives beside it.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from doctor.evidence import LogEvent, RankStack
from doctor.logs.parse import Bounds, Parsed, Parser
from doctor.logs.paste import unwrapped
from doctor.logs.who import Directory
from doctor.logs.words import union
from doctor.model import Skipped

MAX_FILES = 2_000
"""Files one reading opens (a folder of per-rank logs of a big job fits)."""
MAX_DEPTH = 4
_BINARY_PROBE = 4096
_FILE_RANK = re.compile(r"(?:^|[^a-z])rank[_-]?(\d{1,6})(?!\d)", re.IGNORECASE)
NOT_LOGS = (".pkl", ".pickle", ".pt", ".pth", ".bin", ".tar", ".tgz", ".zip", ".npz", ".so")


@dataclass(frozen=True)
class LogReading:
    """What a set of log files held, with ranks resolved across them."""

    events: tuple[LogEvent, ...]
    stacks: tuple[RankStack, ...]
    skipped: tuple[Skipped, ...]
    files: tuple[str, ...]
    """Every text file read (whether or not it said anything)."""
    words: tuple[str, ...] = ()
    """The distinct words of their telling lines (``doctor.logs.words``)."""


def is_text(path: Path) -> bool:
    """A file worth reading as a log: not an archive or pickle, no NUL in its first bytes."""
    if path.name.endswith(NOT_LOGS) or path.name.endswith(".tar.gz"):
        return False
    head = _head(path)
    return head is not None and b"\0" not in head and not head.startswith(_PICKLE)


def is_binary(path: Path) -> bool:
    """A file neither reader can use: NUL in its first bytes, and not a pickle (a dump)."""
    head = _head(path)
    return head is not None and b"\0" in head and not head.startswith(_PICKLE)


_PICKLE = b"\x80"
"""A pickle's first byte (protocol 2 and later): a Flight Recorder dump, never text."""


def _head(path: Path) -> bytes | None:
    """The first bytes of the file's text (a ``.gz`` file's, unpacked); None if unreadable."""
    try:
        with _open(path) as (f, _):
            return f.read(_BINARY_PROBE)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None


@contextmanager
def _open(path: Path) -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """The file's text stream, and the file itself (its position is how far the reading is)."""
    with path.open("rb") as raw:
        if path.suffix == ".gz":
            with gzip.GzipFile(fileobj=raw, mode="rb") as text:
                yield text, raw  # type: ignore[misc]
        else:
            yield raw, raw


def log_files(
    paths: Sequence[Path], not_logs: Collection[Path] = frozenset()
) -> tuple[list[Path], list[Skipped]]:
    """The text files under ``paths`` (folders walked to ``MAX_DEPTH``), at most ``MAX_FILES``,
    leaving out ``not_logs`` unopened (32,768 dumps already decoded took 2 s to look at)."""
    found: list[Path] = []
    skipped: list[Skipped] = []
    stack = [(p, 0) for p in reversed(paths)]
    while stack:
        path, depth = stack.pop()
        if path in not_logs or path.is_symlink():
            continue
        if path.is_dir():
            if depth < MAX_DEPTH:
                try:  # siblings by name: as Paths sort, 10 times faster
                    children = sorted(path.iterdir(), key=_name, reverse=True)
                except OSError as exc:
                    skipped.append(Skipped(None, "log-reader", f"{path}: {exc.strerror}"))
                    continue
                stack.extend((c, depth + 1) for c in children)
        elif path.is_file() and is_text(path):
            if len(found) >= MAX_FILES:
                skipped.append(
                    Skipped(None, "log-reader", f"more than {MAX_FILES} files: read the first")
                )
                break
            found.append(path)
    return found, skipped


def read_lines(f: BinaryIO, limit: int, budget: int | None = None) -> Iterator[str]:
    """Lines of ``f`` decoded, each at most ``limit`` characters (the rest of a longer line is
    skipped without being held); no more once ``budget`` bytes were read."""
    left = budget if budget is not None else -1
    while left != 0:
        raw = f.readline(limit + 1 if left < 0 else min(limit + 1, left))
        if not raw:
            return
        left = max(left - len(raw), 0) if left > 0 else left
        if len(raw) > limit and not raw.endswith(b"\n"):
            while left != 0 and (rest := f.readline(1 << 16 if left < 0 else min(1 << 16, left))):
                left = max(left - len(rest), 0) if left > 0 else left
                if rest.endswith(b"\n"):
                    break
        yield raw.decode("utf-8", errors="replace")


DEFAULT_BOUNDS = Bounds()
PROGRESS_LINES = 16384
"""Lines between two reports of how far a file's reading is (a cheap call, not per line)."""


def _within(
    progress: Callable[[int, int], None] | None, before: int, size: int, total: int
) -> Callable[[int], None] | None:
    """One file's bytes read, as the bytes read of every file."""
    if progress is None:
        return None
    return lambda read: progress(before + min(read, size), total)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def parse_file(
    path: Path, bounds: Bounds = DEFAULT_BOUNDS, at: Callable[[int], None] | None = None
) -> tuple[Parsed, str]:
    """One file's facts; the error text if it could not be read ('' if it could). ``at``
    hears how many of the file's bytes were read, every ``PROGRESS_LINES`` lines."""
    rank = _FILE_RANK.search(path.name)
    file_rank = int(rank.group(1)) if rank else None
    try:
        size, compressed = path.stat().st_size, path.suffix == ".gz"
    except OSError as exc:
        return Parser(path.name, file_rank, bounds).finish(), f"{path.name}: {exc}"
    small = not compressed and size <= bounds.word_bytes
    parser = Parser(path.name, file_rank, bounds, every_line_words=small)
    cut = ""
    try:
        budget, most = bounds.text_bytes(size, compressed), bounds.text_lines(size, compressed)
        if small:  # read whole, to undo a paste (one that grew since is cut at twice the size)
            budget = min(budget, 2 * bounds.word_bytes)
        with _open(path) as (f, on_disk):  # a paste's line is cut once ``paste._apart`` split it
            rows = read_lines(f, budget if small else bounds.line_chars, budget)
            for n, raw in enumerate(unwrapped(list(rows)) if small else rows, 1):
                parser.feed(raw)
                if at is not None and n % PROGRESS_LINES == 0:
                    at(on_disk.tell())
                if n == most:
                    cut = f"read its first {most} lines"
                    break
            if not cut and f.read(1):
                cut = f"read the first {budget} bytes of its text"
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        return parser.finish(), f"{path.name}: {exc}"
    return parser.finish(), f"{path.name}: bound file_bytes: {cut}" if cut else ""


def _name(path: Path) -> str:
    return path.name


def read_logs(
    paths: Sequence[Path],
    bounds: Bounds = DEFAULT_BOUNDS,
    not_logs: Collection[Path] = frozenset(),
    progress: Callable[[int, int], None] | None = None,
) -> LogReading:
    """Every log under ``paths`` but ``not_logs``, parsed, with ranks filled in from what the
    others state. ``progress`` hears the bytes read of the files' total as it goes (a 2 GB
    combined log takes minutes)."""
    files, skipped = log_files(paths, not_logs)
    sizes = [_size(path) for path in files]
    total, before = sum(sizes), 0
    parsed: list[tuple[Path, Parsed]] = []
    for path, size in zip(files, sizes, strict=True):
        result, error = parse_file(path, bounds, _within(progress, before, size, total))
        before += size
        if progress is not None:
            progress(before, total)
        if error:
            skipped.append(Skipped(None, "log-reader", error))
        parsed.append((path, result))
        for bound, n in sorted(result.cut.items()):
            skipped.append(Skipped(None, "log-reader", f"{path.name}: bound {bound} cut {n}"))
    return resolve(parsed, skipped)


def resolve(parsed: Sequence[tuple[Path, Parsed]], skipped: list[Skipped]) -> LogReading:
    """Fill in the ranks of events and stacks that only name a process or a GPU."""
    everything = [e for _, p in parsed for e in p.events]
    who = Directory.of(everything)
    events = tuple(
        e if (rank := who.rank_of(e)) == e.rank else replace(e, rank=rank) for e in everything
    )
    stacks: list[RankStack] = []
    for _, p in parsed:
        for dump in p.stacks:
            rank = dump.rank
            if rank is None and dump.pid is not None:
                rank = who.rank_of(LogEvent(None, "stack", "", host=dump.host, pid=dump.pid))
            if rank is None:
                skipped.append(
                    Skipped(
                        None,
                        "log-reader",
                        f"{dump.origin}: py-spy dump of pid {dump.pid} names no rank "
                        "(name the file rank_N.txt, or include the job's NCCL INFO lines)",
                    )
                )
                continue
            stacks.append(RankStack(rank, dump.threads, "file"))
    return LogReading(
        events,
        tuple(stacks),
        tuple(skipped),
        tuple(str(p) for p, _ in parsed),
        union(p.words for _, p in parsed),
    )
