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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doctor.trust.safeio import private_dir

# A record is an 8-byte header, whose first byte counts writes (odd while one is under
# way: a sequence lock), then: auto, manual (0 = unarmed), step_time, iteration, phase, and
# for the watcher: pings this iteration, atomic() sections open. The monitor and the
# watcher read from other processes at any moment; ``struct.pack_into`` zero-fills a field
# before it writes it, and a monitor that read that zero once judged a rank to have made
# no progress since the host booted.
_FORMAT = "dddqqqq"
_LAYOUT = struct.Struct("<" + _FORMAT)
_HEADER = 8
_SIZE = _HEADER + _LAYOUT.size
_OFFSETS = tuple(_HEADER + struct.calcsize("<" + _FORMAT[:i]) for i in range(len(_FORMAT)))
_READ_TRIES = 1000
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
            self.buffer = mmap.mmap(-1, _SIZE)
        else:
            private_dir(path.parent)
            path.unlink(missing_ok=True)  # a stale file of an earlier run; never follow a link
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(path, flags, 0o600)
            try:
                os.ftruncate(fd, _SIZE)
                self.buffer = mmap.mmap(fd, _SIZE)
            finally:
                os.close(fd)
        # reentrant: the heartbeat runs between bytecodes, also inside a write of its thread
        self._lock = threading.RLock()
        self._depth = 0
        self._writer: int | None = None  # the thread in a write
        self._set(0, time.monotonic(), 4, Phase.STARTING)

    def read(self) -> tuple[float, float, float, int, Phase]:
        auto, manual, step, iteration, phase, _, _ = self._fields()
        return auto, manual, step, iteration, Phase(phase)

    def _fields(self) -> tuple[Any, ...]:
        if self._writer == threading.get_ident():  # in a write of this thread: nothing moves
            return _LAYOUT.unpack_from(self.buffer, _HEADER)
        return _settled(lambda offset, length: self.buffer[offset : offset + length])

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One write, seen whole or not at all by readers: the count is odd meanwhile."""
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._writer = threading.get_ident()
                self.buffer[0] = (self.buffer[0] + 1) % 256
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.buffer[0] = (self.buffer[0] + 1) % 256
                    self._writer = None

    def _set(self, *changes: float | int) -> None:
        """Fields by index and value, pairwise, written as one; each field in one store."""
        with self._writing():
            for index, value in zip(changes[::2], changes[1::2], strict=True):
                offset = _OFFSETS[int(index)]
                self.buffer[offset : offset + 8] = struct.pack("<" + _FORMAT[int(index)], value)

    def open_atomic(self, change: int) -> None:
        """``atomic()`` entered (+1) or left (-1)."""
        with self._writing():
            self._set(6, max(0, self._fields()[6] + change))

    def beat(self) -> None:
        self._set(0, time.monotonic())

    def ping(self) -> None:
        with self._writing():
            now = time.monotonic()
            _, manual, step, _, _, pings, _ = self._fields()
            if manual:
                delta = now - manual
                self._set(2, delta if not step else 0.8 * step + 0.2 * delta)
            self._set(1, now, 5, pings + 1)

    def enter(self, iteration: int, phase: Phase) -> None:
        """A new phase: the automatic clock restarts and the manual one is disarmed."""
        self._set(3, iteration, 1, 0.0, 5, 0, 0, time.monotonic(), 4, int(phase))


def progress_path(directory: Path, initial_rank: int) -> Path:
    """Where a rank's progress numbers live in its job directory."""
    return directory / "progress" / f"rank-{initial_rank}"


def _settled(read: Callable[[int, int], bytes]) -> tuple[Any, ...]:
    """The fields as a writer left them, read between two equal, even write counts; a
    writer stopped in the middle of one (SIGSTOP) still yields its fields, each whole."""
    fields = b""
    for _ in range(_READ_TRIES):
        before = read(0, 1)
        fields = read(_HEADER, _LAYOUT.size)
        if before == read(0, 1) and before and before[0] % 2 == 0:
            break
    return _LAYOUT.unpack(fields)


def read_progress_file(path: Path) -> ProgressRecord | None:
    """A rank's progress file as a record; None when it is absent, short or not a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size < _SIZE:
            return None
        fields = _settled(lambda offset, length: os.pread(fd, length, offset))
    except (OSError, struct.error):
        return None
    finally:
        os.close(fd)
    auto, manual, step, iteration, phase, pings, atomic = fields
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
