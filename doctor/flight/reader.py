"""Find Flight Recorder dumps anywhere a user keeps them and read them one at a time.

``read_flight(paths)`` is the one entry point: folders (searched recursively),
tar/tar.gz bundles, zip files and explicit files, with any naming that ends in
the rank number (``rank_3``, ``_dump_3``, ``nccl_trace_rank_3``,
``host-a_rank3.json``). It never raises on a bad dump: an unreadable,
truncated, hostile or unsupported dump becomes a ``Skipped`` with the reason,
and the rest are read. Archives are opened by ``doctor.trust.archive`` (its rules
and bounds; a refused member is a ``Skipped`` too). Dumps are streamed: each is decoded, reduced
(``doctor.flight.dump``) and its raw bytes dropped before the next is opened.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import re
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from doctor.flight.dump import DumpError, RankDump, RawConfig, reduce_dump, reduce_dump_raw
from doctor.flight.transfer import Packed, Packer, Unpacker
from doctor.gcpause import collector_paused
from doctor.model import Skipped
from doctor.ranks import MAX_WORLD_SIZE
from doctor.trust import archive
from doctor.trust.safeio import UnsafePath, open_regular

MAX_DUMP_BYTES = archive.MAX_MEMBER_BYTES
PARALLEL_FROM = 64
"""Folders with at least this many dumps are reduced in worker processes."""
MAX_WORKERS = 8
PREFETCH = 8
"""Dump files a worker asks the kernel to read ahead of the one it decodes: one reader
waiting on each 128 kB of readahead read 40 MB/s here, from a disk that reads 700 MB/s."""
PROBE = "flight-recorder"
_RANK = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
_TRAILING = re.compile(r"(\d+)(?:\.(?:pkl|pickle|json|bin))?$", re.IGNORECASE)
_NOT_DUMPS = {"evidence.json", "verdict.json"}
_NOT_DUMP_DIRS = {"stacks", "logs"}


@dataclass(frozen=True)
class FlightRead:
    """What reading produced: the reduced dumps and the ranks that could not be read."""

    dumps: tuple[RankDump, ...]
    skipped: tuple[Skipped, ...]
    files: frozenset[Path] = frozenset()
    """The files on disk decoded as dumps (not archive members): no log reader needs them."""


def rank_of(name: str) -> int | None:
    """The rank a dump file name ends in, or None when the name does not say."""
    base = PurePosixPath(name).name
    if (
        base in _NOT_DUMPS
        or base.startswith(".")
        or set(PurePosixPath(name).parts) & _NOT_DUMP_DIRS
    ):
        return None
    found = _RANK.findall(base)
    digits = found[-1] if found else (m.group(1) if (m := _TRAILING.search(base)) else None)
    if digits is None:
        return None
    # a rank past MAX_WORLD_SIZE (or 5,000 digits) is no rank: the name says nothing
    return int(digits) if len(digits) <= 7 and int(digits) < MAX_WORLD_SIZE else None


Opener = Callable[[], bytes]
Progress = Callable[[int, int], None]
"""Told (dumps read, dumps to read) while a large folder is read."""
PROGRESS_EVERY = 64


def _folder(root: Path) -> Iterator[tuple[str, Opener]]:
    for parts in sorted(_walk(root)):
        yield "/".join(parts), _file_opener(root.joinpath(*parts))


def _walk(root: Path) -> Iterator[tuple[str, ...]]:
    """The regular files under ``root`` (links neither followed nor taken), as the parts of
    their paths below it: by the directory's own file types, with no ``stat`` a file
    (65,536 of them for 32,768 dumps took 1.6 s), and no recursion however deep."""
    folders: list[tuple[str, ...]] = [()]
    while folders:
        parts = folders.pop()
        try:
            entries = list(os.scandir(root.joinpath(*parts)))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append((*parts, entry.name))
            elif entry.is_file(follow_symlinks=False):
                yield (*parts, entry.name)


def _open_dump(p: Path) -> int:
    """A read descriptor on a regular file within ``MAX_DUMP_BYTES`` (a FIFO or /dev/zero is
    refused, not read forever), never through a link; ``DumpError`` saying why not."""
    try:
        return open_regular(p, None, MAX_DUMP_BYTES)
    except UnsafePath as exc:
        raise DumpError(str(exc).removeprefix(f"refusing {p}: ")) from None


def _file_opener(p: Path) -> Opener:
    def read() -> bytes:
        fd = _open_dump(p)
        with os.fdopen(fd, "rb") as f:  # read(n) would allocate n bytes up front
            return f.read(os.fstat(fd).st_size + 1)[: MAX_DUMP_BYTES + 1]

    return read


def _archive(path: Path) -> Iterator[tuple[str, Opener] | archive.Refused]:
    for entry in archive.members(path, wanted=lambda name: rank_of(name) is not None):
        yield entry if isinstance(entry, archive.Refused) else (entry.name, entry.read)


def candidates(path: Path) -> Iterator[tuple[str, Opener] | archive.Refused]:
    """Every (name, opener) under ``path``, or what the archive reader refused; the caller
    keeps those named by a rank."""
    if path.is_dir():
        yield from _folder(path)
    elif archive.is_archive(path):
        yield from _archive(path)
    else:
        yield path.name, _file_opener(path)


_PACKER: Packer | None = None
"""This worker's numbering of the values it sent (``doctor.flight.transfer``)."""


def _packer() -> Packer:
    global _PACKER
    if _PACKER is None or _PACKER.pid != os.getpid():  # not a forking parent's
        _PACKER = Packer()
    return _PACKER


def _reduce_file(job: tuple[int, str, str], hint: _Hint) -> Packed | str:
    """Worker: one dump file -> its reduced form, or the reason it is unreadable."""
    rank, name, path = job
    try:
        with collector_paused():  # a dump: a million acyclic objects
            return _packer().pack(*_reduce_pieces(rank, name, Path(path), hint))
    except (DumpError, OSError) as exc:
        return f"{name}: {exc}"
    except Exception as exc:  # noqa: BLE001 - one bad dump never ends the analysis
        return f"{name}: malformed ({type(exc).__name__})"


def _reduce_pieces(rank: int, name: str, path: Path, hint: _Hint) -> tuple[RankDump, RawConfig]:
    """Read as much of the file as the decoder asks for (``doctor.flight.recent``), and
    tell ``hint`` how much that was at each end."""
    fd = _open_dump(path)
    try:
        pieces = _Pieces(fd, os.fstat(fd).st_size)
        try:
            return reduce_dump_raw(rank, name, pieces.data, pieces)
        finally:
            hint.head, hint.tail = pieces.ends()
    finally:
        os.close(fd)


_BLOCK = 16 << 10
"""Bytes a dump file is read by: the decoder asks for ranges, the kernel reads pages."""


class _Pieces:
    """A dump file read into a buffer of its size, the blocks the decoder asks for, once."""

    def __init__(self, fd: int, size: int) -> None:
        self.data = bytearray(size)
        self._fd = fd
        self._read: set[int] = set()

    def __call__(self, lo: int, hi: int) -> None:
        size = len(self.data)
        block, last = lo // _BLOCK, (min(hi, size) - 1) // _BLOCK
        while block <= last:
            if block in self._read:
                block += 1
                continue
            end = block
            while end < last and end + 1 not in self._read:
                end += 1
            self._fill(block * _BLOCK, min((end + 1) * _BLOCK, size))
            self._read.update(range(block, end + 1))
            block = end + 1

    def _fill(self, start: int, end: int) -> None:
        view = memoryview(self.data)[start:end]
        while view:
            got = os.preadv(self._fd, [view], start)
            if got == 0:
                raise OSError("the file was cut short while it was read")
            view, start = view[got:], start + got

    def ends(self) -> tuple[int, int]:
        """Bytes read without a gap from the start and up to the end."""
        size = len(self.data)
        blocks = -(-size // _BLOCK)
        head = next((b for b in range(blocks) if b not in self._read), blocks)
        tail = next((b for b in range(blocks) if blocks - 1 - b not in self._read), blocks)
        return min(head * _BLOCK, size), min(tail * _BLOCK, size)


@dataclass
class _Hint:
    """How much of the last dump file the decoder read at each end: the next files, of the
    same job, are asked of the kernel that much ahead (the whole file until one is read)."""

    head: int | None = None
    tail: int = 0


def _reduce_files(jobs: list[tuple[int, str, str]]) -> list[Packed | str]:
    """Worker: a run of dump files, each read ahead ``PREFETCH`` files before it is decoded."""
    hint = _Hint()
    for _rank, _name, path in jobs[:PREFETCH]:
        _prefetch(path, hint)
    out = []
    for i, job in enumerate(jobs):
        if i + PREFETCH < len(jobs):
            _prefetch(jobs[i + PREFETCH][2], hint)
        out.append(_reduce_file(job, hint))
    return out


def _prefetch(path: str, hint: _Hint) -> None:
    """Ask the kernel to start reading ``path`` now (the ends ``hint`` names). A hint only:
    the read that follows makes its own checks and reports its own errors."""
    try:
        fd = open_regular(Path(path), None, MAX_DUMP_BYTES)
    except (UnsafePath, OSError):
        return
    try:
        if hint.head is None:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        else:
            size = os.fstat(fd).st_size
            os.posix_fadvise(fd, 0, hint.head, os.POSIX_FADV_WILLNEED)
            os.posix_fadvise(fd, max(0, size - hint.tail), hint.tail, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


def _parallel(
    paths: list[Path], skipped: list[Skipped], progress: Progress | None, decoded: set[Path]
) -> Iterator[RankDump] | None:
    """Reduce a large folder's plain files on every core; None when it is not worth it."""
    files: list[tuple[int, str, str]] = []
    for path in paths:
        if not path.is_dir():
            return None
        for name, _opener in _folder(path):
            rank = rank_of(name)
            if rank is not None:
                files.append((rank, name, str(path / name)))
    workers = min(_usable_cpus(), MAX_WORKERS)
    if len(files) < PARALLEL_FROM or workers < 2 or len({r for r, _n, _p in files}) != len(files):
        return None
    return _gather(files, workers, skipped, progress, decoded)


def _usable_cpus() -> int:
    """The CPUs this process may run on (a login node's cgroup or taskset), not the host's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _gather(
    files: list[tuple[int, str, str]],
    workers: int,
    skipped: list[Skipped],
    progress: Progress | None,
    decoded: set[Path],
) -> Iterator[RankDump]:
    # fork is cheap but unsafe once other threads may hold locks (triage's collectors)
    ctx = multiprocessing.get_context("fork" if threading.active_count() == 1 else "spawn")
    # about eight tasks per worker: few enough that sending them costs nothing, enough that
    # a worker slowed by other work leaves little for the others to wait on at the end
    chunk = max(1, min(64, len(files) // (workers * 8)))
    runs = [files[i : i + chunk] for i in range(0, len(files), chunk)]
    unpacker = Unpacker()
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        results = itertools.chain.from_iterable(pool.map(_reduce_files, runs))
        if progress is not None:
            progress(0, len(files))
        for done, ((rank, _name, path), got) in enumerate(zip(files, results, strict=True), 1):
            if progress is not None and (done % PROGRESS_EVERY == 0 or done == len(files)):
                progress(done, len(files))
            if isinstance(got, str):
                skipped.append(Skipped(rank, PROBE, got))
            else:
                decoded.add(Path(path))
                yield unpacker.unpack(got)


def iter_dumps(
    paths: Iterable[Path],
    skipped: list[Skipped],
    progress: Progress | None,
    decoded: set[Path],
) -> Iterator[RankDump]:
    """Yield reduced dumps one by one; append a ``Skipped`` for each unreadable one.

    Folders of many dumps are reduced on every core (each worker holds one dump at a
    time), telling ``progress`` how far they are; archives and a few files are read here,
    one at a time. ``decoded`` collects the files on disk decoded as dumps."""
    paths = list(paths)
    fast = _parallel(paths, skipped, progress, decoded)
    if fast is not None:
        yield from fast
        return
    seen: set[int] = set()
    for path in paths:
        try:
            yield from _read_path(path, seen, skipped, decoded)
        except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
            skipped.append(Skipped(None, PROBE, f"{path.name}: unreadable ({exc})"))


def _read_path(
    path: Path, seen: set[int], skipped: list[Skipped], decoded: set[Path]
) -> Iterator[RankDump]:
    folder = path.is_dir()
    explicit = not folder and not archive.is_archive(path)
    for found in candidates(path):
        if isinstance(found, archive.Refused):
            # a member too large is still that rank's dump; a bad name or a link is nobody's
            rank = rank_of(found.name) if found.rule == "member-bytes" else None
            skipped.append(Skipped(rank, PROBE, f"{path.name}: {found}"))
            continue
        name, opener = found
        rank = rank_of(name)
        if rank is None:
            if explicit:
                skipped.append(Skipped(None, PROBE, f"{name}: no rank number in its name"))
            continue
        if rank in seen:
            skipped.append(Skipped(rank, PROBE, f"{name}: a second dump for rank {rank}"))
            continue
        dump = read_dump(rank, name, opener)
        if isinstance(dump, Skipped):
            skipped.append(dump)
            continue
        seen.add(rank)
        if folder or explicit:
            decoded.add(path / name if folder else path)
        yield dump


def read_dump(rank: int, name: str, opener: Opener) -> RankDump | Skipped:
    """One dump, reduced, or why it cannot be: what live triage calls for each file it read
    through its owner's checked folders, and the reader for each candidate."""
    try:
        with collector_paused():  # a dump: a million acyclic objects
            return reduce_dump(rank, name, opener())
    except (DumpError, OSError, UnsafePath, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        return Skipped(rank, PROBE, f"{name}: {exc}")
    except Exception as exc:  # noqa: BLE001 - one bad dump never ends the analysis
        return Skipped(rank, PROBE, f"{name}: malformed ({type(exc).__name__})")


def read_flight(paths: Iterable[Path], progress: Progress | None = None) -> FlightRead:
    """Read every dump under ``paths`` (see the module docstring); never raises on bad dumps."""
    skipped: list[Skipped] = []
    decoded: set[Path] = set()
    with collector_paused():  # 32,768 ranks' records: millions of acyclic objects
        dumps = tuple(iter_dumps(paths, skipped, progress, decoded))
    return FlightRead(dumps, tuple(skipped), frozenset(decoded))
