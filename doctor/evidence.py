"""Evidence about a (possibly hung) job, as plain frozen data.

Sources (py-spy, psutil, NVML, NCCL logs, Flight Recorder, the in-rank agent)
produce these values; ``doctor.verdict`` classifies them; a triage bundle
stores them as JSON (``Evidence.to_json`` / ``Evidence.from_json``) beside the
raw files, so ``nccl-doctor analyze`` reaches the same verdict elsewhere.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from doctor.model import Skipped

if TYPE_CHECKING:
    from doctor.flight.align import FlightAnalysis


@dataclass(frozen=True)
class Frame:
    """One Python (or native) frame."""

    name: str
    filename: str
    line: int
    native: bool = False
    """A frame of compiled code (py-spy ``--native``: C, C++, Cython), not of Python."""

    def __str__(self) -> str:
        return f"{self.name} ({self.filename}:{self.line})"


@dataclass(frozen=True)
class ThreadStack:
    """One thread's stack, innermost frame first (py-spy's order)."""

    thread_id: int
    name: str
    frames: tuple[Frame, ...]
    holds_gil: bool = False
    active: bool = True
    is_main: bool = False


@dataclass(frozen=True)
class RankStack:
    """Every thread of one rank at one moment."""

    rank: int
    threads: tuple[ThreadStack, ...]
    source: str
    """``py-spy`` or ``agent`` (faulthandler fallback) or ``file``."""
    native_from: int | None = None
    """The rank whose native frames the main thread shows: py-spy ``--native`` is slow, so
    ranks whose Python stacks are identical and idle share one native dump."""

    @property
    def main(self) -> ThreadStack | None:
        first = self.threads[0] if self.threads else None
        return next((t for t in self.threads if t.is_main), first)


@dataclass(frozen=True)
class RankProcess:
    """Liveness and resource state of one rank's process."""

    rank: int
    pid: int | None
    host: str
    alive: bool
    local_rank: int | None = None
    world_size: int | None = None
    status: str = ""
    """psutil status: running, sleeping, disk-sleep, stopped, zombie, dead."""
    cpu_seconds_delta: float | None = None
    """CPU time the process used during the collection window."""
    num_threads: int | None = None
    rss_bytes: int | None = None
    exit_code: int | None = None
    io_calls_delta: int | None = None
    """Read and write system calls during the collection window (``/proc/PID/io``):
    a gloo/socket rank that makes progress makes them, a hung one does not."""
    error: str = ""
    """What the launcher's error file says about a rank that exited."""
    wchan: str = ""
    """The kernel function the main thread sleeps in (``/proc/PID/wchan``: ``fifo_open``...)."""
    syscall: str = ""
    """The system call the main thread is blocked in, with its path or file descriptor
    (``/proc/PID/syscall``), e.g. ``openat("/data/train_2.bin", a FIFO)``."""


@dataclass(frozen=True)
class GpuSample:
    """NVML state of the GPU a rank uses."""

    rank: int | None
    index: int
    uuid: str = ""
    utilization_pct: float | None = None
    power_w: float | None = None
    memory_used_bytes: int | None = None
    sm_clock_mhz: int | None = None
    throttle_reasons: tuple[str, ...] = ()
    xid_events: tuple[int, ...] = ()
    ecc_uncorrected: int | None = None


@dataclass(frozen=True)
class LogEvent:
    """A line from an NCCL debug log or a launcher log that means something."""

    rank: int | None
    kind: str
    """``bootstrap``, ``network``, ``unsupported_op`` or ``watchdog_timeout``."""
    text: str
    seq: int | None = None
    op: str | None = None
    process_group: str | None = None


@dataclass(frozen=True)
class ProgressSample:
    """Where one rank was at one time; several over ``--interval`` reveal stragglers."""

    rank: int
    time_s: float
    last_enqueued_seq: int | None = None
    last_completed_seq: int | None = None
    stack_signature: str = ""
    state: str = ""
    """The rank's state at that moment (``doctor.verdict.stacks.RankState``), '' if unknown."""


@dataclass(frozen=True)
class Evidence:
    """Everything known about one job at one moment."""

    job: str
    ranks_expected: int | None
    processes: tuple[RankProcess, ...] = ()
    stacks: tuple[RankStack, ...] = ()
    gpus: tuple[GpuSample, ...] = ()
    logs: tuple[LogEvent, ...] = ()
    progress: tuple[ProgressSample, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    flight: FlightAnalysis | None = None
    """Cross-rank Flight Recorder alignment; rebuilt from raw dumps, never serialised."""
    seconds: float = 0.0
    """How long the collection took."""
    launcher: str = ""
    """``pid: command line`` of the process that started the ranks (torchrun, srun), if found."""
    fr_files: tuple[str, ...] = ()
    """Flight Recorder dumps triage read (a bundle copies them: ``flight`` is rebuilt from them)."""
    log_files: tuple[str, ...] = ()
    """NCCL and launcher logs triage read (a bundle copies their tails)."""

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: _dump(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name != "flight"
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evidence:
        return _load(cls, {k: v for k, v in data.items() if k != "flight"})


def _dump(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _dump(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_dump(v) for v in value]
    return value


def _load(tp: Any, data: Any) -> Any:
    """Rebuild a value of type ``tp`` from ``_dump``'s output, following the type hints."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        if data is None:
            return None
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp)
    if origin is tuple:
        (item, *_rest) = typing.get_args(tp)
        return tuple(_load(item, v) for v in data)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp, localns={"FlightAnalysis": object})
        known = {f.name for f in dataclasses.fields(tp)}
        return tp(**{k: _load(hints[k], v) for k, v in data.items() if k in known})
    return data
