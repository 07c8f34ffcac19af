"""Cross-rank alignment of Flight Recorder dumps, one process group at a time.

For each group: its members in global ranks (``pg_config``, or recovered from
which dumps mention the group when the config is missing or malformed, as in
gloo dumps), how far each member got (last collective enqueued and completed),
and the first place the members diverge, earliest sequence number first:

* ``mismatch``: at the same collective sequence id the ranks recorded a
  different op, dtype, size (ops whose sizes must agree) or an all_to_all whose
  total sent differs from the total received;
* ``not_completed``: a rank did not complete collectives that its peers
  completed (its GPU did not finish them);
* ``not_started``: a rank's entry is still ``scheduled`` where peers started it;
* ``missing``: some ranks never scheduled a collective their peers scheduled;
* ``group_order``: two ranks scheduled pending collectives of two groups in
  opposite orders;
* ``no_dump``: every dumped member waits and a member left no dump.

Point-to-point ops are kept apart (their sequence ids count separately).
Straggler test: per collective, how late each rank enqueued it relative to the
median, minus that rank's own minimum lateness (a constant clock offset between
hosts is not lateness); a rank that is the last one in most collectives by a
clear margin is a straggler.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import NamedTuple

from doctor.flight.divergence import (
    Divergence,
    describe,
    mismatch,
    missing,
    no_dump,
    signature,
    stalled,
)
from doctor.flight.dump import GroupTrack, IntArray, RankDump
from doctor.model import Frame, Skipped
from doctor.ranks import rank_prose

__all__ = [
    "Divergence",
    "FlightAnalysis",
    "GroupAlignment",
    "Position",
    "RankOp",
    "Straggler",
    "align",
]

STRAGGLER_MIN_SAMPLES = 6
STRAGGLER_SHARE = 0.4
STRAGGLER_MIN_MS = 5.0


class Position(NamedTuple):
    """How far one member got in one group (a named tuple: one a rank and group, 98,000 at
    32,768 ranks)."""

    rank: int
    enqueued: int | None
    completed: int | None
    op: str = ""
    """What it recorded at the divergent sequence number ('' = nothing)."""
    detail: str = ""


@dataclass(frozen=True)
class GroupAlignment:
    """One process group across its members: where each got, and where they first diverge."""

    name: str
    desc: str
    members: tuple[int, ...]
    positions: tuple[Position, ...]
    no_dump: tuple[int, ...]
    divergence: Divergence | None


class RankOp(NamedTuple):
    """An operation a rank recorded (its latest: where it is now, with its call stack).

    A named tuple, not a frozen dataclass: ``ops`` holds one for each op every rank kept,
    880,000 at 32,768 ranks, and a tuple is built in a tenth of the time."""

    rank: int
    group: str
    seq: int
    op: str
    state: str
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class Straggler:
    """A rank that is last to enqueue most collectives of a group: slow, not stuck."""

    rank: int
    group: str
    last_share: float
    """Share of collectives the rank was the last to enqueue."""
    median_delay_ms: float
    samples: int


@dataclass(frozen=True)
class FlightAnalysis:
    """Everything the Flight Recorder dumps say, aligned across ranks."""

    ranks_read: tuple[int, ...]
    world_size: int | None
    backend: str
    versions: tuple[str, ...]
    groups: tuple[GroupAlignment, ...]
    last_ops: tuple[RankOp, ...]
    stragglers: tuple[Straggler, ...]
    skipped: tuple[Skipped, ...]
    completion_known: bool
    """False for gloo dumps: they do not record which collectives completed."""
    kept_ops: tuple[RankOp, ...] | None = None
    """``ops`` as given (None: built from ``dumps`` when first asked)."""
    dumps: Mapping[int, RankDump] = field(default_factory=dict, repr=False, compare=False)
    """The reduced dumps aligned, by rank: what ``ops`` is built from."""

    @functools.cached_property
    def ops(self) -> tuple[RankOp, ...]:
        """Every collective the dumps kept (pending ones and a short tail per group), without
        frames: the triage TUI draws them as a grid of ranks by sequence number. Built when
        first asked: 880,000 records at 32,768 ranks, and ``analyze --json`` never asks."""
        return self.kept_ops if self.kept_ops is not None else tuple(_kept_ops(self.dumps))

    @property
    def missing_dumps(self) -> tuple[int, ...]:
        """Ranks of the job that left no dump and no unreadable file."""
        told = set(self.ranks_read) | {s.rank for s in self.skipped}
        return tuple(sorted({r for g in self.groups for r in g.members} - told))

    @property
    def divergent(self) -> tuple[GroupAlignment, ...]:
        """The groups whose members diverge, in group order."""
        return tuple(g for g in self.groups if g.divergence is not None)

    def last_op(self, rank: int) -> RankOp | None:
        """The newest operation ``rank`` recorded, or None without a dump (a lookup, not a
        scan: the JSON asks it for each of 32,768 ranks)."""
        return self._last_by_rank.get(rank)

    @functools.cached_property
    def _last_by_rank(self) -> dict[int, RankOp]:
        return {o.rank: o for o in self.last_ops}


def align(
    dumps: Iterable[RankDump], skipped: Iterable[Skipped] = (), world_size: int | None = None
) -> FlightAnalysis:
    """Align reduced dumps across ranks; pure (no I/O), linear in ranks x groups."""
    ds = {d.rank: d for d in dumps}
    skipped = tuple(skipped)
    seen = set(ds) | {s.rank for s in skipped if s.rank is not None}
    world = max([world_size or 0, *(r + 1 for r in seen)]) or None
    names: dict[str, str] = {}
    tracks: dict[str, dict[int, GroupTrack]] = {}
    votes: dict[str, Counter[int]] = {}
    lists: dict[int, tuple[int, ...]] = {}
    for r, d in ds.items():
        for name, (desc, ranks) in d.config.items():
            names.setdefault(name, desc)
            if ranks:  # equal rank lists are one shared tuple: count by identity, not content
                count = votes.get(name)
                if count is None:
                    count = votes[name] = Counter()
                count[id(ranks)] += 1
                lists[id(ranks)] = ranks
        for name, t in d.groups.items():
            names[name] = names.get(name) or t.desc
            tracks.setdefault(name, {})[r] = t
    groups = []
    for name in sorted(names, key=_key):
        configured = lists[votes[name].most_common(1)[0][0]] if name in votes else None
        members = _members(name, names[name], configured, tracks.get(name, {}), world)
        tracks[name] = _recover(name, tracks.get(name, {}), configured, ds)
        groups.append(_group(name, names[name], members, tracks[name], ds))
    groups = _group_order([_break_tie(g, groups, tracks) for g in groups], tracks)
    backend = Counter(d.backend for d in ds.values() if d.backend).most_common(1)
    return FlightAnalysis(
        ranks_read=tuple(sorted(ds)),
        world_size=world,
        backend=backend[0][0] if backend else "",
        versions=tuple(sorted({d.version for d in ds.values()})),
        groups=tuple(groups),
        last_ops=tuple(_last_ops(ds)),
        dumps=ds,
        stragglers=tuple(
            s for name in sorted(tracks, key=_key) if (s := _straggler(name, tracks[name]))
        ),
        skipped=skipped,
        completion_known=any(
            t.completed is not None for ts in tracks.values() for t in ts.values()
        ),
    )


def _key(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)


def _recover(
    name: str, out: dict[int, GroupTrack], members: tuple[int, ...] | None, ds: dict[int, RankDump]
) -> dict[int, GroupTrack]:
    """Members with no entries in ``name`` (all completed and evicted, or a quiet rank) are
    recovered from their ``pg_status`` under the pg_id their peers use for the group: the
    per-rank creation index, the same on every member."""
    ids = {t.pg_id for t in out.values() if t.status_trusted}
    if len(ids) != 1 or not members:
        return out
    (pg_id,) = ids
    desc = next(iter(out.values())).desc
    out = dict(out)
    for r in members:
        d = ds.get(r)
        if d is not None and r not in out and pg_id in d.status:
            enq, done = d.status[pg_id]
            out[r] = GroupTrack(name, desc, pg_id, enq, done, (), ())
    return out


def _members(
    name: str,
    desc: str,
    configured: tuple[int, ...] | None,
    tracks: dict[int, GroupTrack],
    world: int | None,
) -> tuple[int, ...]:
    """Global ranks of a group: its pg_config, else the world for the default group, else
    the ranks whose dumps mention it (gloo dumps carry no usable pg_config)."""
    if configured:
        return configured
    if (desc == "default_pg" or name == "0") and world:
        return tuple(range(world))
    return tuple(sorted(tracks))


def _group(
    name: str,
    desc: str,
    members: tuple[int, ...],
    tracks: dict[int, GroupTrack],
    ds: dict[int, RankDump],
) -> GroupAlignment:
    absent = tuple(r for r in members if r not in ds)
    div = _earliest(tracks, name) or no_dump(tracks, absent, name)
    positions = tuple(_position(r, tracks.get(r), div) for r in members if r in ds)
    return GroupAlignment(name, desc, members, positions, absent, div)


def _earliest(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    """Of all divergence kinds found, keep the one at the lowest sequence number."""
    found = [
        d
        for d in (mismatch(tracks, name), stalled(tracks, name), missing(tracks, name))
        if d is not None
    ]
    if not found:
        return None
    return min(found, key=lambda d: d.seq if d.seq is not None else 1 << 62)


def _position(rank: int, t: GroupTrack | None, div: Divergence | None) -> Position:
    if t is None:
        return Position(rank, None, None, detail="no entries for this group")
    op = next((o for o in t.ops if div is not None and o.seq == div.seq), None)
    return Position(rank, t.enqueued, t.completed, describe(op) if op else "")


def _break_tie(
    g: GroupAlignment, groups: list[GroupAlignment], tracks: dict[str, dict[int, GroupTrack]]
) -> GroupAlignment:
    """Settle a 1:1 mismatch by what sibling groups (same description and size, e.g. the
    other tensor-parallel groups) recorded at the same sequence number."""
    d = g.divergence
    if d is None or d.kind != "mismatch" or not d.tie or d.seq is None:
        return g
    ops = {r: o for r in d.culprits for o in tracks[g.name][r].ops if o.seq == d.seq}
    votes = Counter(signature(o) for o in ops.values())
    siblings = [
        s.name
        for s in groups
        if s.name != g.name and s.desc == g.desc and len(s.members) == len(g.members)
    ]
    for name in siblings:
        for o in (o for t in tracks[name].values() for o in t.ops if o.seq == d.seq):
            if signature(o) in votes:
                votes[signature(o)] += 1
    if len(votes) < 2:  # one op, other sizes (an all_to_all split): no vote to settle
        return g
    (top, n_top), (_s, n_second) = votes.most_common(2)
    if n_top == n_second:
        return g
    odd = tuple(sorted(r for r, o in ops.items() if signature(o) != top))
    peers = tuple(sorted(r for r in ops if r not in odd))
    text = (
        f"pg {g.name} seq {d.seq}: {rank_prose(odd)} issued "
        f"{', '.join(describe(ops[r]) for r in odd)} where {rank_prose(peers)} "
        f"and the sibling groups ({', '.join(siblings)}) issued {describe(ops[peers[0]])}"
    )
    div = Divergence("mismatch", d.seq, ops[odd[0]].name, odd, peers, False, text)
    return GroupAlignment(g.name, g.desc, g.members, g.positions, g.no_dump, div)


def _group_order(
    groups: list[GroupAlignment], tracks: dict[str, dict[int, GroupTrack]]
) -> list[GroupAlignment]:
    """Flag two groups whose pending collectives two ranks scheduled in opposite orders."""
    first: dict[int, dict[str, int]] = {}
    for name, ts in tracks.items():
        for r, t in ts.items():
            pend = [o for o in t.ops if t.completed is not None and o.seq > t.completed]
            if pend:
                first.setdefault(r, {})[name] = pend[0].record_id
    orders: dict[tuple[str, str], dict[bool, list[int]]] = {}
    for r, recs in first.items():
        names = sorted(recs)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                orders.setdefault((a, b), {}).setdefault(recs[a] < recs[b], []).append(r)
    out = list(groups)
    for (a, b), seen in orders.items():
        if len(seen) == 2:
            few, many = sorted(seen.values(), key=len)
            tie = len(few) == len(many)
            idx = next(i for i, g in enumerate(out) if g.name == a)
            if out[idx].divergence is None:
                div = Divergence(
                    "group_order",
                    None,
                    "",
                    tuple(sorted(few + many if tie else few)),
                    tuple(sorted(many)),
                    tie,
                    f"pg {a} and pg {b} were scheduled in opposite orders: "
                    f"{rank_prose(few)} against {rank_prose(many)}",
                )
                g = out[idx]
                out[idx] = GroupAlignment(g.name, g.desc, g.members, g.positions, g.no_dump, div)
    return out


def _kept_ops(ds: Mapping[int, RankDump]) -> Iterable[RankOp]:
    for r in sorted(ds):
        for n, t in ds[r].groups.items():
            yield from (RankOp(r, n, o.seq, o.name, o.state, ()) for o in t.ops)


def _last_ops(ds: dict[int, RankDump]) -> Iterable[RankOp]:
    for r in sorted(ds):
        ops = [(o, n) for n, t in ds[r].groups.items() for o in (*t.ops, *t.p2p)]
        if ops:
            o, n = max(ops, key=lambda p: p[0].record_id)
            yield RankOp(r, n, o.seq, o.name, o.state, o.frames)


def _median(values: Sequence[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _columns(times: list[IntArray]) -> tuple[list[int], list[list[int]]]:
    """The sequence numbers every rank has a time for, and each rank's times of them.

    Most often every rank kept the same ones, in order: their halves of the flat (seq, time)
    arrays are compared and sliced in C, without a dict per rank."""
    first = times[0][::2]
    if all(a[::2] == first for a in times) and all(b > a for a, b in pairwise(first)):
        return first.tolist(), [a[1::2].tolist() for a in times]
    pairs = [dict(zip(a[::2], a[1::2], strict=True)) for a in times]
    seqs = sorted(set(pairs[0]).intersection(*pairs[1:]))
    return seqs, [[p[s] for s in seqs] for p in pairs]


def _straggler(name: str, tracks: dict[int, GroupTrack]) -> Straggler | None:
    """The rank that enqueues last, sample after sample, by more than a few milliseconds.

    Works on columns (one per rank) of the sequence numbers every rank recorded, so the
    world group of a 4096-rank job costs a few list passes, not a Python loop per sample."""
    if len(tracks) < 2:
        return None
    ranks = sorted(tracks)
    seqs, cols = _columns([tracks[r].times for r in ranks])
    if len(seqs) < STRAGGLER_MIN_SAMPLES:
        return None
    rows = list(zip(*cols, strict=True))
    # Each rank's lateness in a row lies within that row's spread S, so no two ranks' mean
    # (less its first quartile) differ by more than 4 S: a group whose every collective all
    # its ranks enqueued within a quarter of STRAGGLER_MIN_MS has none (4,096 tensor-parallel
    # groups of 8 at 32,768 ranks: 1.4 s of arithmetic)
    if 4 * max(max(row) - min(row) for row in rows) < STRAGGLER_MIN_MS * 1e6:
        return None
    return _late_rank(name, ranks, len(seqs), cols, rows)


def _late_rank(
    name: str, ranks: list[int], samples: int, cols: list[list[int]], rows: list[tuple[int, ...]]
) -> Straggler | None:
    """``_straggler``'s arithmetic on the columns (one per rank) and rows (one per sample)."""
    medians = [_median(row) for row in rows]
    late = [[v - m for v, m in zip(col, medians, strict=True)] for col in cols]
    adj = [[v - o for v in col] for col in late for o in (sorted(col)[len(col) // 4],)]
    means = [sum(col) / len(col) for col in adj]
    top = means.index(max(means))
    share = sum(1 for row in zip(*adj, strict=True) if row.index(max(row)) == top) / samples
    excess_ms = (means[top] - _median(means[:top] + means[top + 1 :])) / 1e6
    if share >= STRAGGLER_SHARE and excess_ms >= STRAGGLER_MIN_MS:
        return Straggler(ranks[top], name, share, excess_ms, samples)
    return None
