"""Files read or written on someone's behalf: no link followed, owner checked, size bounded.

nccl-doctor runs as root on shared nodes and inside every rank, so a path it
did not create may have been planted: a symlink to a root-only file, a FIFO
that never answers, a directory another user created first in ``/tmp``. Every
file the tool opens for a job goes through here:

* directories are *private*: created 0700, or verified to be a real directory
  (not a link) owned by the expected user that no one else can write;
* files are opened with ``O_NOFOLLOW`` (a planted link fails instead of being
  followed) and ``O_NONBLOCK`` (a FIFO does not hang the open), then checked
  with ``fstat`` on the open descriptor: a regular file, owned by the expected
  user, no larger than the reader's bound;
* writes go to a fresh ``O_EXCL`` temporary file (mode 0600) renamed over the
  target, so a planted name is replaced, never written through.

A refusal is an ``UnsafePath`` (an ``InputError``: exit 2, one sentence) that
says which check failed.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from doctor.errors import InputError

NOFOLLOW_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NOFOLLOW_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(InputError):
    """A path failed a trust check (a link, the wrong owner, open to others, too large)."""


def private_dir(path: Path, owner: int | None = None) -> Path:
    """``path`` as a private directory: created 0700 (with its missing parents, each
    private), or verified to be a real directory of ``owner`` (default: this user) that
    no other user can write. A directory of ours that others may only read is closed."""
    owner = os.getuid() if owner is None else owner
    check_ancestors(path, owner)
    _make_private(path, owner)
    return path


def _make_private(path: Path, owner: int) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        _make_private(path.parent, owner)
        _make_private(path, owner)
        return
    check_dir(path, owner)


def check_ancestors(path: Path, owner: int) -> None:
    """Refuse a path under a directory someone else could swap: every existing ancestor
    belongs to ``owner`` or root, and one that anyone may write is sticky (as ``/tmp``)."""
    for parent in Path(os.path.abspath(path)).parents:
        try:
            info = os.lstat(parent)
        except FileNotFoundError:
            continue
        if info.st_uid not in (owner, 0):
            raise UnsafePath(
                f"refusing {path}: {parent} belongs to uid {info.st_uid}, not uid {owner}; "
                "another user may have created it first"
            )
        if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002 and not info.st_mode & 0o1000:
            raise UnsafePath(f"refusing {path}: other users can write into {parent}")


def check_dir(path: Path, owner: int) -> os.stat_result:
    """Refuse a link, a non-directory, another owner, or a directory others can write."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise UnsafePath(f"cannot use {path}: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"refusing {path}: it is a symbolic link, not a directory")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(f"refusing {path}: it is not a directory")
    if info.st_uid != owner:
        raise UnsafePath(
            f"refusing {path}: it belongs to uid {info.st_uid}, not uid {owner}; "
            "another user may have created it first"
        )
    if info.st_mode & 0o022:
        raise UnsafePath(
            f"refusing {path}: other users can write into it "
            f"(mode {stat.S_IMODE(info.st_mode):o}); it must be 0700"
        )
    if info.st_mode & 0o077 and owner == os.getuid():
        os.chmod(path, 0o700)
    return info


def open_regular(
    path: Path, owner: int | None, limit: int | None = None, follow: bool = False
) -> int:
    """A read descriptor on ``path``: not a link, a regular file, of ``owner`` (None: any
    owner, for evidence a person named), at most ``limit`` bytes. The caller closes it.
    ``follow`` allows a link, for a file the user names for themselves (their own config,
    which NCCL reads through links too): the checks then apply to the file it points at."""
    try:
        fd = os.open(path, NOFOLLOW_READ & ~os.O_NOFOLLOW if follow else NOFOLLOW_READ)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"refusing {path}: it is a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(f"refusing {path}: not a regular file (a FIFO, device or socket)")
        if owner is not None and info.st_uid != owner:
            raise UnsafePath(f"refusing {path}: it belongs to uid {info.st_uid}, not uid {owner}")
        if limit is not None and info.st_size > limit:
            raise UnsafePath(
                f"refusing {path}: {info.st_size} bytes is over the bound of {limit} bytes"
            )
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path, limit: int, owner: int | None = None) -> bytes:
    """The content of a regular file of ``owner`` (default: this user), at most ``limit``
    bytes (a file that grows past it while read is cut there)."""
    fd = open_regular(path, os.getuid() if owner is None else owner, limit)
    with os.fdopen(fd, "rb") as f:  # read(limit) would allocate ``limit`` bytes up front
        return f.read(min(os.fstat(fd).st_size + 1, limit))


def read_text(path: Path, limit: int, owner: int | None = None) -> str:
    return read_bytes(path, limit, owner).decode("utf-8", errors="replace")


def write_atomic(path: Path, data: bytes | str, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data``: written to a fresh ``O_EXCL`` file beside it, then
    renamed, so a link or file planted at ``path`` is replaced, never written through."""
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, _NOFOLLOW_CREATE, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def create_exclusive(path: Path, data: bytes | str, mode: int = 0o600) -> bool:
    """Create ``path`` holding ``data`` only if nothing is there (whole or not at all);
    False when it exists. Readers never see a partial file: it appears by ``link``."""
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, _NOFOLLOW_CREATE, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        try:
            os.link(tmp, path, follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        tmp.unlink(missing_ok=True)


def open_append(path: Path, mode: int = 0o600) -> int:
    """An append descriptor on our own regular file (created if absent): never through a
    link, never into a file of another user or one with other names (a planted hard link)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"refusing to append to {path}: it is a symbolic link") from None
        raise
    os.set_blocking(fd, True)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_nlink != 1:
        os.close(fd)
        raise UnsafePath(f"refusing to append to {path}: not a private regular file of ours")
    return fd


def size_of(path: Path) -> int:
    """The size of a regular file at ``path`` (0 when absent or not a regular file)."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


def read_from(path: Path, offset: int, limit: int, owner: int | None = None) -> str:
    """At most ``limit`` bytes of a file of ``owner`` (default: this user) from ``offset``
    (the tail another process appended), as text."""
    fd = open_regular(path, os.getuid() if owner is None else owner)
    with os.fdopen(fd, "rb") as f:
        f.seek(offset)
        size = max(os.fstat(fd).st_size - offset, 0)
        return f.read(min(size + 1, limit)).decode("utf-8", errors="replace")
