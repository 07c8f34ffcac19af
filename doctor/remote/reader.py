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

from doctor.codec import DecodeError, decode
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
from doctor.remote.document import (
    MAX_CLASSES,
    MAX_RANKS,
    MAX_TEXT,
    SCHEMA,
    DocumentError,
    HostDocument,
    StackClass,
)


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


def _records(cls: type[Any], rows: Any, host: str | None = None) -> tuple[Any, ...]:
    """Each row decoded against ``cls``'s type hints (``doctor.codec``): a field of the wrong
    type is a ``DocumentError``, never a record that breaks the classifier later."""
    out = []
    for row in _list(rows):
        if not isinstance(row, dict):
            raise DocumentError(f"a {cls.__name__} record is not an object")
        try:
            out.append(decode(cls, row if host is None else {**row, "host": host}))
        except DecodeError as exc:
            raise DocumentError(f"a {cls.__name__} record is malformed ({exc})") from None
    return tuple(out)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DocumentError(f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value) or abs(value) > 1e12:
        raise DocumentError("a number is out of range")
    return float(value)


def _seq(value: Any) -> int | None:
    return None if value is None else _int(value)


def from_document(doc: Mapping[str, Any], interner: Interner | None = None) -> HostDocument:
    """Check and read a host document; ``DocumentError`` names what is wrong."""
    if not isinstance(doc, Mapping):
        raise DocumentError("not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise DocumentError(f"schema {doc.get('schema')!r} is not {SCHEMA}")
    intern = interner or Interner()
    host = _str(doc.get("host", ""))
    frames = [intern.frame(row) for row in _list(doc.get("frames", []))]
    classes = []
    for c in _list(doc.get("classes", []))[:MAX_CLASSES]:
        if not isinstance(c, dict):
            raise DocumentError("a stack class is not an object")
        ranks = _ranks(c.get("ranks"))
        if not ranks:
            raise DocumentError("a stack class has no rank")
        threads = intern.stack_threads(c.get("threads"), frames)
        classes.append(StackClass(ranks, RankStack(ranks[0], threads, _str(c.get("source", "")))))
    sigs = [_str(s) for s in _list(doc.get("signatures", []))]
    progress = []
    for row in _list(doc.get("progress", [])):
        if not (isinstance(row, list) and len(row) == 6):
            raise DocumentError("a progress sample is not [rank, t, enq, comp, sig, state]")
        rank, t, enq, comp, sig, state = row
        if not (isinstance(sig, int) and 0 <= sig < len(sigs)):
            raise DocumentError("a progress sample points outside the signature table")
        progress.append(
            ProgressSample(
                _int(rank),
                _number(t),
                _seq(enq),
                _seq(comp),
                stack_signature=sigs[sig],
                state=_str(state),
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
        seconds=_number(doc.get("seconds", 0.0)),
        processes=_records(RankProcess, doc.get("processes", []), host=host),
        classes=tuple(classes),
        progress=tuple(progress),
        gpus=_records(GpuSample, doc.get("gpus", [])),
        logs=_records(LogEvent, doc.get("logs", [])),
        skipped=_records(Skipped, doc.get("skipped", [])),
        dumps=dumps,
        unreadable_dumps=_records(Skipped, doc.get("unreadable_dumps", [])),
        launcher=_str(doc.get("launcher", "")),
        truncated=tuple(_str(t) for t in _list(doc.get("truncated", []))),
        version=_str(doc.get("version", "")),
    )


def parse_document(text: str, interner: Interner | None = None) -> HostDocument:
    """``from_document`` over the JSON text a host sent."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DocumentError(f"not JSON ({exc})"[:200]) from None
    return from_document(doc, interner)
