"""One rank's Flight Recorder dump, reduced to what cross-rank alignment needs.

A dump can hold thousands of entries; alignment only needs, per process group,
how far the rank got (last collective enqueued and completed), the entries it
has not completed plus a short tail for context, and recent timestamps for the
straggler test. ``reduce_dump`` keeps exactly that and drops the rest, so memory
grows with ranks x groups, not with ranks x entries.

Formats: the pickle of ``_dump_fr_trace`` and the JSON of
``_dump_fr_trace_json``, versions 2.2 up to the current 2.x, NCCL and gloo.
"""

from __future__ import annotations

import functools
import itertools
import json
import pickle
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from doctor.flight import safe_pickle
from doctor.flight.recent import Bytes, Load, RecentEntries, Unexpected
from doctor.model import Frame
from doctor.ranks import MAX_WORLD_SIZE

if TYPE_CHECKING:
    IntArray = array[int]
else:  # array is not subscriptable at run time before 3.12; doctor.codec reads this hint
    IntArray = array

OLDEST_VERSION = (2, 2)
TAIL = 8
"""Completed entries kept per group for context (pending ones are all kept)."""
TIMES = 64
"""Most (seq, time) pairs kept per group for the straggler test."""
WINDOW = 128
"""A group's (seq, time) pairs are those of its collectives among the dump's newest
``WINDOW`` entries (up to ``TIMES``): a sparse group (a Megatron job's world group has one
collective in eight entries) would need 512 entries decoded to fill ``TIMES``."""
MIN_TIMES = 12
"""Fewest pairs a group keeps when it has them: one sparser than this in the window takes
its older collectives' pairs too (the straggler test needs ``STRAGGLER_MIN_SAMPLES``)."""
FRAMES = 12


class DumpError(ValueError):
    """The bytes are not a usable Flight Recorder dump; the message says why."""


@dataclass(frozen=True, slots=True)
class Op:
    """One recorded collective or point-to-point operation."""

    seq: int
    name: str
    """Operation without the backend prefix: ``all_reduce``, ``send 0->3``."""
    in_sizes: tuple[tuple[int, ...], ...]
    out_sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    state: str
    record_id: int
    time_ns: int | None
    frames: tuple[Frame, ...] = ()
    p2p: bool = False


@dataclass(frozen=True, slots=True)
class GroupTrack:
    """How far one rank got in one process group."""

    name: str
    desc: str
    pg_id: str | None
    enqueued: int | None
    """Last collective sequence number the rank scheduled."""
    completed: int | None
    """Last one it saw complete; None where the dump cannot say (gloo)."""
    ops: tuple[Op, ...]
    """Collectives not known complete, plus the last ``TAIL`` completed ones."""
    p2p: tuple[Op, ...]
    times: IntArray = field(default_factory=lambda: array("q"))
    """Recent (seq, time_created_ns) pairs, flattened: 16 bytes a pair, not 120."""
    status_trusted: bool = False
    """Whether ``pg_status`` of this pg_id counts collectives (no p2p mixed in)."""


@dataclass(frozen=True, slots=True)
class RankDump:
    """The reduced dump of one rank."""

    rank: int
    source: str
    version: str
    backend: str
    config: dict[str, tuple[str, tuple[int, ...] | None]]
    """pg_config: group name -> (desc, global ranks or None when malformed)."""
    groups: dict[str, GroupTrack]
    status: dict[str, tuple[int, int | None]]
    """pg_status of pg_ids no entry names: pg_id -> (enqueued, completed)."""

    def reached(self) -> tuple[int | None, int | None]:
        """How far this rank got over all its groups: the sums of its last enqueued and last
        completed sequence numbers (None where the dump cannot say, as gloo's completions).

        Two dumps of one rank that differ mean it moved: progress needs no alignment."""
        pairs = [(t.enqueued, t.completed) for t in self.groups.values()]
        pairs += list(self.status.values())
        if not pairs:
            return None, None
        enqueued = [e for e, _c in pairs]
        completed = [c for _e, c in pairs]
        return (
            None if None in enqueued else sum(e for e in enqueued if e is not None),
            None if None in completed else sum(c for c in completed if c is not None),
        )


MAX_TEXT = 4096
"""The longest text field kept from a dump (names, states, descriptions)."""
_INT_BOUND = 1 << 64
_SEQUENCE = (list, tuple)
"""For ``isinstance`` in loops: ``list | tuple`` builds a union at every call."""
_DECIMAL = re.compile(r"-?[0-9]{1,18}")


def _text(value: object) -> str:
    """A dump field as text: a string (cut to ``MAX_TEXT``; renderers escape it) or
    a plain number; anything else is not text (``str()`` of a hostile nest of shared
    lists runs for minutes)."""
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, int) and -_INT_BOUND < value < _INT_BOUND:
        return str(value)
    return ""


def _int(value: object) -> int:
    """A dump field as an integer within 64 bits; ``DumpError`` for anything else (inf,
    5,000 digits, a list), naming the value's type. Decimal text counts: torch 2.11's JSON
    dump (``_dump_nccl_trace_json``) writes ``pg_status``'s counters as strings ("6")."""
    if value.__class__ is int and -_INT_BOUND < value < _INT_BOUND:
        return value  # the common case, without building another int
    if isinstance(value, int) and -_INT_BOUND < value < _INT_BOUND:
        return int(value)
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return int(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < _INT_BOUND:
        return int(value)
    raise DumpError(f"a number field holds {type(value).__name__}, not an integer")


_CORRUPT = (
    EOFError,
    ValueError,
    TypeError,
    IndexError,
    KeyError,
    MemoryError,
    OverflowError,
    RecursionError,
    AttributeError,
)
"""What the unpickler (or a reducer reading what it built) raises on bytes that are no dump."""


def decode(data: Bytes) -> dict[str, Any]:
    """Bytes -> the dump's dict (JSON or restricted pickle); raises ``DumpError``."""
    if not data:
        raise DumpError("the file is empty")
    try:
        if data.lstrip()[:1] == b"{":
            doc = json.loads(data)
        else:
            doc = safe_pickle.loads(data)
    except safe_pickle.UnsafePickleError as exc:
        raise DumpError(f"refused a hostile pickle: {exc}") from None
    except MemoryError:
        raise DumpError(
            "refused a hostile pickle: decoding it asks for more memory than a dump of its"
            " size needs (a memo index out of range)"
        ) from None
    except (pickle.UnpicklingError, *_CORRUPT) as exc:
        raise DumpError(f"truncated or corrupt ({type(exc).__name__}: {exc})"[:200]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("entries", []), list):
        raise DumpError("not a Flight Recorder dump (no 'entries' list)")
    return doc


def _version(doc: dict[str, Any]) -> str:
    raw = _text(doc.get("version", ""))
    try:
        major, minor = (int(p) for p in raw.split(".")[:2])
    except ValueError:
        raise DumpError(f"unknown format version {raw!r}") from None
    if major != OLDEST_VERSION[0] or (major, minor) < OLDEST_VERSION:
        raise DumpError(f"format version {raw} is not supported (2.2 to 2.x)")
    return raw


def _ranks(raw: Any) -> tuple[int, ...] | None:
    if isinstance(raw, str):
        return _ranks_text(raw)
    if (
        isinstance(raw, list)
        and 0 < len(raw) <= MAX_WORLD_SIZE
        and all(type(r) is int and 0 <= r < MAX_WORLD_SIZE for r in raw)
    ):
        return tuple(raw)
    return None


def _ranks_text(raw: str) -> tuple[int, ...] | None:
    """pg_config ranks as the string '[0, 1, 2]'."""
    try:
        return _ranks(json.loads(raw))
    except (ValueError, RecursionError):
        return None


Compact = range | tuple[int, ...] | None
"""A rank list as sent between processes: an arithmetic progression (the world, a
tensor-parallel block, a data-parallel stride) as a ``range`` of three numbers."""
SHARED = 1 << 16
"""Distinct rank lists cached: a 32,768-rank job has 4,096 tensor-parallel groups."""


def _progression(ranks: tuple[int, ...] | None) -> Compact:
    if ranks is None or len(ranks) < 2 or ranks[1] <= ranks[0]:
        return ranks
    whole = range(ranks[0], ranks[-1] + 1, ranks[1] - ranks[0])
    return whole if tuple(whole) == ranks else ranks


def _compact_text(raw: str) -> Compact:
    """The same strings repeat on every rank (the world's is 190 kB at 32,768 ranks, and
    hashing it for a cache costs a quarter of a millisecond): a progression's text is
    compared with the text it would have (a copy of memory), the rest go through a cache."""
    if len(raw) >= _LONG and (edges := _EDGES.fullmatch(raw, 0, 48)):
        first, second, tail = int(edges[1]), int(edges[2]), _DIGITS.fullmatch(raw[-11:])
        last = int(tail[1]) if tail else -1
        if first < second <= last < MAX_WORLD_SIZE:
            whole = range(first, last + 1, second - first)
            if whole[-1] == last and raw == _progression_text(whole):
                return whole
    return _compact_cached(raw)


_LONG = 256
_EDGES = re.compile(r"\[([0-9]{1,9}), ([0-9]{1,9}),.*", re.DOTALL)
_DIGITS = re.compile(r".* ([0-9]{1,9})\]", re.DOTALL)


@functools.lru_cache(maxsize=64)
def _progression_text(ranks: range) -> str:
    """A rank list as torch writes it in ``pg_config``."""
    return str(list(ranks))


@functools.lru_cache(maxsize=SHARED)
def _compact_cached(raw: str) -> Compact:
    return _progression(_ranks_text(raw))


def _compact(raw: Any) -> Compact:
    return _compact_text(raw) if isinstance(raw, str) else _progression(_ranks(raw))


@functools.lru_cache(maxsize=SHARED)
def shared_ranks(ranks: Compact) -> tuple[int, ...] | None:
    """Equal rank lists of all dumps as one tuple."""
    return None if ranks is None else tuple(ranks)


RawConfig = dict[str, tuple[str, Compact]]


def raw_config(doc: dict[str, Any]) -> RawConfig:
    """pg_config as (desc, compact ranks): a few bytes to send between processes, not the
    text of every rank list."""
    raw = doc.get("pg_config")
    if not isinstance(raw, dict):
        return {}
    return {
        _text(name): (_text(cfg.get("desc", "")), _compact(cfg.get("ranks")))
        for name, cfg in raw.items()
        if name and isinstance(cfg, dict)
    }


def parse_config(raw: RawConfig) -> dict[str, tuple[str, tuple[int, ...] | None]]:
    """Parsed pg_config; equal rank lists of all dumps share one tuple."""
    return {name: (desc, shared_ranks(ranks)) for name, (desc, ranks) in raw.items()}


_ABSENT = object()


def _record_id(e: dict[str, Any]) -> int:
    return _int(e.get("record_id", 0))


def _sizes(raw: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(raw, list):
        return ()
    # integers only: a size list holding lists (a nest of shared references) compares in
    # exponential time
    return tuple(
        tuple(x for x in s if type(x) is int) if isinstance(s, _SEQUENCE) else () for s in raw
    )


@functools.lru_cache(maxsize=1 << 14)
def _frame(name: str, filename: str, line: int) -> Frame:
    """One object for each place: a training loop's stacks repeat the same few hundred."""
    return Frame(name, filename, line)


def _frames(raw: Any) -> tuple[Frame, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(
        _frame(_text(f.get("name", "")), _text(f.get("filename", "")), _int(f.get("line", 0)))
        for f in raw[:FRAMES]
        if isinstance(f, dict)
    )


def _op(e: dict[str, Any], p2p: bool, stack: bool = True) -> Op:
    prof = _text(e.get("profiling_name", ""))
    return Op(
        seq=_int(e.get("p2p_seq_id", 0) if p2p else e.get("collective_seq_id", e.get("seq_id", 0))),
        name=prof.split(":", 1)[-1],
        in_sizes=_sizes(e.get("input_sizes")),
        out_sizes=_sizes(e.get("output_sizes")),
        dtypes=tuple(map(_text, e.get("input_dtypes") or ())),
        state=_text(e.get("state", "")),
        record_id=_record_id(e),
        time_ns=e.get("time_created_ns") or None,
        frames=_frames(e.get("frames")) if stack else (),
        p2p=p2p,
    )


def _is_p2p(e: dict[str, Any]) -> bool:
    if "is_p2p" in e:
        return bool(e["is_p2p"])
    name = _text(e.get("profiling_name", ""))
    return " " in name.split(":", 1)[-1] or "send" in name or "recv" in name


def _group_of(e: dict[str, Any]) -> tuple[str, str]:
    pg = e.get("process_group")
    if isinstance(pg, _SEQUENCE) and pg:
        return _text(pg[0]), _text(pg[1]) if len(pg) > 1 else ""
    return _text(e.get("pg_id", "?")), ""


def reduce_dump(rank: int, source: str, data: bytes) -> RankDump:
    """Decode, validate and reduce one dump; raises ``DumpError`` with the reason."""
    dump, config = reduce_dump_raw(rank, source, data)
    return replace(dump, config=parse_config(config))


RECENT = WINDOW
"""Entries decoded first (``doctor.flight.recent``): the window of the time pairs, so a
group with at least ``MIN_TIMES`` collectives in it needs nothing older; sparser groups
take the older entries too."""


class _Older(Exception):
    """The newest entries did not tell everything: the reducer needs the older ones."""


def reduce_dump_raw(
    rank: int, source: str, data: Bytes, load: Load | None = None
) -> tuple[RankDump, RawConfig]:
    """``reduce_dump`` less the config parsing (done where the dumps are gathered).

    A pickle is decoded newest entries first, the older ones only when the reducer needs
    them; the whole dump at once, as before, when its layout is not torch's. With ``load``,
    ``data`` holds only what ``load`` was asked to read (``doctor.flight.recent``)."""
    with safe_pickle.memory_cap(len(data)):
        return _reduce_capped(rank, source, data, load)


def _reduce_capped(
    rank: int, source: str, data: Bytes, load: Load | None
) -> tuple[RankDump, RawConfig]:
    try:
        recent = RecentEntries(data, RECENT, load)
        doc = recent.doc
        version = _version(doc)
        try:
            return _reduce(rank, source, version, doc, partial=not recent.whole), raw_config(doc)
        except _Older:
            doc["entries"] = recent.older()
            return _reduce(rank, source, version, doc), raw_config(doc)
    except (Unexpected, pickle.UnpicklingError, *_CORRUPT):
        pass
    if load is not None:
        load(0, len(data))
    doc = decode(data)
    version = _version(doc)
    try:
        return _reduce(rank, source, version, doc), raw_config(doc)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        raise DumpError(f"malformed entries ({type(exc).__name__}: {exc})"[:200]) from None


def _reduce(
    rank: int, source: str, version: str, doc: dict[str, Any], partial: bool = False
) -> RankDump:
    """Raises ``_Older`` when ``partial`` (``doc`` holds the newest entries only) and older
    entries could change the result."""
    entries = doc["entries"]
    backend = next(
        (
            _text(e.get("profiling_name", "")).split(":", 1)[0]
            for e in entries[-1:]
            if isinstance(e, dict) and ":" in _text(e.get("profiling_name", ""))
        ),
        "",
    )
    raw_status = doc.get("pg_status")
    status_raw: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
    scans: dict[str, _Scan] = {}
    # Every group with entries has a pg_status entry (2.7+): once each of those has what
    # it needs, older entries cannot change the result and the scan stops.
    waiting: set[str | None] = {_text(k) for k in status_raw}
    newest_first = reversed(entries)
    stopped = _scan(itertools.islice(newest_first, WINDOW), scans, waiting, status_raw, backend)
    # past the window (a partial doc may end before it does) only groups short of
    # MIN_TIMES pairs take more
    if not stopped and (len(entries) >= WINDOW or not partial):
        settled = {scan.pg_id for scan in scans.values() if scan.settle()}
        stopped = bool(waiting) and waiting <= settled
        waiting -= settled
        if not stopped:
            stopped = _scan(newest_first, scans, waiting, status_raw, backend, window=False)
    if not stopped and partial:
        raise _Older
    groups = {name: scan.track() for name, scan in scans.items()}
    mapped = {g.pg_id for g in groups.values()}
    status = {
        _text(k): (
            _int(v.get("last_enqueued_collective", -1)),
            None if backend == "gloo" else _int(v.get("last_completed_collective", -1)),
        )
        for k, v in status_raw.items()
        if _text(k) not in mapped and isinstance(v, dict)
    }
    return RankDump(rank, source, version, backend, {}, groups, status)


def _scan(
    entries: Iterable[Any],
    scans: dict[str, _Scan],
    waiting: set[str | None],
    status: dict[str, Any],
    backend: str,
    window: bool = True,
) -> bool:
    """Add ``entries`` (newest first) to their groups' scans; True once every group of
    ``waiting`` (those ``pg_status`` names) is full: older entries cannot change the result."""
    for e in entries:  # a group that has what it needs skips fast
        pg = e.get("process_group") if e.__class__ is dict else None
        scan = scans.get(pg[0]) if pg.__class__ is tuple and pg else None
        if scan is not None:
            if not scan.full:
                scan.add(e)
            elif scan.pg_id in waiting:
                waiting.discard(scan.pg_id)
                if not waiting:
                    return True
            continue
        if not isinstance(e, dict):
            continue
        name, desc = _group_of(e)
        scan = scans.get(name)
        if scan is None:
            scan = scans[name] = _Scan(name, desc, e, status, backend, window)
        if not scan.full:
            scan.add(e)
    return False


class _Scan:
    """Collects one group's entries newest first until it has enough."""

    def __init__(
        self,
        name: str,
        desc: str,
        newest: dict[str, Any],
        status: dict[str, Any],
        backend: str,
        window: bool,
    ) -> None:
        self.name, self.desc, self.backend = name, desc, backend
        self.pg_id = _text(newest["pg_id"]) if "pg_id" in newest else None
        st = status.get(self.pg_id) if self.pg_id is not None else None
        self.status = st if isinstance(st, dict) else None
        self.coll: list[dict[str, Any]] = []
        self.seqs: list[int] = []
        """``coll``'s collective sequence numbers, read once."""
        self.p2p: list[dict[str, Any]] = []
        self.trusted = True
        self.window = window
        """Whether the scan is still in the dump's newest ``WINDOW`` entries."""
        self.full = False
        self.seen = False
        """Whether the pending and the ``TAIL`` completed collectives are in ``coll``."""
        self.floor: int | None = None
        if self.status is not None and backend != "gloo":
            self.floor = _int(self.status.get("last_completed_collective", -1))

    def add(self, e: dict[str, Any]) -> None:
        # 96 calls a dump: _is_p2p and _int's common cases written out
        flag = e.get("is_p2p", _ABSENT)
        if _is_p2p(e) if flag is _ABSENT else bool(flag):
            self.trusted = False
            if len(self.p2p) < TAIL:
                self.p2p.append(e)
            return
        seq = e.get("collective_seq_id", _ABSENT)
        if seq is _ABSENT:
            seq = e.get("seq_id", 0)
        if seq.__class__ is not int or not -_INT_BOUND < seq < _INT_BOUND:
            seq = _int(seq)
        if e.get("op_id", -1) != seq:
            self.trusted = False
        self.coll.append(e)
        self.seqs.append(seq)
        floor = self.floor if self.floor is not None else seq
        self.seen = self.seen or seq <= floor - TAIL
        if self.seen and len(self.coll) >= (TIMES if self.window else MIN_TIMES):
            self.full = True

    def settle(self) -> bool:
        """Past the window: full once it has ``MIN_TIMES`` pairs (and its pending and tail)."""
        self.window = False
        self.full = self.full or (self.seen and len(self.coll) >= MIN_TIMES)
        return self.full

    def track(self) -> GroupTrack:
        coll = self.coll[::-1]
        seqs = self.seqs[::-1]
        trusted = bool(coll) and self.trusted
        enqueued = max(seqs) if seqs else None
        done = [s for s, e in zip(seqs, coll, strict=True) if e.get("state") == "completed"]
        completed = max(done) if done and self.backend != "gloo" else None
        if trusted and self.status is not None:
            enqueued = max(enqueued or -1, _int(self.status.get("last_enqueued_collective", -1)))
            if self.backend != "gloo":
                last = _int(self.status.get("last_completed_collective", -1))
                completed = max(completed if completed is not None else -1, last)
        floor = completed if completed is not None else (enqueued or 0)
        pending = [e for s, e in zip(seqs, coll, strict=True) if s > floor]
        done_tail = [e for s, e in zip(seqs, coll, strict=True) if s <= floor][-TAIL:]
        kept = sorted(done_tail + pending, key=_record_id)
        # only the newest op keeps its call stack: it is where the rank is now
        ops = tuple(sorted((_op(e, False, e is kept[-1]) for e in kept), key=lambda o: o.seq))
        recent = zip(seqs[-TIMES:], coll[-TIMES:], strict=True)
        stamped = [(s, t) for s, e in recent if (t := e.get("time_created_ns"))]
        times = array("q", [x for s, t in stamped for x in (s, _int(t))])
        return GroupTrack(
            self.name,
            self.desc,
            self.pg_id,
            enqueued,
            completed,
            ops,
            tuple(_op(e, True, e is self.p2p[0]) for e in self.p2p[::-1]),
            times,
            trusted,
        )
