"""Python tracebacks a rank printed: which exception ended it, and where in its code.

A traceback is ``Traceback (most recent call last):``, ``File "..", line N, in f`` frames
with their source lines, then the unindented ``ExcType: message`` line. The exception
that ended a rank tells the rules whether the rank died of its own error (a ``KeyError``
in its data loader, CUDA out of memory) or of the job's (a ``DistBackendError`` raised
because a peer vanished).
"""

from __future__ import annotations

import re
from dataclasses import replace

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.block import Collecting, Fact
from doctor.logs.lines import Line

_FRAME = re.compile(r'^\s+File "([^"]{1,500})", line (\d{1,18}), in (\S{1,200})')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]{0,200}(?:Error|Exception|Interrupt|Exit|Failure)\b\w*)")
_MAIN_FIRST = re.compile(r"\bin (?:local_)?main_process_first\b|\.(?:local_)?main_process_first\(")
PRIMITIVES = frozenset(
    "all_reduce broadcast barrier all_gather all_gather_into_tensor reduce_scatter "
    "reduce_scatter_tensor all_to_all all_to_all_single reduce gather scatter send recv "
    "monitored_barrier".split()
)
"""torch.distributed's collectives themselves (not wrappers like broadcast_object_list)."""
SET_UP = frozenset(
    "init_process_group _new_process_group_helper new_group init_device_mesh set_device "
    "_store_based_barrier _sync_params_and_buffers _sync_module_states "
    "_verify_param_shape_across_processes".split()
)
"""Functions of a job's set-up: creating the process group, giving the rank its GPU, and
DDP's constructor, whose first broadcast is where NCCL creates the communicator."""
_C10D_FRAME = re.compile(r'distributed_c10d\.py", line \d+, in (\w+)')
_C10D_CALL = re.compile(r"^\s+(?:dist|torch\.distributed)\.(\w+)\(")
_IGNORED = re.compile(r"Exception ignored (?:in|on|while)\b")
"""The interpreter's header for an exception it printed and went on past (raised in a
``__del__``, a callback, at shutdown: the data loader's ``can only test a child process``):
the process did not end of it."""
MAX_LINES = 2000
"""A traceback longer than this is not one (a log that indents everything): stop reading."""


class Traceback(Collecting):
    """One traceback, from its header to its exception line."""

    @staticmethod
    def start(line: Line) -> bool:
        text = line.text
        return "Traceback (most recent call last)" in text or (
            "ignored" in text and _IGNORED.search(text) is not None
        )

    def __init__(self, line: Line) -> None:
        super().__init__()
        self._first = line
        self._ignored = "Traceback (most recent call last)" not in line.text
        """Opened by ``Exception ignored in``: its exception ended nothing."""
        self.read_exception = False
        """Whether the exception line was this traceback's (no other parser reads it)."""
        self._frame = ""
        self._set_up = ""
        """The set-up function among the frames (``SET_UP``), if any."""
        self._lines = 0

    def feed(self, line: Line) -> bool:
        self._lines += 1
        text = line.text
        if m := _FRAME.match(text):
            self._frame = f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)} in {m.group(3)}"
            if m.group(3) in SET_UP:
                self._set_up = m.group(3)
            return True
        if self._lines > MAX_LINES:
            self._frame = ""  # no traceback: nothing to report as one
            return False
        if text.startswith((" ", "\t")) or not text.strip():
            return True  # source lines, carets, blank lines between chained tracebacks
        if self._ignored and "Traceback (most recent call last)" in text:
            return True  # the ignored exception's own traceback
        if _EXCEPTION.match(text.strip()):
            self.read_exception = True
            if self._ignored:
                self._frame = ""
                return False
            where = f" [at {self._frame}]" if self._frame else ""
            event = line.event(kinds.EXCEPTION, text=text.strip()[:300] + where)
            self._out.append(replace(event, op=self._set_up) if self._set_up else event)
            self._frame = ""
        return False

    def close(self) -> list[Fact]:
        """The traceback ended with no exception line read (an excerpt cut short): where it
        was is all that is left."""
        if self._frame:
            cut = f"traceback cut before its exception line, last frame {self._frame}"
            if self._set_up:
                cut += f", inside the job's set-up ({self._set_up})"
            self._out.append(self._first.event(kinds.TRACEBACK_CUT, text=cut, op=self._set_up))
        return self.take()


def events(line: Line) -> list[LogEvent]:
    """What a traceback's frame says even when the excerpt lost the traceback's header: the
    collective the rank was in (a ``distributed_c10d.py`` frame, or a ``dist.barrier(``
    source line), or a main-process-first section around it."""
    text = line.text
    if "main_process_first" in text and _MAIN_FIRST.search(text):
        return [line.event(kinds.WAITS_FOR_MAIN)]
    m = _C10D_FRAME.search(text) if "distributed_c10d" in text else _C10D_CALL.match(text)
    if m and m.group(1) in PRIMITIVES:
        return [line.event(kinds.COLLECTIVE_AT, op=m.group(1))]
    return []


_LONE = re.compile(r"^(?:[a-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception): \S")
"""Python's exception line (``RuntimeError: k not in range``), the qualified name allowed."""


def lone_exception(line: Line) -> list[LogEvent]:
    """An exception line with no traceback above it (an excerpt that kept only its last
    line): the process raised it, as the traceback's own last line would say."""
    text = line.text.strip()
    return [line.event(kinds.EXCEPTION, text=text[:300])] if _LONE.match(text) else []
