"""``nccl-doctor/host-evidence/v1``: what one host knows about a job, small enough to travel.

``to_document`` turns one host's ``Evidence`` into plain JSON data;
``from_document`` checks a document and turns it back into values
(``HostDocument``). Stacks are merged on the host before they travel: ranks
whose stacks are equal (threads, frames, flags; not thread ids) form one
*class*, sent once with its rank set, and every frame is sent once, in a
``frames`` table the classes point into. Eight ranks in one collective cost
about what one rank costs.

Bounds (each hit is named in ``truncated``, so the reader knows what it
misses): ``MAX_THREADS`` per stack (the main thread and GIL holders first),
``MAX_FRAMES`` per thread (innermost and outermost kept), ``MAX_CLASSES`` per
host, ``MAX_TEXT`` characters per string, ``MAX_EVENTS`` log events and
``MAX_SKIPPED`` skipped probes, and ``MAX_DOC_BYTES`` for the whole document,
kept by dropping the non-main threads, then the rarest classes, then the Flight
Recorder dumps (``dumps``: the reduced dumps of ``doctor.flight.dump``, through
``doctor.codec``, so the login node aligns every rank's dump across hosts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from doctor.codec import DecodeError, decode, encode
from doctor.evidence import (
    Evidence,
    Frame,
    GpuSample,
    LogEvent,
    ProgressSample,
    RankProcess,
    RankStack,
    ThreadStack,
)
from doctor.flight.dump import RankDump
from doctor.model import Skipped

SCHEMA = "nccl-doctor/host-evidence/v1"
MAX_THREADS = 16
MAX_FRAMES = 64
INNER_FRAMES = 48
"""Of ``MAX_FRAMES``: the innermost (what the thread does now) before the outermost (who
called it)."""
MAX_CLASSES = 32
MAX_TEXT = 300
MAX_EVENTS = 64
MAX_SKIPPED = 64
MAX_RANKS = 1024
MAX_PROGRESS = 16
"""Samples per rank (triage takes 5 a window)."""
MAX_DOC_BYTES = 512 * 1024
ELIDED = "<frames elided>"


class DocumentError(ValueError):
    """A host sent something that is not a usable host document; the message says why."""


@dataclass(frozen=True)
class StackClass:
    """Ranks of one host (or, merged, of many) whose stacks are the same."""

    ranks: tuple[int, ...]
    stack: RankStack
    """The representative: the stack of the class's lowest rank."""


@dataclass(frozen=True)
class HostDocument:
    """One host's evidence about a job, as read back from a document."""

    host: str
    job: str
    world_size: int | None
    local_ranks: tuple[int, ...]
    """The ranks this host holds (alive or lost), when it can tell."""
    seconds: float
    processes: tuple[RankProcess, ...]
    classes: tuple[StackClass, ...]
    progress: tuple[ProgressSample, ...]
    gpus: tuple[GpuSample, ...]
    logs: tuple[LogEvent, ...]
    skipped: tuple[Skipped, ...]
    dumps: tuple[RankDump, ...] = ()
    unreadable_dumps: tuple[Skipped, ...] = ()
    launcher: str = ""
    truncated: tuple[str, ...] = ()
    version: str = ""


# ---- writing -------------------------------------------------------------------------


def _text(value: str) -> str:
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"


def _trim_threads(threads: Sequence[ThreadStack], notes: set[str]) -> tuple[ThreadStack, ...]:
    if len(threads) > MAX_THREADS:
        notes.add(f"threads: at most {MAX_THREADS} per rank (main and GIL holders first)")
        ranked = sorted(threads, key=lambda t: (not t.is_main, not t.holds_gil, not t.active))
        keep = {id(t) for t in ranked[:MAX_THREADS]}
        threads = [t for t in threads if id(t) in keep]
    out = []
    for t in threads:
        frames = t.frames
        if len(frames) > MAX_FRAMES:
            notes.add(f"frames: at most {MAX_FRAMES} per thread (innermost and outermost)")
            outer = MAX_FRAMES - INNER_FRAMES - 1
            frames = frames[:INNER_FRAMES] + (Frame(ELIDED, "", 0),) + frames[-outer:]
        out.append(ThreadStack(t.thread_id, t.name, frames, t.holds_gil, t.active, t.is_main))
    return tuple(out)


def _shape(stack: RankStack) -> tuple[Any, ...]:
    """What makes two ranks' stacks one class: everything but the rank and thread ids."""
    return (
        stack.source,
        tuple((t.name, t.frames, t.holds_gil, t.active, t.is_main) for t in stack.threads),
    )


def stack_classes(stacks: Iterable[RankStack]) -> list[StackClass]:
    """Equal stacks as one class each (largest first, then lowest rank)."""
    by_shape: dict[tuple[Any, ...], list[RankStack]] = {}
    for stack in stacks:
        by_shape.setdefault(_shape(stack), []).append(stack)
    classes = [
        StackClass(tuple(sorted(s.rank for s in members)), min(members, key=lambda s: s.rank))
        for members in by_shape.values()
    ]
    return sorted(classes, key=lambda c: (-len(c.ranks), c.ranks))


class _FrameTable:
    def __init__(self) -> None:
        self.index: dict[Frame, int] = {}

    def ref(self, frame: Frame) -> int:
        found = self.index.get(frame)
        if found is None:
            found = self.index[frame] = len(self.index)
        return found

    def rows(self) -> list[list[Any]]:
        return [[_text(f.name), _text(f.filename), f.line] for f in self.index]


def _flags(t: ThreadStack) -> int:
    return int(t.holds_gil) | int(t.active) << 1 | int(t.is_main) << 2


def _plain(obj: Any, drop: Sequence[str] = ()) -> dict[str, Any]:
    """A dataclass as a dict without its defaults (compact), strings bounded."""
    out = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.name in drop or value == f.default:
            continue
        out[f.name] = (
            _text(value)
            if isinstance(value, str)
            else list(value)
            if isinstance(value, tuple)
            else value
        )
    return out


def to_document(
    evidence: Evidence,
    host: str,
    world_size: int | None,
    local_ranks: Iterable[int],
    version: str = "",
) -> dict[str, Any]:
    """One host's evidence as a ``nccl-doctor/host-evidence/v1`` document (plain data)."""
    notes: set[str] = set()
    trimmed = [
        RankStack(s.rank, _trim_threads(s.threads, notes), s.source) for s in evidence.stacks
    ]
    classes = stack_classes(trimmed)
    if len(classes) > MAX_CLASSES:
        notes.add(f"classes: at most {MAX_CLASSES} stack classes per host (rarest dropped)")
        classes = classes[:MAX_CLASSES]
    processes = evidence.processes[:MAX_RANKS]
    if len(evidence.processes) > MAX_RANKS:
        notes.add(f"ranks: at most {MAX_RANKS} per host")
    doc = _encode(evidence, host, world_size, local_ranks, version, processes, classes, notes)
    size = len(json.dumps(doc, separators=(",", ":")))
    if size > MAX_DOC_BYTES:
        notes.add(f"size: at most {MAX_DOC_BYTES} bytes (other threads, then classes dropped)")
        mains = [
            StackClass(c.ranks, RankStack(c.stack.rank, _main_only(c.stack), c.stack.source))
            for c in classes
        ]
        keep = True
        while True:
            doc = _encode(
                evidence, host, world_size, local_ranks, version, processes, mains, notes, keep
            )
            if len(json.dumps(doc, separators=(",", ":"))) <= MAX_DOC_BYTES:
                break
            if len(mains) > 1:
                mains = mains[: len(mains) // 2]
            elif keep:
                keep = False
                notes.add("dumps: Flight Recorder dumps dropped to stay within the size bound")
            else:
                break
    return doc


def _main_only(stack: RankStack) -> tuple[ThreadStack, ...]:
    return (stack.main,) if stack.main is not None else ()


def _encode(
    evidence: Evidence,
    host: str,
    world_size: int | None,
    local_ranks: Iterable[int],
    version: str,
    processes: Sequence[RankProcess],
    classes: Sequence[StackClass],
    notes: set[str],
    keep_dumps: bool = True,
) -> dict[str, Any]:
    table = _FrameTable()
    encoded = [
        {
            "ranks": list(c.ranks),
            "source": c.stack.source,
            "threads": [
                [t.thread_id, _text(t.name), _flags(t), [table.ref(f) for f in t.frames]]
                for t in c.stack.threads
            ],
        }
        for c in classes
    ]
    signatures: dict[str, int] = {}
    per_rank: dict[int, int] = {}
    progress = []
    for s in evidence.progress:
        per_rank[s.rank] = per_rank.get(s.rank, 0) + 1
        if per_rank[s.rank] > MAX_PROGRESS:
            continue
        sig = signatures.setdefault(_text(s.stack_signature), len(signatures))
        progress.append([s.rank, s.time_s, s.last_enqueued_seq, s.last_completed_seq, sig, s.state])
    return {
        "schema": SCHEMA,
        "host": host,
        "job": evidence.job,
        "version": version,
        "world_size": world_size,
        "local_ranks": sorted(set(local_ranks)),
        "seconds": round(evidence.seconds, 3),
        "launcher": _text(evidence.launcher),
        "processes": [_plain(p, drop=("host",)) for p in processes],
        "frames": table.rows(),
        "classes": encoded,
        "signatures": list(signatures),
        "progress": progress,
        "gpus": [_plain(g) for g in evidence.gpus[:MAX_RANKS]],
        "logs": [_plain(e) for e in evidence.logs[:MAX_EVENTS]],
        "skipped": [_plain(s) for s in evidence.skipped[:MAX_SKIPPED]],
        "dumps": [encode(d) for d in evidence.dumps[:MAX_RANKS]] if keep_dumps else [],
        "unreadable_dumps": [_plain(s) for s in evidence.unreadable_dumps[:MAX_SKIPPED]],
        "truncated": sorted(notes)
        + (["logs"] if len(evidence.logs) > MAX_EVENTS else [])
        + (["skipped"] if len(evidence.skipped) > MAX_SKIPPED else []),
    }


# ---- reading ---------------------------------------------------------------------------


class Interner:
    """Shares frames and threads across every document read through it, so memory grows
    with the distinct stacks of the job, not with ranks x frames."""

    def __init__(self) -> None:
        self.frames: dict[tuple[str, str, int], Frame] = {}
        self.threads: dict[tuple[Any, ...], tuple[ThreadStack, ...]] = {}

    def frame(self, row: Any) -> Frame:
        if not (isinstance(row, list) and len(row) == 3):
            raise DocumentError("a frame is not [name, file, line]")
        name, filename, line = row
        key = (_str(name), _str(filename), _int(line))
        found = self.frames.get(key)
        if found is None:
            found = self.frames[key] = Frame(*key)
        return found

    def stack_threads(self, rows: Any, frames: Sequence[Frame]) -> tuple[ThreadStack, ...]:
        if not isinstance(rows, list):
            raise DocumentError("a class's threads are not a list")
        key = []
        for row in rows:
            if not (isinstance(row, list) and len(row) == 4 and isinstance(row[3], list)):
                raise DocumentError("a thread is not [id, name, flags, frames]")
            refs = row[3]
            if any(not isinstance(i, int) or not 0 <= i < len(frames) for i in refs):
                raise DocumentError("a thread points outside the frame table")
            key.append(
                (_int(row[0]), _str(row[1]), _int(row[2]), tuple(id(frames[i]) for i in refs))
            )
        shape = tuple(k[1:] for k in key)
        found = self.threads.get(shape)
        if found is None:
            found = self.threads[shape] = tuple(
                ThreadStack(
                    tid,
                    name,
                    tuple(frames[i] for i in row[3]),
                    holds_gil=bool(flags & 1),
                    active=bool(flags & 2),
                    is_main=bool(flags & 4),
                )
                for (tid, name, flags, _), row in zip(key, rows, strict=True)
            )
        return found


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise DocumentError(f"expected a string, got {type(value).__name__}")
    return value[:MAX_TEXT]


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise DocumentError(f"expected an integer, got {type(value).__name__}")
    return value


def _ranks(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > MAX_RANKS:
        raise DocumentError("a rank list is not a list of at most MAX_RANKS integers")
    return tuple(_int(r) for r in value)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise DocumentError(f"expected a list, got {type(value).__name__}")
    return value


def _records(cls: type, rows: Any, host: str | None = None) -> tuple[Any, ...]:
    if not isinstance(rows, list):
        raise DocumentError(f"{cls.__name__} records are not a list")
    names = {f.name for f in fields(cls)}
    out = []
    for row in rows:
        if not isinstance(row, dict):
            raise DocumentError(f"a {cls.__name__} record is not an object")
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items() if k in names}
        if host is not None:
            kwargs["host"] = host
        try:
            out.append(cls(**kwargs))
        except TypeError as exc:
            raise DocumentError(f"a {cls.__name__} record is malformed ({exc})") from None
    return tuple(out)


def from_document(doc: Mapping[str, Any], interner: Interner | None = None) -> HostDocument:
    """Check and read a host document; ``DocumentError`` names what is wrong."""
    if not isinstance(doc, Mapping):
        raise DocumentError("not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise DocumentError(f"schema {doc.get('schema')!r} is not {SCHEMA}")
    intern = interner or Interner()
    host = _str(doc.get("host", ""))
    raw_frames = doc.get("frames", [])
    if not isinstance(raw_frames, list):
        raise DocumentError("frames is not a list")
    frames = [intern.frame(row) for row in raw_frames]
    classes = []
    for c in doc.get("classes", [])[:MAX_CLASSES]:
        if not isinstance(c, dict):
            raise DocumentError("a stack class is not an object")
        ranks = _ranks(c.get("ranks"))
        if not ranks:
            raise DocumentError("a stack class has no rank")
        threads = intern.stack_threads(c.get("threads"), frames)
        classes.append(StackClass(ranks, RankStack(ranks[0], threads, _str(c.get("source", "")))))
    sigs = [_str(s) for s in doc.get("signatures", [])]
    progress = []
    for row in doc.get("progress", []):
        if not (isinstance(row, list) and len(row) == 6):
            raise DocumentError("a progress sample is not [rank, t, enq, comp, sig, state]")
        rank, t, enq, comp, sig, state = row
        if not (isinstance(sig, int) and 0 <= sig < len(sigs)):
            raise DocumentError("a progress sample points outside the signature table")
        progress.append(
            ProgressSample(
                _int(rank), float(t), enq, comp, stack_signature=sigs[sig], state=_str(state)
            )
        )
    world = doc.get("world_size")
    try:
        dumps = tuple(decode(RankDump, d) for d in _list(doc.get("dumps", []))[:MAX_RANKS])
    except DecodeError as exc:
        raise DocumentError(f"a Flight Recorder dump is malformed ({exc})") from None
    return HostDocument(
        host=host,
        job=_str(doc.get("job", "")),
        world_size=_int(world) if world is not None else None,
        local_ranks=_ranks(doc.get("local_ranks", [])),
        seconds=float(doc.get("seconds", 0.0)),
        processes=_records(RankProcess, doc.get("processes", []), host=host),
        classes=tuple(classes),
        progress=tuple(progress),
        gpus=_records(GpuSample, doc.get("gpus", [])),
        logs=_records(LogEvent, doc.get("logs", [])),
        skipped=_records(Skipped, doc.get("skipped", [])),
        dumps=dumps,
        unreadable_dumps=_records(Skipped, doc.get("unreadable_dumps", [])),
        launcher=_str(doc.get("launcher", "")),
        truncated=tuple(_str(t) for t in doc.get("truncated", [])),
        version=_str(doc.get("version", "")),
    )


def parse_document(text: str, interner: Interner | None = None) -> HostDocument:
    """``from_document`` over the JSON text a host sent."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DocumentError(f"not JSON ({exc})"[:200]) from None
    return from_document(doc, interner)
