"""The one reader of archives a user hands us (tar, tar.gz, zip), with one set of rules.

Bundles and folders of Flight Recorder dumps arrive as archives from other
machines and other people: nothing in them is trusted. Members are read into
memory, never extracted, and only members that pass the rules below are
handed out, as ``Member`` values the caller reads before asking for the next:

* plain files only: links, devices, FIFOs are refused (directories are just
  skipped), as Python's ``tarfile.data_filter`` (PEP 706) would;
* relative names only: absolute names, ``..`` parts and backslashes are refused;
* bounds: ``Bounds.member_bytes`` per member, ``Bounds.members`` members and
  ``Bounds.total_bytes`` over the whole archive (what decompression walks through,
  read or not, so a gzip bomb ends early).

A member that breaks a rule, or a bound hit, is a ``Refused`` value naming the
rule or bound: the caller reports it as evidence of absence (``Skipped``) or as
one sentence, never a traceback. After a ``members`` or ``total-bytes`` refusal
the archive is not read further.
"""

from __future__ import annotations

import functools
import os
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

MAX_MEMBER_BYTES = 512 * 1024 * 1024
"""A Flight Recorder dump of a large job is tens of MiB; 512 MiB leaves room."""
MAX_MEMBERS = 100_000
"""A bundle of a 16k-rank job holds fewer files than this."""
MAX_TOTAL_BYTES = 8 * 1024 * 1024 * 1024
"""Bytes walked through (decompressed) in one archive, members read or not."""


MAX_HEADER_BYTES = 1024 * 1024
"""A tar member's extended header (PAX records, a GNU long name): tarfile reads it whole
into memory before the member is seen, so a 1 MB archive could ask for a 1 GiB header."""


class _BoundedHeaders(tarfile.TarInfo):
    """``TarInfo`` that refuses an extended header past ``MAX_HEADER_BYTES`` before
    reading it (tarfile turns the error into a ``ReadError`` carrying this sentence)."""

    def _refuse_large(self) -> None:
        if self.size > MAX_HEADER_BYTES:
            # absent from the stubs, present in every CPython 3: tarfile reports it as ReadError
            raise tarfile.SubsequentHeaderError(  # type: ignore[attr-defined]
                f"an extended header of {self.size} bytes (header-bytes bound: {MAX_HEADER_BYTES})"
            )

    def _proc_pax(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:
        self._refuse_large()
        return super()._proc_pax(tarfile)  # type: ignore[misc]

    def _proc_gnulong(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:
        self._refuse_large()
        return super()._proc_gnulong(tarfile)  # type: ignore[misc]


@dataclass(frozen=True)
class Bounds:
    """How much of an archive a reader may take; part of every reader's signature."""

    member_bytes: int = MAX_MEMBER_BYTES
    members: int = MAX_MEMBERS
    total_bytes: int = MAX_TOTAL_BYTES


@dataclass(frozen=True)
class Member:
    """A plain file of the archive that passed the rules; ``read`` it before the next one."""

    name: str
    """Relative POSIX name, without a leading ``./``."""
    size: int
    read: Callable[[], bytes]


@dataclass(frozen=True)
class Refused:
    """A member (or the rest of the archive) that a rule or a bound kept out."""

    name: str
    rule: str
    """``member-bytes``, ``members``, ``total-bytes``, ``name`` or ``type``."""
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}"


Entry = Member | Refused


_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"PK\x03\x04", b"PK\x05\x06")


TarMode = Literal["r:gz", "r:bz2", "r:xz", "r:"]


def _tar_mode(path: Path) -> TarMode:
    """The compression by magic bytes (trying each, tarfile reports every failure)."""
    with path.open("rb") as f:
        head = f.read(6)
    modes: tuple[tuple[bytes, TarMode], ...] = (
        (b"\x1f\x8b", "r:gz"),
        (b"BZh", "r:bz2"),
        (b"\xfd7zXZ\x00", "r:xz"),
    )
    for magic, mode in modes:
        if head.startswith(magic):
            return mode
    return "r:"


def is_archive(path: Path) -> bool:
    """Whether ``path`` is a file this module reads (tar of any compression, or zip), by
    its first bytes only: ``tarfile.is_tarfile`` parses the first member, whose header
    alone may be a gigabyte, and reads a FIFO forever."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.pread(fd, 512, 0)
    finally:
        os.close(fd)
    return head.startswith(_MAGIC) or head[257:262] == b"ustar"


def clean_name(raw: str) -> str | None:
    """The member name to use, or None when it is absolute, climbs out or is empty."""
    if "\\" in raw or raw.startswith("/"):
        return None
    parts = [p for p in PurePosixPath(raw).parts if p != "."]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def members(
    path: Path,
    bounds: Bounds = Bounds(),  # noqa: B008 - frozen
    wanted: Callable[[str], bool] = lambda name: True,
) -> Iterator[Entry]:
    """Every member of the archive at ``path`` that ``wanted`` (by its clean name) accepts,
    or the reason it was refused. Raises ``OSError``/``tarfile.TarError``/
    ``zipfile.BadZipFile`` only for an archive that cannot be opened or is corrupt."""
    if zipfile.is_zipfile(path):
        yield from _zip(path, bounds, wanted)
    else:
        yield from _tar(path, bounds, wanted)


class _Budget:
    """Counts members and bytes against the bounds."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.count = 0
        self.total = 0

    def over(self, name: str, size: int) -> Refused | None:
        self.count += 1
        self.total += max(size, 0)
        if self.count > self.bounds.members:
            return Refused(name, "members", f"more than {self.bounds.members} members")
        if self.total > self.bounds.total_bytes:
            return Refused(name, "total-bytes", f"more than {self.bounds.total_bytes} bytes")
        return None


def _check(raw: str, is_file: bool, size: int, bounds: Bounds) -> tuple[str, Refused | None]:
    name = clean_name(raw)
    if name is None:
        return raw, Refused(raw, "name", "an absolute name or one that climbs out (..)")
    if not is_file:
        return name, Refused(name, "type", "not a plain file (a link or a device)")
    if size > bounds.member_bytes:
        return name, Refused(name, "member-bytes", f"larger than {bounds.member_bytes} bytes")
    return name, None


def _tar(path: Path, bounds: Bounds, wanted: Callable[[str], bool]) -> Iterator[Entry]:
    budget = _Budget(bounds)
    with tarfile.open(path, _tar_mode(path), tarinfo=_BoundedHeaders) as tar:
        for info in tar:
            stop = budget.over(info.name, info.size if info.isfile() else 0)
            if stop is not None:
                yield stop
                return
            if info.isdir():
                continue
            name, refused = _check(info.name, info.isfile(), info.size, bounds)
            if not wanted(name):
                continue
            if refused is not None:
                yield refused
                continue
            data = tar.extractfile(info)
            if data is not None:
                yield Member(name, info.size, functools.partial(data.read, info.size))


def _zip(path: Path, bounds: Bounds, wanted: Callable[[str], bool]) -> Iterator[Entry]:
    budget = _Budget(bounds)
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            stop = budget.over(info.filename, info.file_size)
            if stop is not None:
                yield stop
                return
            if info.is_dir():
                continue
            # zip has no links or devices that ZipFile would create; a Unix mode can say link
            is_file = (info.external_attr >> 16) & 0o170000 in (0, 0o100000)
            name, refused = _check(info.filename, is_file, info.file_size, bounds)
            if not wanted(name):
                continue
            if refused is not None:
                yield refused
                continue
            yield Member(name, info.file_size, functools.partial(_read_zip, zf, info))


def _read_zip(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """At most the declared size: a member whose data inflates past it is cut there."""
    with zf.open(info) as f:
        return f.read(info.file_size)
