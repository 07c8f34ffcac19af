"""``py-spy dump`` as text: each process's threads and frames, so the stack rules of live
triage (who waits in a collective, who is elsewhere) read a pasted dump too.

    Process 48211: python train.py
    Python v3.11.9 (/usr/bin/python3.11)

    Thread 48211 (idle): "MainThread"
        wait (torch/distributed/distributed_c10d.py:2501)
        all_reduce (torch/distributed/distributed_c10d.py:2495)

Native frames (``--native``) look the same with a library instead of a file.
"""

from __future__ import annotations

import re

from doctor.evidence import Frame, ThreadStack
from doctor.logs.block import Fact, StackDump
from doctor.logs.lines import Line

_PROCESS = re.compile(r"^Process (\d{1,18}): ")
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([\w+]+)\)(?:: "([^"]*)")?')
_MAIN_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \([\w+]+\): "MainThread"')
_FRAME = re.compile(r"^\s+(\S.*?) \((.+?)(?::(\d{1,18}))?\)\s*$")
MAX_THREADS = 512
MAX_FRAMES = 512


class PyspyDump:
    """One process of a ``py-spy dump``, from ``Process PID:`` to the next blank gap."""

    @staticmethod
    def start(line: Line) -> bool:
        """A dump's ``Process`` header, or (pasted without it) its main thread's header."""
        return bool(_PROCESS.match(line.text) or _MAIN_THREAD.match(line.text))

    def __init__(self, line: Line) -> None:
        m = _PROCESS.match(line.text)
        self._pid = int(m.group(1)) if m else None
        self._first = line
        self._threads: list[ThreadStack] = []
        self._thread: tuple[int, str, str] | None = None
        self._frames: list[Frame] = []
        if not m:
            self.feed(line)

    def feed(self, line: Line) -> bool:
        text = line.text.rstrip()
        if not text or text.startswith("Python v"):
            return True
        if m := _THREAD.match(text):
            self._end_thread()
            ident = int(m.group(1), 16 if m.group(1).startswith("0x") else 10)
            self._thread = (ident, m.group(2), m.group(3) or "")
            return True
        if self._thread and (m := _FRAME.match(text)):
            if len(self._frames) < MAX_FRAMES:
                self._frames.append(Frame(m.group(1), m.group(2), int(m.group(3) or 0)))
            return True
        if self._thread and text.startswith((" ", "\t")):
            return True  # --locals lines under a frame
        return False

    def _end_thread(self) -> None:
        if self._thread and len(self._threads) < MAX_THREADS:
            ident, state, name = self._thread
            self._threads.append(
                ThreadStack(
                    ident,
                    name,
                    tuple(self._frames),
                    holds_gil="gil" in state,
                    active="active" in state,
                    is_main=name == "MainThread" or ident == self._pid,
                )
            )
        self._thread, self._frames = None, []

    def take(self) -> list[Fact]:
        return []

    def close(self) -> list[Fact]:
        self._end_thread()
        if not self._threads:
            return []
        first = self._first
        return [StackDump(first.rank, self._pid, first.host, tuple(self._threads), first.where)]
