"""``nccl-doctor/host-evidence/v1``: what one host knows about a job, small enough to travel.

``to_document`` turns one host's ``Evidence`` into plain JSON data;
``doctor.remote.reader`` checks a document and turns it back into values
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from doctor.codec import encode
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
