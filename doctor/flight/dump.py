"""One rank's Flight Recorder dump, reduced to what cross-rank alignment needs.

A dump can hold thousands of entries; alignment only needs, per process group,
how far the rank got (last collective enqueued and completed), the entries it
has not completed plus a short tail for context, and recent timestamps for the
straggler test. ``parse_dump`` keeps exactly that and drops the rest, so memory
grows with ranks x groups, not with ranks x entries.

Formats: the pickle of ``_dump_fr_trace`` and the JSON of
``_dump_fr_trace_json``, versions 2.2 up to the current 2.x, NCCL and gloo.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from doctor.evidence import Frame
from doctor.flight import safe_pickle

OLDEST_VERSION = (2, 2)
TAIL = 8
"""Completed entries kept per group for context (pending ones are all kept)."""
TIMES = 256
"""Recent (seq, time) pairs kept per group for the straggler test."""
FRAMES = 12


class DumpError(ValueError):
    """The bytes are not a usable Flight Recorder dump; the message says why."""


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
    times: tuple[tuple[int, int], ...]
    status_trusted: bool = False
    """Whether ``pg_status`` of this pg_id counts collectives (no p2p mixed in)."""


@dataclass(frozen=True)
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


def decode(data: bytes) -> dict[str, Any]:
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
    except (EOFError, ValueError, TypeError, IndexError, KeyError, MemoryError,
            OverflowError, RecursionError) as exc:
        raise DumpError(f"truncated or corrupt ({type(exc).__name__}: {exc})"[:200]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("entries", []), list):
        raise DumpError("not a Flight Recorder dump (no 'entries' list)")
    return doc


def _version(doc: dict[str, Any]) -> str:
    raw = str(doc.get("version", ""))
    try:
        major, minor = (int(p) for p in raw.split(".")[:2])
    except ValueError:
        raise DumpError(f"unknown format version {raw!r}") from None
    if major != OLDEST_VERSION[0] or (major, minor) < OLDEST_VERSION:
        raise DumpError(f"format version {raw} is not supported (2.2 to 2.x)")
    return raw


def _ranks(raw: Any) -> tuple[int, ...] | None:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if isinstance(raw, list) and raw and all(isinstance(r, int) for r in raw):
        return tuple(raw)
    return None


def _config(doc: dict[str, Any]) -> dict[str, tuple[str, tuple[int, ...] | None]]:
    out: dict[str, tuple[str, tuple[int, ...] | None]] = {}
    raw = doc.get("pg_config")
    if isinstance(raw, dict):
        for name, cfg in raw.items():
            if name and isinstance(cfg, dict):
                out[str(name)] = (str(cfg.get("desc", "")), _ranks(cfg.get("ranks")))
    return out


def _sizes(raw: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(tuple(s) if isinstance(s, list | tuple) else () for s in raw)


def _frames(raw: Any) -> tuple[Frame, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(Frame(str(f.get("name", "")), str(f.get("filename", "")), int(f.get("line", 0)))
                 for f in raw[:FRAMES] if isinstance(f, dict))


def _op(e: dict[str, Any], p2p: bool) -> Op:
    prof = str(e.get("profiling_name", ""))
    return Op(
        seq=int(e.get("p2p_seq_id", 0) if p2p else e.get("collective_seq_id", e.get("seq_id", 0))),
        name=prof.split(":", 1)[-1], in_sizes=_sizes(e.get("input_sizes")),
        out_sizes=_sizes(e.get("output_sizes")),
        dtypes=tuple(str(d) for d in e.get("input_dtypes") or ()),
        state=str(e.get("state", "")), record_id=int(e.get("record_id", 0)),
        time_ns=e.get("time_created_ns") or None, frames=_frames(e.get("frames")), p2p=p2p)


def _group_key(e: dict[str, Any]) -> tuple[str, str]:
    pg = e.get("process_group")
    if isinstance(pg, list | tuple) and pg:
        return str(pg[0]), str(pg[1]) if len(pg) > 1 else ""
    return str(e.get("pg_id", "?")), ""


def _is_p2p(e: dict[str, Any]) -> bool:
    if "is_p2p" in e:
        return bool(e["is_p2p"])
    name = str(e.get("profiling_name", ""))
    return " " in name.split(":", 1)[-1] or "send" in name or "recv" in name


def parse_dump(rank: int, source: str, data: bytes) -> RankDump:
    """Decode, validate and reduce one dump; raises ``DumpError`` with the reason."""
    doc = decode(data)
    version = _version(doc)
    entries = [e for e in doc["entries"] if isinstance(e, dict)]
    backend = next((str(e.get("profiling_name", "")).split(":", 1)[0] for e in entries
                    if ":" in str(e.get("profiling_name", ""))), "")
    status_raw = doc.get("pg_status") if isinstance(doc.get("pg_status"), dict) else {}
    by_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in entries:
        by_group.setdefault(_group_key(e), []).append(e)
    groups: dict[str, GroupTrack] = {}
    for (name, desc), es in by_group.items():
        groups[name] = _track(name, desc, es, status_raw, backend)
    mapped = {g.pg_id for g in groups.values()}
    status = {str(k): (int(v.get("last_enqueued_collective", -1)),
                       None if backend == "gloo" else int(v.get("last_completed_collective", -1)))
              for k, v in status_raw.items() if str(k) not in mapped and isinstance(v, dict)}
    return RankDump(rank, source, version, backend, _config(doc), groups, status)


def _track(name: str, desc: str, es: list[dict[str, Any]], status_raw: dict[str, Any],
           backend: str) -> GroupTrack:
    coll = [e for e in es if not _is_p2p(e)]
    p2p = [e for e in es if _is_p2p(e)]
    pg_id = str(es[0]["pg_id"]) if "pg_id" in es[0] else None
    trusted = bool(coll) and not p2p and all(
        e.get("op_id", -1) == e.get("collective_seq_id") for e in coll)
    seqs = [int(e.get("collective_seq_id", e.get("seq_id", 0))) for e in coll]
    enqueued = max(seqs) if seqs else None
    completed = None
    done = [s for s, e in zip(seqs, coll, strict=True) if e.get("state") == "completed"]
    if done and backend != "gloo":
        completed = max(done)
    st = status_raw.get(pg_id) if pg_id is not None else None
    if trusted and isinstance(st, dict):
        enqueued = max(enqueued or -1, int(st.get("last_enqueued_collective", -1)))
        if backend != "gloo":
            completed = max(completed or -1, int(st.get("last_completed_collective", -1)))
    floor = completed if completed is not None else (enqueued or 0)
    pending = [e for s, e in zip(seqs, coll, strict=True) if s > floor]
    done_tail = [e for s, e in zip(seqs, coll, strict=True) if s <= floor][-TAIL:]
    ops = tuple(sorted((_op(e, False) for e in done_tail + pending), key=lambda o: o.seq))
    times = tuple((s, int(e["time_created_ns"])) for s, e in zip(seqs, coll, strict=True)
                  if e.get("time_created_ns"))[-TIMES:]
    return GroupTrack(name, desc, pg_id, enqueued, completed, ops,
                      tuple(_op(e, True) for e in p2p[-TAIL:]), times, trusted)
