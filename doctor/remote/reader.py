"""Reading ``nccl-doctor/host-evidence/v1`` documents back into values, checked.

A host document comes from another machine: every field is checked against
what ``doctor.remote.document`` writes (types, indices into its tables,
bounds), and anything else is a ``DocumentError`` that names what is wrong;
that host is then reported as unreadable and the others are judged. Reading
many documents through one ``Interner`` shares frames and threads across hosts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from doctor.codec import DecodeError, builder, decode
from doctor.evidence import (
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
from doctor.ranks import MAX_WORLD_SIZE
from doctor.remote.document import (
    MAX_CLASSES,
    MAX_EVENTS,
    MAX_FRAMES,
    MAX_PROGRESS,
    MAX_RANKS,
    MAX_SKIPPED,
    MAX_TEXT,
    MAX_THREADS,
    SCHEMA,
    DocumentError,
    HostDocument,
    StackClass,
)
from doctor.remote.transport import MAX_HOST_BYTES

_CLASS_FRAMES = MAX_THREADS * MAX_FRAMES
"""The most distinct frames one stack class can bring."""
_SAMPLES = MAX_RANKS * MAX_PROGRESS
"""The most progress samples (and signatures) one host writes."""


class Interner:
    """Shares frames and threads across every document read through it, so memory grows
    with the distinct stacks of the job, not with ranks x frames."""

    def __init__(self) -> None:
        self.frames: dict[tuple[str, str, int], Frame] = {}
        self.threads: dict[tuple[Any, ...], tuple[ThreadStack, ...]] = {}
        self.texts: dict[str, str] = {}

    def text(self, value: str) -> str:
        """One string object for equal texts of all hosts (a state, a signature): JSON
        gives each sample its own copy."""
        return self.texts.setdefault(value, value)

    def frame(self, row: Any) -> Frame:
        if not (isinstance(row, list) and len(row) == 3):
            raise DocumentError("a frame is not [name, file, line]")
        name, filename, line = row
        if type(name) is str and type(filename) is str and type(line) is int:
            found = self.frames.get((name, filename, line))
            if found is not None:  # an equal frame read before: each field of it was checked
                return found
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


def _rank(value: Any) -> int:
    """A rank number, bounded as ``analyze`` bounds world sizes (``MAX_WORLD_SIZE``)."""
    rank = _int(value)
    if not 0 <= rank < MAX_WORLD_SIZE:
        raise DocumentError(f"rank {rank} is out of range (0 to {MAX_WORLD_SIZE - 1})")
    return rank


def _world(value: Any) -> int | None:
    if value is None:
        return None
    world = _int(value)
    if not 0 < world <= MAX_WORLD_SIZE:
        raise DocumentError(f"world size {world} is out of range (1 to {MAX_WORLD_SIZE})")
    return world


def _ranks(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > MAX_RANKS:
        raise DocumentError("a rank list is not a list of at most MAX_RANKS integers")
    if not value or (
        set(map(type, value)) == {int} and min(value) >= 0 and max(value) < MAX_WORLD_SIZE
    ):
        return tuple(value)  # the usual list, checked in C
    return tuple(_rank(r) for r in value)


def _list(value: Any, most: int | None = None) -> list[Any]:
    """A list of at most ``most`` items: what ``doctor.remote.document`` writes at most."""
    if not isinstance(value, list):
        raise DocumentError(f"expected a list, got {type(value).__name__}")
    if most is not None and len(value) > most:
        raise DocumentError(f"a list of {len(value)} items where a host writes at most {most}")
    return value


def _records(cls: type[Any], rows: Any, most: int, host: str | None = None) -> tuple[Any, ...]:
    """Each row decoded against ``cls``'s type hints (``doctor.codec``): a field of the wrong
    type, or a rank out of range, is a ``DocumentError``, never a record that breaks the
    classifier (or the merge) later."""
    out = []
    for row in _list(rows, most):
        if not isinstance(row, dict):
            raise DocumentError(f"a {cls.__name__} record is not an object")
        try:
            record = decode(cls, row if host is None else {**row, "host": host})
        except DecodeError as exc:
            raise DocumentError(f"a {cls.__name__} record is malformed ({exc})") from None
        if getattr(record, "rank", None) is not None:
            _rank(record.rank)
        out.append(record)
    return tuple(out)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DocumentError(f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value) or abs(value) > 1e12:
        raise DocumentError("a number is out of range")
    return float(value)


def _seq(value: Any) -> int | None:
    return None if value is None else _int(value)


_PROGRESS = builder(ProgressSample)


def _sample(row: Any, sigs: Sequence[str], intern: Interner) -> ProgressSample:
    """One ``[rank, t, enq, comp, sig, state]`` row, checked: the common row (every field
    of its usual type and in range) in one test, any other through the checks that name
    what is wrong. A host sends 5 a rank: 655,360 at 131,072 ranks."""
    if not (isinstance(row, list) and len(row) == 6):
        raise DocumentError("a progress sample is not [rank, t, enq, comp, sig, state]")
    rank, t, enq, comp, sig, state = row
    if not (isinstance(sig, int) and 0 <= sig < len(sigs)):
        raise DocumentError("a progress sample points outside the signature table")
    if not (
        type(rank) is int
        and 0 <= rank < MAX_WORLD_SIZE
        and type(t) is float
        and -1e12 <= t <= 1e12  # false for NaN and the infinities too
        and (enq is None or type(enq) is int)
        and (comp is None or type(comp) is int)
        and type(state) is str
        and len(state) <= MAX_TEXT
    ):
        rank, t, enq, comp, state = _rank(rank), _number(t), _seq(enq), _seq(comp), _str(state)
    return _PROGRESS(
        {
            "rank": rank,
            "time_s": t,
            "last_enqueued_seq": enq,
            "last_completed_seq": comp,
            "stack_signature": sigs[sig],
            "state": intern.text(state),
        },
    )


def from_document(doc: Mapping[str, Any], interner: Interner | None = None) -> HostDocument:
    """Check and read a host document; ``DocumentError`` names what is wrong."""
    if not isinstance(doc, Mapping):
        raise DocumentError("not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise DocumentError(f"schema {doc.get('schema')!r} is not {SCHEMA}")
    intern = interner or Interner()
    host = _str(doc.get("host", ""))
    frames = [
        intern.frame(row) for row in _list(doc.get("frames", []), MAX_CLASSES * _CLASS_FRAMES)
    ]
    classes = []
    for c in _list(doc.get("classes", []), MAX_CLASSES):
        if not isinstance(c, dict):
            raise DocumentError("a stack class is not an object")
        ranks = _ranks(c.get("ranks"))
        if not ranks:
            raise DocumentError("a stack class has no rank")
        threads = intern.stack_threads(c.get("threads"), frames)
        classes.append(StackClass(ranks, RankStack(ranks[0], threads, _str(c.get("source", "")))))
    sigs = [intern.text(_str(s)) for s in _list(doc.get("signatures", []), _SAMPLES)]
    progress = [_sample(row, sigs, intern) for row in _list(doc.get("progress", []), _SAMPLES)]
    try:
        dumps = tuple(decode(RankDump, d) for d in _list(doc.get("dumps", []), MAX_RANKS))
    except DecodeError as exc:
        raise DocumentError(f"a Flight Recorder dump is malformed ({exc})") from None
    for dump in dumps:
        _rank(dump.rank)
    return HostDocument(
        host=host,
        job=_str(doc.get("job", "")),
        world_size=_world(doc.get("world_size")),
        local_ranks=_ranks(doc.get("local_ranks", [])),
        seconds=_number(doc.get("seconds", 0.0)),
        processes=_records(RankProcess, doc.get("processes", []), MAX_RANKS, host=host),
        classes=tuple(classes),
        progress=tuple(progress),
        gpus=_records(GpuSample, doc.get("gpus", []), MAX_RANKS),
        logs=_records(LogEvent, doc.get("logs", []), MAX_EVENTS),
        skipped=_records(Skipped, doc.get("skipped", []), MAX_SKIPPED),
        dumps=dumps,
        unreadable_dumps=_records(Skipped, doc.get("unreadable_dumps", []), MAX_SKIPPED),
        launcher=_str(doc.get("launcher", "")),
        truncated=tuple(_str(t) for t in _list(doc.get("truncated", []), MAX_EVENTS)),
        version=_str(doc.get("version", "")),
    )


def parse_document(text: str, interner: Interner | None = None) -> HostDocument:
    """``from_document`` over the JSON text a host sent (at most ``MAX_HOST_BYTES``)."""
    if len(text) > MAX_HOST_BYTES:
        raise DocumentError(f"{len(text)} characters, more than a host sends ({MAX_HOST_BYTES})")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DocumentError(f"not JSON ({exc})"[:200]) from None
    return from_document(doc, interner)
