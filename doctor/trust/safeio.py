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
    flags = NOFOLLOW_READ & ~os.O_NOFOLLOW if follow else NOFOLLOW_READ
    return _open_checked(str(path), flags, path, owner, limit)


def _open_checked(
    name: str,
    flags: int,
    where: object,
    owner: int | None,
    limit: int | None,
    dir_fd: int | None = None,
) -> int:
    """``open_regular``'s open and checks, of ``name`` (relative to ``dir_fd`` if given)."""
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"refusing {where}: it is a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(f"refusing {where}: not a regular file (a FIFO, device or socket)")
        if owner is not None and info.st_uid != owner:
            raise UnsafePath(f"refusing {where}: it belongs to uid {info.st_uid}, not uid {owner}")
        if limit is not None and info.st_size > limit:
            raise UnsafePath(
                f"refusing {where}: {info.st_size} bytes is over the bound of {limit} bytes"
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


def _temp_beside(path: Path, data: bytes | str, mode: int) -> Path:
    """A fresh ``O_EXCL`` file beside ``path`` holding ``data``, for the caller to rename or
    link into place (and to remove); removed here if writing it fails."""
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, _NOFOLLOW_CREATE, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_atomic(path: Path, data: bytes | str, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data``: written to a fresh ``O_EXCL`` file beside it, then
    renamed, so a link or file planted at ``path`` is replaced, never written through."""
    tmp = _temp_beside(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def create_exclusive(path: Path, data: bytes | str, mode: int = 0o600) -> bool:
    """Create ``path`` holding ``data`` only if nothing is there (whole or not at all);
    False when it exists. Readers never see a partial file: it appears by ``link``."""
    tmp = _temp_beside(path, data, mode)
    try:
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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _component_ok(info: os.stat_result, owner: int, where: str, last: bool) -> None:
    """One step of a walk: a directory of ``owner`` (or root's, above the last) that no
    one else can swap entries in; a root directory anyone may write must be sticky."""
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(f"refusing {where}: it is not a directory")
    if info.st_uid != owner and (last or info.st_uid != 0):
        raise UnsafePath(f"refusing {where}: it belongs to uid {info.st_uid}, not uid {owner}")
    if info.st_uid == owner and owner != 0 and info.st_mode & 0o022:
        raise UnsafePath(f"refusing {where}: other users can write into it")
    if info.st_mode & 0o002 and not info.st_mode & 0o1000:
        raise UnsafePath(f"refusing {where}: other users can write into it")


class TrustedDir:
    """A directory of ``owner`` resolved once, from ``/``, one component at a time
    (``O_NOFOLLOW | O_DIRECTORY``, each component checked), then used only through its
    descriptor: whatever is renamed or linked in its path later, every open, create
    and unlink below happens in the directory that was checked. Root uses it for every
    path it reads or writes on another user's behalf."""

    def __init__(self, fd: int, path: Path, owner: int) -> None:
        self.fd, self.path, self.owner = fd, path, owner

    @classmethod
    def open(cls, path: Path | str, owner: int, root_may_own: bool = False) -> TrustedDir:
        """Walk ``path`` (absolute); ``UnsafePath`` names the component that failed,
        ``FileNotFoundError`` when one is missing. ``root_may_own``: the folder itself
        may be root's too (a folder only read in, as ``/tmp`` for a log in it)."""
        path = Path(path)
        if not path.is_absolute():
            raise UnsafePath(f"refusing {path}: not an absolute path")
        fd = os.open("/", _DIR_FLAGS)
        try:
            where = Path("/")
            parts = [p for p in path.parts[1:] if p not in ("", ".")]
            if ".." in parts:
                raise UnsafePath(f"refusing {path}: it climbs with ..")
            for i, name in enumerate(parts):
                where = where / name
                fd, parent = _step(fd, name, where), fd
                os.close(parent)
                last = i == len(parts) - 1 and not root_may_own
                _component_ok(os.fstat(fd), owner, str(where), last)
            if not parts:
                _component_ok(os.fstat(fd), owner, "/", not root_may_own)
            return cls(fd, path, owner)
        except BaseException:
            os.close(fd)
            raise

    def sub(self, name: str) -> TrustedDir:
        """The child directory ``name``, checked as the last component of a walk."""
        fd = _step(self.fd, _leaf(name), str(self.path / name))
        try:
            _component_ok(os.fstat(fd), self.owner, str(self.path / name), True)
        except BaseException:
            os.close(fd)
            raise
        return TrustedDir(fd, self.path / name, self.owner)

    def open_file(self, name: str, limit: int | None = None) -> int:
        """A blocking read descriptor on the owner's regular file ``name`` here (never a
        link, never waiting on a FIFO), at most ``limit`` bytes long."""
        return _open_checked(
            _leaf(name), NOFOLLOW_READ, self.path / name, self.owner, limit, self.fd
        )

    def read(self, name: str, limit: int, offset: int = 0) -> bytes:
        """At most ``limit`` bytes of the owner's regular file ``name`` from ``offset``
        (a larger file is cut at the bound, not refused)."""
        fd = self.open_file(name)
        try:
            size = max(os.fstat(fd).st_size - offset, 0)
            return os.pread(fd, min(size + 1, limit), offset)
        finally:
            os.close(fd)

    def lstat(self, name: str) -> os.stat_result | None:
        """``name``'s own status (a link is not followed); None when absent."""
        try:
            return os.stat(_leaf(name), dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return None

    def size(self, name: str) -> int:
        """The size of the owner's regular file ``name`` (0 for anything else)."""
        info = self.lstat(name)
        ok = info is not None and stat.S_ISREG(info.st_mode) and info.st_uid == self.owner
        return info.st_size if ok and info is not None else 0

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def write(self, name: str, data: bytes | str) -> None:
        """Replace ``name`` here with ``data``, through a fresh ``O_EXCL`` file (0600)
        renamed over it: a link or file planted at ``name`` is replaced, never written."""
        raw = data.encode() if isinstance(data, str) else data
        tmp = f".{_leaf(name)}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, _NOFOLLOW_CREATE, 0o600, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.unlink(tmp)
            raise

    def unlink(self, name: str) -> bool:
        """Remove ``name`` here (never anything a link points at); True when removed."""
        try:
            os.unlink(_leaf(name), dir_fd=self.fd)
        except OSError:
            return False
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> TrustedDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _leaf(name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise UnsafePath(f"refusing {name!r}: not a plain file name")
    return name


def _step(fd: int, name: str, where: object) -> int:
    """Open the directory ``name`` under ``fd`` without following a link."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(
                f"refusing {where}: it is a symbolic link or not a directory"
            ) from None
        raise


def open_owned(path: Path | str, owners: set[int] | None = None) -> int:
    """A read descriptor on the regular file at ``path`` of one of ``owners`` (None: of
    whoever owns it), every folder on the way walked and checked as its owner's or
    root's (``TrustedDir``). For a file a rank's environment names, which may be
    anywhere (``/tmp`` included)."""
    path = Path(os.path.abspath(path))
    uid = os.lstat(path).st_uid
    if owners is not None and uid not in owners:
        raise UnsafePath(f"refusing {path}: it belongs to uid {uid}")
    with TrustedDir.open(path.parent, uid, root_may_own=True) as folder:
        return folder.open_file(path.name)


def read_owned(path: Path | str, owner: int, limit: int) -> bytes:
    """At most ``limit`` bytes of ``owner``'s regular file at ``path``, every directory on
    the way walked and checked (``TrustedDir``)."""
    path = Path(path)
    with TrustedDir.open(path.parent, owner) as folder:
        return folder.read(path.name, limit)
