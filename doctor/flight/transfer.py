"""Reduced dumps sent from the processes that read them to the one that aligns them, each
repeated value sent once.

Nearly every value of a reduced dump repeats on every rank: group names, sizes, dtypes, a
call stack of a dozen frames. Pickled whole, each result carried its own copies, and the
parent spent nearly a millisecond a dump unpickling them and then folding equal ones into one
object (32,768 ranks repeat the same few hundred values; kept apart they would take
gigabytes). So each worker numbers the values it has sent and sends a value with the first
dump that holds it, its number afterwards; the parent keeps each worker's values in a list
(equal values of different workers folded into one object) and builds a dump from numbers.

A worker's results must reach the parent in the order it made them: ``Executor.map`` yields
results in the order the work was given, and each worker takes its work in that order.
"""

from __future__ import annotations

import os
from typing import Any

from doctor.flight.dump import Compact, GroupTrack, Op, RankDump, RawConfig, shared_ranks
from doctor.model import Frame

Packed = tuple[bytes, list[Any], tuple[Any, ...]]
"""(the worker's token, the values it sends for the first time, the dump in numbers)."""


class Packer:
    """One worker's side: the values it has sent, by number."""

    def __init__(self) -> None:
        self.token = os.urandom(8)
        """Names this worker's numbering: a pid can be reused by a worker started later."""
        self.pid = os.getpid()
        self._ids: dict[Any, int] = {}
        self._new: list[Any] = []

    def _id(self, value: Any) -> int:
        got = self._ids.get(value)
        if got is None:
            got = self._ids[value] = len(self._ids)
            self._new.append(value)
        return got

    def _op(self, o: Op) -> tuple[Any, ...]:
        i = self._id
        return (
            o.seq,
            i(o.name),
            i(o.in_sizes),
            i(o.out_sizes),
            i(o.dtypes),
            i(o.state),
            o.record_id,
            o.time_ns,
            i(o.frames),
            o.p2p,
        )

    def pack(self, dump: RankDump, config: RawConfig) -> Packed:
        i, op = self._id, self._op
        groups = tuple(
            (
                i(key),
                i(t.name),
                i(t.desc),
                i(t.pg_id),
                t.enqueued,
                t.completed,
                tuple(map(op, t.ops)),
                tuple(map(op, t.p2p)),
                t.times,
                t.status_trusted,
            )
            for key, t in dump.groups.items()
        )
        body = (
            dump.rank,
            dump.source,
            i(dump.version),
            i(dump.backend),
            tuple(i(_ConfigItem((name, desc, ranks))) for name, (desc, ranks) in config.items()),
            groups,
            dump.status,
        )
        new, self._new = self._new, []
        return self.token, new, body


class _ConfigItem(tuple[str, str, Compact]):
    """One pg_config entry as sent: a type of its own, which the parent parses (no other
    value sent is a tuple that starts with two texts, so none is equal to one)."""

    __slots__ = ()


class Unpacker:
    """The parent's side: every worker's values, equal ones of all workers one object."""

    def __init__(self) -> None:
        self._table: dict[Any, Any] = {}
        self._values: dict[bytes, list[Any]] = {}

    def _fold(self, value: Any) -> Any:
        if type(value) is _ConfigItem:
            name, desc, ranks = value
            return self._fold(name), (self._fold(desc), shared_ranks(ranks))
        if type(value) is tuple and value and type(value[0]) is Frame:
            value = tuple(self._table.setdefault(f, f) for f in value)
        return self._table.setdefault(value, value)

    def unpack(self, packed: Packed) -> RankDump:
        token, new, body = packed
        values = self._values.setdefault(token, [])
        values.extend(map(self._fold, new))
        rank, source, version, backend, config, groups, status = body

        def op(o: tuple[Any, ...]) -> Op:
            seq, name, ins, outs, dtypes, state, record_id, time_ns, frames, p2p = o
            v = values
            return Op(seq, v[name], v[ins], v[outs], v[dtypes], v[state], record_id, time_ns,
                      v[frames], p2p)  # fmt: skip

        tracks = {
            values[key]: GroupTrack(
                values[name],
                values[desc],
                values[pg_id],
                enqueued,
                completed,
                tuple(map(op, ops)),
                tuple(map(op, p2p)),
                times,
                trusted,
            )
            for key, name, desc, pg_id, enqueued, completed, ops, p2p, times, trusted in groups
        }
        return RankDump(
            rank,
            source,
            values[version],
            values[backend],
            dict(values[c] for c in config),
            tracks,
            status,
        )
