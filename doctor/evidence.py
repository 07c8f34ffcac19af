"""Evidence about a (possibly hung) job, as plain frozen data: what was read, never a judgement.

Sources (py-spy, psutil, NVML, NCCL logs, Flight Recorder, the in-rank agent)
produce these values; ``doctor.verdict.classify`` aligns and judges them, the
same call for live triage and for ``analyze``. ``Evidence`` serialises as it is
(``to_json`` / ``from_json``, through ``doctor.codec``), so a bundle carries the
raw evidence and ``nccl-doctor analyze`` re-judges it elsewhere to the same verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.codec import DecodeError, decode, encode
from doctor.flight.dump import RankDump
from doctor.model import Frame, Skipped
from doctor.ranks import MAX_WORLD_SIZE

__all__ = [
    "SCHEMA",
    "SCHEMA_V1",
    "Evidence",
    "Frame",
    "GpuSample",
    "LogEvent",
    "ProgressSample",
    "RankProcess",
    "RankStack",
    "ThreadStack",
]

SCHEMA = "nccl-doctor/evidence/v2"
"""v2: reduced Flight Recorder dumps inside (``dumps``); v1 kept them as raw files beside."""
SCHEMA_V1 = "nccl-doctor/evidence/v1"


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
        """The main thread (py-spy marks it), else the first: where the rank's own code runs."""
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
    io_calls_by_thread: tuple[tuple[int, int], ...] = ()
    """``(thread id, read/write calls)`` in the window, for threads that made any: calls
    of a Python thread other than the main one (a metrics uploader) prove nothing about
    the training loop."""
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
    """A line (or block) of a job's logs that means something; ``doctor.logs`` reads them.

    Only ``rank``, ``kind`` and ``text`` are always set; the rest is what the text states.
    """

    rank: int | None
    kind: str
    """What the text says happened; the vocabulary is ``doctor.logs.kinds``."""
    text: str
    seq: int | None = None
    """The collective's sequence number (``SeqNum=``, ``work:``, RAS's operation count)."""
    op: str | None = None
    process_group: str | None = None
    host: str = ""
    """The host the line came from (NCCL's ``host:pid:tid`` prefix, a launcher's report)."""
    pid: int | None = None
    peer: str = ""
    """The other end a transport error names (``10.0.0.2<4432>``), or the interface or
    address a bootstrap failure names."""
    completed: int | None = None
    """The last sequence number the rank completed (``last completed NCCL work: M``)."""
    code: int | None = None
    """The number the line reports: an Xid, an exit status (negative: the signal)."""
    device: str = ""
    """The GPU the line names: a PCI bus id (``0000:3b:00``) or a CUDA device index."""
    nranks: int | None = None
    """Ranks of the communicator or job the line speaks of."""
    numel: int | None = None
    """Elements of the collective's input (``NumelIn=``), where a watchdog line says."""
    origin: str = ""
    """``file:line`` the event was read from (empty for live sources)."""
    hint_class: str = ""
    """For a catalogued message: the hang class of the source place that prints it."""
    hint_at: str = ""
    """For a catalogued message: that place (``nccl src/bootstrap.cc:126``)."""


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


UNREACHED = "unreached"
"""``RankProcess.status`` of a rank on a host that did not answer: alive as far as anyone
knows, but nothing could be read."""


@dataclass(frozen=True)
class HostReach:
    """Whether one host of a multi-host job answered, and which ranks it holds."""

    host: str
    reached: bool
    reason: str = ""
    """Why it was not reached (or what went wrong there); '' when all went well."""
    ranks: tuple[int, ...] = ()
    seconds: float | None = None
    """From the start of the fan-out to the host's answer; None when it never answered."""


@dataclass(frozen=True)
class Evidence:
    """Everything read about one job at one moment."""

    job: str
    ranks_expected: int | None
    """Ranks this collection should have found (the job's world size less other hosts' ranks)."""
    processes: tuple[RankProcess, ...] = ()
    stacks: tuple[RankStack, ...] = ()
    gpus: tuple[GpuSample, ...] = ()
    logs: tuple[LogEvent, ...] = ()
    progress: tuple[ProgressSample, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    """Probes that could not run, each with its reason."""
    dumps: tuple[RankDump, ...] = ()
    """Flight Recorder dumps, one per rank, reduced to what cross-rank alignment needs."""
    unreadable_dumps: tuple[Skipped, ...] = ()
    """Flight Recorder dump files found but not read (truncated, hostile, unsupported)."""
    world_size: int | None = None
    """``WORLD_SIZE`` the ranks report: the whole job, ranks on other hosts included."""
    seconds: float = 0.0
    """How long the collection took."""
    launcher: str = ""
    """``pid: command line`` of the process that started the ranks (torchrun, srun), if found."""
    fr_files: tuple[str, ...] = ()
    """Flight Recorder dumps triage read (a bundle copies them for people and other tools)."""
    log_files: tuple[str, ...] = ()
    """NCCL and launcher logs triage read (a bundle copies their tails)."""
    log_words: tuple[str, ...] = ()
    """The distinct words of the logs' telling lines (``doctor.logs.words``): what the word
    model reads when no rule understood a line of logs that are all there is."""
    hosts: tuple[HostReach, ...] = ()
    """Multi-host triage: every host of the job, reached or not (empty for one host)."""
    ended: str = ""
    """Multi-host triage: why the round stopped waiting (``doctor.remote.ending.Ending``:
    every host answered, every silent one proven unreachable, the deadline); '' for one host."""

    @property
    def has_flight(self) -> bool:
        """Whether any Flight Recorder dump was found, readable or not."""
        return bool(self.dumps or self.unreadable_dumps)

    def to_json(self) -> dict[str, Any]:
        """The evidence as a JSON object, with its schema."""
        doc: dict[str, Any] = encode(self)
        return {"schema": SCHEMA, **doc}

    @classmethod
    def from_json(cls, data: Any) -> Evidence:
        """Evidence from ``to_json``'s output (v2, or v1 without dumps); ``DecodeError``."""
        if not isinstance(data, dict):
            raise DecodeError("evidence is not a JSON object")
        schema = data.get("schema")
        if schema not in (SCHEMA, SCHEMA_V1):
            raise DecodeError(f"unknown evidence schema {schema!r} (this reads {SCHEMA})")
        evidence = decode(cls, data)
        for name in ("ranks_expected", "world_size"):
            value = getattr(evidence, name)
            if value is not None and not 0 <= value <= MAX_WORLD_SIZE:
                raise DecodeError(f"{name} must be from 0 to {MAX_WORLD_SIZE}, not {value}")
        return evidence
