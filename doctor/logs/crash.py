"""A process's crash as each runtime a training job prints through reports it: the C
library's or Open MPI's signal banner, UCX's handler, Python's faulthandler, the shell,
gdb, and a fatal check that failed (glog's ``F`` line, ``Check failed:``) unless it is
about a connection. Each becomes an ``exit`` event whose code is the negative signal number
(a failed check's says what failed instead), so a crash printed by any of them is a rank
lost, judged with the rest of the logs (a peer's closed connection next to it is the
crash's echo, not the network's fault).

    [gpu-node09:332629:0:332629] Caught signal 11 (Segmentation fault: address not mapped ...)
    Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))
    [host:01615] Signal: Segmentation fault (11)
    Fatal Python error: Segmentation fault
    *** SIGSEGV (@0x0) received by PID 21361 (TID 0x7fc457a4c700) from PID 0; stack trace: ***
    ./run.sh: line 8:  3031 Segmentation fault      (core dumped) ./train ...
    Thread 787 "python" received signal SIGBUS, Bus error.
    traceback : Signal 11 (SIGSEGV) received by PID 6421
    Signal 9 (SIGKILL)

A crash whose cause the runtime names is that cause instead: PyTorch's data loader says
when its worker's bus error comes from too little shared memory (a container's 64 MB
``/dev/shm``), the set-up problem NCCL meets as an ``ncclShmOpen`` crash. So does a bus
error whose code says the mapped page had no backing (``doctor.logs.shm``).

    ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient
        shared memory (shm).
    RuntimeError: DataLoader worker (pid 16757) is killed by signal: Bus error. It is possible
        that dataloader's workers are out of shared memory.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds, shm
from doctor.logs.launcher import OWN_ABORT, SIGNAL_WORDS, signal_code
from doctor.logs.lines import Line

_UCX = re.compile(
    r"(?:\[([\w.-]+):(\d{1,18})(?:\s*:\d{1,18}){1,2}\][^\[]{0,80}?|^\s*|UCX\s+ERROR\s+)"
    r"Caught signal (\d{1,3}) \((?=[A-Z][a-z])"
)
"""UCX's banner; the ``[host:pid:tid:thread]`` prefix is left out by some builds (and by
users pasting), or comes with UCX's time stamp and log level; the signal's description in
parentheses after the number (``Segmentation fault: ...``, never ``SIGTERM``) always."""
_OPEN_MPI = re.compile(r"\[([\w.-]+):(\d{1,18})\] Signal: [\w ]+ \((\d{1,3})\)")
_FAULTHANDLER = re.compile(
    r"Fatal Python error: (Segmentation fault|Aborted|Bus error|Floating point exception)"
)
_CORE_WORDS = "Segmentation fault|Aborted|Bus error|Illegal instruction|Floating point exception"
"""What the shell prints for the signals that dump a core (``strsignal``)."""
_SHELL = re.compile(
    rf"(?:^|\s)(\d{{1,18}}) ({_CORE_WORDS})\s+\(core dumped\)|"
    rf"^\s*({_CORE_WORDS}) \(core dumped\)|"
    r"^\s*(?:.{0,200}line \d{1,9}:\s+(\d{1,18}) )?(Killed)(?:\s{2,}\S.{0,300})?$"
)
"""The shell's report of a child a signal ended: ``./run.sh: line 8:  3031 Segmentation fault
(core dumped) ./train``; SIGKILL, which dumps no core, as ``Killed`` alone (bash, in front of
a command the OOM killer ended) or ``./run.sh: line 8:  3031 Killed   python train.py``."""
_GDB = re.compile(r"received signal (SIG[A-Z]{2,8})")
_RECEIVED_BY = re.compile(
    r"[Ss]ignal (\d{1,3}) \((SIG[A-Z]{2,8})\)(?: received by PID (?:(\d{1,18})|\S{1,40})|\s*$)"
)
"""torchelastic's field (``traceback : Signal 9 (SIGKILL) received by PID 6421``), with the
PID a user redacted (``xxx``) or the field cut after the signal's name."""
_GLOG = re.compile(
    r"\*\*\* (SIG[A-Z]{2,8}) \(@(?:0x)?[0-9a-fA-F]{1,16}\) received by PID (\d{1,18})"
)
"""glog's failure signal handler (PaddlePaddle, TensorFlow, MXNet, Caffe):
``*** SIGSEGV (@0x0) received by PID 21361 (TID 0x7fc4...) from PID 0; stack trace: ***``."""
_IN_PROCESS = (_UCX, _OPEN_MPI, _FAULTHANDLER, _SHELL, _GDB, _GLOG)
"""The banners a crashing process prints itself (or its shell or debugger prints for it),
unlike torchelastic's report of a child's signal (``_RECEIVED_BY``)."""


def self_reported(text: str) -> bool:
    """Whether ``text`` is a banner the crashing process (or its shell or debugger) printed,
    not a launcher's report of a child's signal."""
    return any(pattern.search(text) for pattern in _IN_PROCESS)


_LOADER_WORKER = re.compile(
    r"DataLoader worker \(pids?(?:\(s\))? [\d, ]{1,200}\) (?:is killed by signal: "
    rf"({_CORE_WORDS}|Killed|Terminated)|exited unexpectedly)|"
    r"Unexpected (segmentation fault|bus error|floating point exception) encountered in worker"
)
"""PyTorch's data loader, whose worker process a signal ended (the OOM killer's ``Killed``
most often): the rank raises it and ends too."""
_KERNEL_TRAP = re.compile(
    r"\b[\w.:/-]{1,40}\[(\d{1,18})\]:? (?:segfault at [0-9a-fA-F]{1,16} ip|"
    r"(general protection fault|trap invalid opcode|trap divide error) ip:)"
)
"""The kernel's own line for a process it sent a fatal signal (``dmesg``): ``python[4242]:
segfault at 0 ip ... error 4 in libc.so.6``, ``traps: python[4242] general protection fault
ip:...``."""
_TRAP_SIGNALS = {
    "general protection fault": -11,
    "trap invalid opcode": -4,
    "trap divide error": -8,
}
_SHM_TOO_SMALL = re.compile(r"insufficient shared memory|out of shared memory")
_FAILED_CHECK = re.compile(
    r"(?:^|[\s:>\]])F\d{4} \d\d:\d\d:\d\d\.\d{1,6}\s{1,4}\d{1,10} [\w.-]{1,80}:\d{1,6}\]"
    r"\s?(.{0,300})|"
    r"\bCheck failed: (.{0,300})"
)
"""glog's FATAL line (``F0911 14:31:16.057638 5678 file.cc:54] ...``) or a failed ``CHECK``
(glog, TVM, XLA, PaddlePaddle print ``Check failed: ...``): the process aborts itself on
what the message says."""
_CONNECTION_WORDS = re.compile(r"(?i)onnect|socket|broken pipe|reset|timed out|timeout|peer")
"""A failed check about a connection is the link's or a peer's story, read as such
elsewhere (``doctor.logs.nccl``): not the process's own fault."""


def _failed_check(text: str) -> str | None:
    """What a fatal check that failed says, "" for one about a connection, None for none."""
    if "heck failed" not in text and ("] " not in text or ("F0" not in text and "F1" not in text)):
        return None  # glog's FATAL line starts F0 or F1 (the month), before a "] "
    m = _FAILED_CHECK.search(text)
    if m is None:
        return None
    said = (m.group(1) or m.group(2) or "").strip()
    return "" if _CONNECTION_WORDS.search(said) else said


def events(line: Line) -> list[LogEvent]:
    text = line.text
    if _SHM_TOO_SMALL.search(text):
        return [line.event(kinds.BOOTSTRAP, text=shm.SHM_SHORT)]
    if (found := _failed_check(text)) is not None:
        return [line.event(kinds.EXIT, text=f"{OWN_ABORT}: {found}"[:400])] if found else []
    if "received by PID" in text and (m := _GLOG.search(text)):
        return [line.event(kinds.EXIT, pid=int(m.group(2)), code=signal_code(m.group(1)))]
    if ("segfault at" in text or "traps:" in text) and (m := _KERNEL_TRAP.search(text)):
        return [line.event(kinds.EXIT, pid=int(m.group(1)), code=_TRAP_SIGNALS.get(m[2], -11))]
    if "worker" in text and (m := _LOADER_WORKER.search(text)):
        said = m.group(1) or (m.group(2) or "").capitalize()
        return [line.event(kinds.EXIT, code=SIGNAL_WORDS.get(said))]
    if (
        "ignal" not in text
        and "(core dumped)" not in text
        and "Fatal Python" not in text
        and "Killed" not in text
    ):
        return []
    if shm.no_backing(text):  # read by doctor.logs.shm: the shared memory, not the rank
        return []
    if m := _UCX.search(text):
        where = {"host": m.group(1), "pid": int(m.group(2))} if m.group(1) else {}
        return [line.event(kinds.EXIT, code=-int(m.group(3)), **where)]
    if m := _OPEN_MPI.search(text):
        return [line.event(kinds.EXIT, host=m.group(1), pid=int(m.group(2)), code=-int(m.group(3)))]
    if m := _RECEIVED_BY.search(text):
        pid = int(m.group(3)) if m.group(3) else None
        return [line.event(kinds.EXIT, pid=pid, code=-int(m.group(1)))]
    if m := _FAULTHANDLER.search(text):
        return [line.event(kinds.EXIT, code=SIGNAL_WORDS[m.group(1)])]
    if m := _SHELL.search(text):
        word = m.group(2) or m.group(3) or m.group(5)
        pid = next((int(g) for g in (m.group(1), m.group(4)) if g), None)
        return [line.event(kinds.EXIT, pid=pid, code=SIGNAL_WORDS[word])]
    if m := _GDB.search(text):
        return [line.event(kinds.EXIT, code=signal_code(m.group(1)))]
    return []
