"""Where the kernel holds a rank's main thread: ``/proc/PID/wchan`` and ``/proc/PID/syscall``.

A Python stack says which function a rank is in; it cannot say that the
``open()`` under ``get_batch`` is waiting for a FIFO writer, or that a read
waits on a network filesystem. The kernel can: ``wchan`` names the kernel
function the thread sleeps in (``fifo_open``, ``pipe_read``, ``futex_do_wait``,
``rpc_wait_bit_killable``), and ``syscall`` gives the call's number and
arguments, from which the path (``openat``) or the file descriptor (``read``)
is recovered. ``describe`` is pure over those texts, so tests feed it recorded
lines; ``read_wait`` does the I/O. What a wait means to a person is the
verdict's business (``doctor.verdict.kernel``).
"""

from __future__ import annotations

import os
import platform
import stat
from dataclasses import dataclass
from pathlib import Path

PATH_MAX = 4096
NETWORK_FS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "fuse", "9p", "glusterfs"}
)
_FUSE = "fuse."

_SYSCALLS = {
    "x86_64": {
        0: "read",
        1: "write",
        2: "open",
        7: "poll",
        17: "pread64",
        19: "readv",
        23: "select",
        35: "nanosleep",
        42: "connect",
        43: "accept",
        45: "recvfrom",
        47: "recvmsg",
        61: "wait4",
        73: "flock",
        74: "fsync",
        75: "fdatasync",
        202: "futex",
        219: "restart_syscall",
        230: "clock_nanosleep",
        232: "epoll_wait",
        257: "openat",
        270: "pselect6",
        271: "ppoll",
        281: "epoll_pwait",
        288: "accept4",
        437: "openat2",
    },
    "aarch64": {
        22: "epoll_pwait",
        32: "flock",
        56: "openat",
        63: "read",
        64: "write",
        65: "readv",
        67: "pread64",
        72: "pselect6",
        73: "ppoll",
        82: "fsync",
        83: "fdatasync",
        98: "futex",
        101: "nanosleep",
        115: "clock_nanosleep",
        128: "restart_syscall",
        202: "accept",
        203: "connect",
        207: "recvfrom",
        212: "recvmsg",
        242: "accept4",
        260: "wait4",
        437: "openat2",
    },
}
_PATH_ARG = {"open": 0, "openat": 1, "openat2": 1}
_FD_ARG = {"read", "readv", "pread64", "recvfrom", "recvmsg", "write", "fsync", "fdatasync"}


@dataclass(frozen=True)
class KernelWait:
    """Where the kernel holds one thread."""

    wchan: str
    """The kernel function it sleeps in ('' when running or unreadable)."""
    syscall: str
    """The system call with what it is about, e.g. ``openat("/data/train_2.bin", a FIFO)``."""


def syscall_name(number: int, machine: str | None = None) -> str:
    table = _SYSCALLS.get(machine or platform.machine(), {})
    return table.get(number, f"syscall {number}")


def describe(
    wchan: str,
    syscall_line: str,
    path_at: dict[int, tuple[str, str]] | None = None,
    fd_target: dict[int, str] | None = None,
    machine: str | None = None,
) -> KernelWait:
    """A ``KernelWait`` from the two ``/proc`` texts; ``path_at`` maps a pointer argument to
    the path it points at and that file's kind (``file_kind``), and ``fd_target`` a
    descriptor to what it names (both optional)."""
    wchan = "" if wchan.strip() in ("", "0") else wchan.strip()
    fields = syscall_line.split()
    if not fields or fields[0] in ("running", "-1") or not fields[0].lstrip("-").isdigit():
        return KernelWait(wchan, "")
    name = syscall_name(int(fields[0]), machine)
    args = [int(a, 16) for a in fields[1:7] if a.startswith("0x")]
    detail = ""
    if name in _PATH_ARG and len(args) > _PATH_ARG[name]:
        path, kind = (path_at or {}).get(args[_PATH_ARG[name]], ("", ""))
        detail = f'"{path}"' + (f", {kind}" if kind else "") if path else ""
    elif name in _FD_ARG and args:
        target = (fd_target or {}).get(args[0], "")
        detail = f"fd {args[0]}" + (f": {target}" if target else "")
    return KernelWait(wchan, f"{name}({detail})")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _string_at(pid: int, address: int) -> str:
    """A NUL-terminated string of the process's memory (needs the right to ptrace it)."""
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError:
        return ""
    try:
        raw = os.pread(fd, PATH_MAX, address)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def file_kind(pid: int, path: str) -> str:
    """``a FIFO``, ``on nfs4`` (a network filesystem), or '' for an ordinary local file."""
    kinds = []
    try:
        if stat.S_ISFIFO(os.stat(f"/proc/{pid}/root{path}").st_mode):
            kinds.append("a FIFO")
    except OSError:
        pass
    fs = filesystem_of(pid, path)
    if fs in NETWORK_FS or fs.startswith(_FUSE):
        kinds.append(f"on {fs} (a network filesystem)")
    return ", ".join(kinds)


def filesystem_of(pid: int, path: str) -> str:
    """The type of the filesystem ``path`` lies on, as the process sees its mounts."""
    best, kind = "", ""
    for line in _read_text(Path(f"/proc/{pid}/mountinfo")).splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or not rest:
            continue
        mount = fields[4]
        inside = path == mount or path.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, rest[0]
    return kind


def read_wait(pid: int) -> KernelWait:
    """Where the kernel holds ``pid``'s main thread now; empty fields where unreadable."""
    base = Path(f"/proc/{pid}")
    wchan = _read_text(base / "wchan")
    line = _read_text(base / "syscall")
    plain = describe(wchan, line)
    if not plain.syscall:
        return plain
    fields = line.split()
    args = [int(a, 16) for a in fields[1:7] if a.startswith("0x")]
    paths: dict[int, tuple[str, str]] = {}
    fds: dict[int, str] = {}
    for address in args[:2]:
        text = _string_at(pid, address) if address else ""
        if text.startswith("/"):
            paths[address] = (text, file_kind(pid, text))
    if args:
        try:
            target = os.readlink(base / "fd" / str(args[0]))
        except OSError:
            target = ""
        if target:
            kind = file_kind(pid, target) if target.startswith("/") else ""
            fds[args[0]] = f"{target}, {kind}" if kind else target
    return describe(wchan, line, paths, fds)


TRACERS_OF_OURS = frozenset({"py-spy"})
"""Tracers whose stop is a sample being taken, not a stopped rank."""


def stopped(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether ``pid`` is stopped by a signal (T) or by a debugger (t); a process that
    py-spy is sampling at this instant is traced for a moment, and does not count, nor does
    one whose tracer is gone: a sample ending shows ``t`` with ``TracerPid: 0`` for an instant
    (1 read in 2,000 during py-spy's samples of a sleeping process), or its tracer exits
    between the two reads; either once made a healthy rank of a test job "stopped"."""
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return False
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    state = fields.get("State", "").strip()[:1]
    if state == "T":
        return True
    if state != "t":
        return False
    tracer = fields.get("TracerPid", "0").strip()
    if tracer == "0":  # the tracer let go as the status was read
        return False
    try:
        comm = (proc / tracer / "comm").read_text().strip()
    except OSError:
        return (proc / tracer).exists()  # an exited tracer holds nothing
    return comm not in TRACERS_OF_OURS
