"""Progress timestamps shared with the monitor process, and the automatic heartbeat.

The automatic heartbeat is a C callback queued with ``Py_AddPendingCall``: the
interpreter runs it only in the main thread and only between bytecodes, so its
timestamp goes stale exactly when the main thread stops executing Python (stuck
in C with or without the GIL). ``ping()`` writes a manual timestamp; once a
rank pings in an iteration, a Python loop that stops pinging is a hang too.
The timestamps live in an anonymous shared mapping created before the monitor
process forks, so the monitor reads them with no IPC and no GIL.
"""

from __future__ import annotations

import ctypes
import enum
import mmap
import struct
import threading
import time

_LAYOUT = struct.Struct("<dddqq")  # auto, manual (0 = unarmed), step_time, iteration, phase
_PENDING_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class Phase(enum.IntEnum):
    """What the main thread is doing; the monitor process picks its timeout from it."""

    STARTING = 0
    RUNNING = 1
    RESTARTING = 2
    EXITING = 3


class SharedProgress:
    """Five numbers in shared memory, written by the rank and read by its monitor process."""

    def __init__(self) -> None:
        self.buffer = mmap.mmap(-1, _LAYOUT.size)
        now = time.monotonic()
        _LAYOUT.pack_into(self.buffer, 0, now, 0.0, 0.0, 0, Phase.STARTING)

    def read(self) -> tuple[float, float, float, int, Phase]:
        auto, manual, step, iteration, phase = _LAYOUT.unpack_from(self.buffer, 0)
        return auto, manual, step, iteration, Phase(phase)

    def _write(self, index: int, value: float | int) -> None:
        offset = sum(struct.calcsize(c) for c in "dddqq"[:index])
        struct.pack_into("<" + "dddqq"[index], self.buffer, offset, value)

    def beat(self) -> None:
        self._write(0, time.monotonic())

    def ping(self) -> None:
        now = time.monotonic()
        _, manual, step, _, _ = self.read()
        if manual:
            delta = now - manual
            self._write(2, delta if not step else 0.8 * step + 0.2 * delta)
        self._write(1, now)

    def enter(self, iteration: int, phase: Phase) -> None:
        """A new phase: the automatic clock restarts and the manual one is disarmed."""
        self._write(3, iteration)
        self._write(1, 0.0)
        self.beat()
        self._write(4, int(phase))


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
