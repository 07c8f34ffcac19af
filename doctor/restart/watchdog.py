"""Progress timestamps shared with the monitor process, and the automatic heartbeat.

The automatic heartbeat is a C callback queued with ``Py_AddPendingCall``: the
interpreter runs it only in the main thread and only between bytecodes, so its
timestamp goes stale exactly when the main thread stops executing Python (stuck
in C with or without the GIL). ``ping()`` writes a manual timestamp; once a
rank pings in an iteration, a Python loop that stops pinging is a hang too.
The timestamps live in a shared mapping created before the monitor process
forks, so the monitor reads them with no IPC and no GIL. Given a path, the
mapping is backed by that file (``<jobdir>/progress/rank-<N>``): the job's
watcher (``doctor.watch``) reads the same numbers from outside, also while the
rank holds the GIL or is stopped, and the rank pays nothing more than the
memory stores it already made.
"""

from __future__ import annotations

import ctypes
import enum
import mmap
import os
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from doctor.trust.safeio import private_dir

# auto, manual (0 = unarmed), step_time, iteration, phase, then for the watcher:
# pings this iteration, atomic() sections open
_FORMAT = "dddqqqq"
_LAYOUT = struct.Struct("<" + _FORMAT)
_PENDING_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class Phase(enum.IntEnum):
    """What the main thread is doing; the monitor process picks its timeout from it."""

    STARTING = 0
    RUNNING = 1
    RESTARTING = 2
    EXITING = 3


@dataclass(frozen=True)
class ProgressRecord:
    """One rank's progress numbers as the watcher reads them (monotonic clock, seconds)."""

    auto: float
    """The automatic heartbeat: the main thread last ran Python code then."""
    manual: float
    """The last ``ping()`` of this iteration; 0.0 before the first one."""
    step_time: float
    """Moving average of the time between pings; 0.0 before two pings."""
    iteration: int
    phase: Phase
    pings: int
    """Pings in this iteration."""
    atomic: int
    """``atomic()`` sections open now (a checkpoint write is not a hang)."""


class SharedProgress:
    """Progress numbers in shared memory, written by the rank, read by its monitor process
    (and, when backed by ``path``, by the job's watcher)."""

    def __init__(self, path: Path | None = None) -> None:
        if path is None:
            self.buffer = mmap.mmap(-1, _LAYOUT.size)
        else:
            private_dir(path.parent)
            path.unlink(missing_ok=True)  # a stale file of an earlier run; never follow a link
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(path, flags, 0o600)
            try:
                os.ftruncate(fd, _LAYOUT.size)
                self.buffer = mmap.mmap(fd, _LAYOUT.size)
            finally:
                os.close(fd)
        now = time.monotonic()
        _LAYOUT.pack_into(self.buffer, 0, now, 0.0, 0.0, 0, Phase.STARTING, 0, 0)

    def read(self) -> tuple[float, float, float, int, Phase]:
        auto, manual, step, iteration, phase, _, _ = _LAYOUT.unpack_from(self.buffer, 0)
        return auto, manual, step, iteration, Phase(phase)

    def _write(self, index: int, value: float | int) -> None:
        offset = sum(struct.calcsize(c) for c in _FORMAT[:index])
        struct.pack_into("<" + _FORMAT[index], self.buffer, offset, value)

    def _read_field(self, index: int) -> int:
        offset = sum(struct.calcsize(c) for c in _FORMAT[:index])
        value: int = struct.unpack_from("<" + _FORMAT[index], self.buffer, offset)[0]
        return value

    def open_atomic(self, change: int) -> None:
        """``atomic()`` entered (+1) or left (-1)."""
        self._write(6, max(0, self._read_field(6) + change))

    def beat(self) -> None:
        self._write(0, time.monotonic())

    def ping(self) -> None:
        now = time.monotonic()
        _, manual, step, _, _ = self.read()
        if manual:
            delta = now - manual
            self._write(2, delta if not step else 0.8 * step + 0.2 * delta)
        self._write(1, now)
        self._write(5, self._read_field(5) + 1)  # after the time: a reader never sees a new
        # count with an old time

    def enter(self, iteration: int, phase: Phase) -> None:
        """A new phase: the automatic clock restarts and the manual one is disarmed."""
        self._write(3, iteration)
        self._write(1, 0.0)
        self._write(5, 0)
        self.beat()
        self._write(4, int(phase))


def progress_path(directory: Path, initial_rank: int) -> Path:
    """Where a rank's progress numbers live in its job directory."""
    return directory / "progress" / f"rank-{initial_rank}"


def read_progress_file(path: Path) -> ProgressRecord | None:
    """A rank's progress file as a record; None when it is absent, short or not a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, _LAYOUT.size)
    finally:
        os.close(fd)
    if len(data) < _LAYOUT.size:
        return None
    auto, manual, step, iteration, phase, pings, atomic = _LAYOUT.unpack(data)
    try:
        return ProgressRecord(auto, manual, step, iteration, Phase(phase), pings, atomic)
    except ValueError:
        return None


class ProgressWatchdog:
    """Queues the automatic heartbeat into the main thread every ``interval`` seconds."""

    def __init__(self, progress: SharedProgress, interval: float) -> None:
        self.progress = progress
        self.interval = interval
        self._callback = _PENDING_CALL(self._beat)
        self._add = ctypes.pythonapi.Py_AddPendingCall
        self._add.argtypes = [_PENDING_CALL, ctypes.c_void_p]
        self._add.restype = ctypes.c_int
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nccl-doctor-watchdog", daemon=True)

    def _beat(self, _data: int) -> int:
        self.progress.beat()
        return 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._add(self._callback, None)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 1)
