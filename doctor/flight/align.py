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

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from doctor.evidence import Frame
from doctor.flight.dump import GroupTrack, Op, RankDump
from doctor.model import Skipped

VARIABLE_SIZE_OPS = ("all_to_all", "alltoall", "gather", "scatter", "_v")
STRAGGLER_MIN_SAMPLES = 6
STRAGGLER_SHARE = 0.4
STRAGGLER_MIN_MS = 5.0


@dataclass(frozen=True)
class Position:
    """How far one member got in one group."""

    rank: int
    enqueued: int | None
    completed: int | None
    op: str = ""
    """What it recorded at the divergent sequence number ('' = nothing)."""
    detail: str = ""


@dataclass(frozen=True)
class Divergence:
    """The first place the members of one group disagree."""

    kind: str
    seq: int | None
    op: str
    """What the majority did there."""
    culprits: tuple[int, ...]
    waiting: tuple[int, ...]
    """Members that wait on the culprits."""
    tie: bool
    text: str


@dataclass(frozen=True)
class GroupAlignment:
    name: str
    desc: str
    members: tuple[int, ...]
    positions: tuple[Position, ...]
    no_dump: tuple[int, ...]
    divergence: Divergence | None


@dataclass(frozen=True)
class RankOp:
    """The latest operation a rank recorded: where it is now, with its call stack."""

    rank: int
    group: str
    seq: int
    op: str
    state: str
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class Straggler:
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
    ops: tuple[RankOp, ...] = ()
    """Every collective the dumps kept (pending ones and a short tail per group), without
    frames: the triage TUI draws them as a grid of ranks by sequence number."""

    @property
    def missing_dumps(self) -> tuple[int, ...]:
        """Ranks of the job that left no dump and no unreadable file."""
        told = set(self.ranks_read) | {s.rank for s in self.skipped}
        return tuple(sorted({r for g in self.groups for r in g.members} - told))

    @property
    def divergent(self) -> tuple[GroupAlignment, ...]:
        return tuple(g for g in self.groups if g.divergence is not None)

    def last_op(self, rank: int) -> RankOp | None:
        return next((o for o in self.last_ops if o.rank == rank), None)


def align(
    dumps: Iterable[RankDump], skipped: Iterable[Skipped] = (), world_size: int | None = None
) -> FlightAnalysis:
    """Align reduced dumps across ranks; pure (no I/O)."""
    ds = {d.rank: d for d in dumps}
    skipped = tuple(skipped)
    seen = set(ds) | {s.rank for s in skipped if s.rank is not None}
    world = max([world_size or 0, *(r + 1 for r in seen)]) or None
    names: dict[str, str] = {}
    for d in ds.values():
        for name, (desc, _ranks) in d.config.items():
            names.setdefault(name, desc)
        for name, g in d.groups.items():
            if not names.get(name):
                names[name] = g.desc
    tracks = {name: _tracks(name, ds) for name in names}
    groups = [
        _group(name, names[name], tracks[name], ds, world) for name in sorted(names, key=_key)
    ]
    groups = _group_order([_break_tie(g, groups, tracks) for g in groups], tracks)
    backend = Counter(d.backend for d in ds.values() if d.backend).most_common(1)
    return FlightAnalysis(
        ranks_read=tuple(sorted(ds)),
        world_size=world,
        backend=backend[0][0] if backend else "",
        versions=tuple(sorted({d.version for d in ds.values()})),
        groups=tuple(groups),
        last_ops=tuple(_last_ops(ds)),
        ops=tuple(_kept_ops(ds)),
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


def _tracks(name: str, ds: dict[int, RankDump]) -> dict[int, GroupTrack]:
    """Each rank's track of ``name``; ranks with no entries in it are recovered from
    ``pg_status`` under the pg_id their peers use for it (the per-rank creation index)."""
    out = {r: d.groups[name] for r, d in ds.items() if name in d.groups}
    ids = {t.pg_id for t in out.values() if t.status_trusted}
    if len(ids) != 1:
        return out
    (pg_id,) = ids
    desc = next(iter(out.values())).desc
    for r, d in ds.items():
        members = d.config.get(name, ("", None))[1]
        if r not in out and members and r in members and pg_id in d.status:
            enq, done = d.status[pg_id]
            out[r] = GroupTrack(name, desc, pg_id, enq, done, (), (), ())
    return out


def _members(
    name: str, desc: str, tracks: dict[int, GroupTrack], ds: dict[int, RankDump], world: int | None
) -> tuple[int, ...]:
    configured = Counter(
        d.config[name][1] for d in ds.values() if name in d.config and d.config[name][1]
    )
    if configured:
        return configured.most_common(1)[0][0]
    if (desc == "default_pg" or name == "0") and world:
        return tuple(range(world))
    return tuple(sorted(tracks))


def _group(
    name: str, desc: str, tracks: dict[int, GroupTrack], ds: dict[int, RankDump], world: int | None
) -> GroupAlignment:
    members = _members(name, desc, tracks, ds, world)
    no_dump = tuple(r for r in members if r not in ds)
    div = _earliest(tracks, name) or _no_dump(tracks, no_dump, name)
    positions = tuple(_position(r, tracks.get(r), div) for r in members if r in ds)
    return GroupAlignment(name, desc, members, positions, no_dump, div)


def _earliest(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    """Of all divergence kinds found, keep the one at the lowest sequence number."""
    found = [
        d
        for d in (_mismatch(tracks, name), _stalled(tracks, name), _missing(tracks, name))
        if d is not None
    ]
    if not found:
        return None
    return min(found, key=lambda d: d.seq if d.seq is not None else 1 << 62)


def _position(rank: int, t: GroupTrack | None, div: Divergence | None) -> Position:
    if t is None:
        return Position(rank, None, None, detail="no entries for this group")
    op = next((o for o in t.ops if div is not None and o.seq == div.seq), None)
    return Position(rank, t.enqueued, t.completed, _describe(op) if op else "")


def _describe(op: Op) -> str:
    sizes = ",".join("x".join(map(str, s)) for s in op.in_sizes)
    return f"{op.name}[{sizes}]{'/' + op.dtypes[0] if op.dtypes else ''}"


def _signature(op: Op) -> tuple[object, ...]:
    variable = any(v in op.name for v in VARIABLE_SIZE_OPS)
    return (op.name, op.dtypes, None if variable else op.in_sizes)


def _mismatch(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    by_seq: dict[int, dict[int, Op]] = {}
    for r, t in tracks.items():
        for o in t.ops:
            by_seq.setdefault(o.seq, {})[r] = o
    for seq in sorted(by_seq):
        ops = by_seq[seq]
        votes = Counter(_signature(o) for o in ops.values())
        if len(votes) > 1:
            return _vote(name, seq, ops, votes)
        first = next(iter(ops.values()))
        if "all_to_all" in first.name and len(ops) == len(tracks) and len(ops) > 1:
            sent = sum(_numel(o.in_sizes) for o in ops.values())
            got = sum(_numel(o.out_sizes) for o in ops.values())
            if sent != got and all(o.out_sizes for o in ops.values()):
                return Divergence(
                    "mismatch",
                    seq,
                    first.name,
                    tuple(sorted(ops)),
                    (),
                    True,
                    f"all_to_all splits disagree in pg {name} seq {seq}: "
                    f"{sent} elements sent, {got} received",
                )
    return None


def _numel(sizes: tuple[tuple[int, ...], ...]) -> int:
    total = 0
    for s in sizes:
        n = 1
        for d in s:
            n *= d
        total += n
    return total


def _vote(
    name: str, seq: int, ops: dict[int, Op], votes: Counter[tuple[object, ...]]
) -> Divergence:
    (top, n_top), (_second, n_second) = votes.most_common(2)
    tie = n_top == n_second
    majority = tuple(sorted(r for r, o in ops.items() if _signature(o) == top))
    odd = tuple(sorted(r for r in ops if r not in majority))
    culprits = tuple(sorted(ops)) if tie else odd
    what = {r: _describe(o) for r, o in ops.items()}
    maj_op = ops[majority[0]]
    if tie:
        text = (
            f"pg {name} seq {seq}: "
            + " vs ".join(f"rank {r} {what[r]}" for r in sorted(ops))
            + " (a tie: nothing in this group says which is wrong)"
        )
    else:
        text = (
            f"pg {name} seq {seq}: rank{'s' if len(odd) > 1 else ''} "
            f"{', '.join(map(str, odd))} issued {', '.join(sorted({what[r] for r in odd}))} "
            f"where {len(majority)} rank{'s' if len(majority) > 1 else ''} "
            f"issued {what[majority[0]]}"
        )
    return Divergence("mismatch", seq, maj_op.name, culprits, () if tie else majority, tie, text)


def _stalled(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    """Ranks that did not complete (or start) what their peers completed."""
    known = {r: t for r, t in tracks.items() if t.completed is not None and t.enqueued is not None}
    if len(known) < 2:
        return None
    best = max(t.completed for t in known.values())  # type: ignore[type-var]
    lag = tuple(
        sorted(r for r, t in known.items() if t.completed < best and t.completed < t.enqueued)
    )  # type: ignore[operator]
    if lag:
        seq = min(known[r].completed for r in lag) + 1  # type: ignore[operator]
        op = next((o.name for r in lag for o in known[r].ops if o.seq == seq), "")
        others = tuple(sorted(r for r in known if r not in lag))
        return Divergence(
            "not_completed",
            seq,
            op,
            lag,
            others,
            False,
            f"pg {name}: rank{'s' if len(lag) > 1 else ''} {', '.join(map(str, lag))} "
            f"did not complete seq {seq} ({op or 'op'}), which "
            f"{'peers' if others else 'the group'} completed up to seq {best}",
        )
    return _not_started(tracks, name)


def _not_started(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    states: dict[int, dict[int, str]] = {}
    for r, t in tracks.items():
        for o in t.ops:
            states.setdefault(o.seq, {})[r] = o.state
    for seq in sorted(states):
        st = states[seq]
        if "scheduled" in st.values() and {"started", "completed"} & set(st.values()):
            late = tuple(sorted(r for r, s in st.items() if s == "scheduled"))
            return Divergence(
                "not_started",
                seq,
                "",
                late,
                tuple(sorted(r for r in st if r not in late)),
                False,
                f"pg {name} seq {seq}: never started on rank(s) "
                f"{', '.join(map(str, late))} while peers started it",
            )
    return None


def _missing(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    enq = {r: t.enqueued for r, t in tracks.items() if t.enqueued is not None}
    if len(enq) < 2:
        return None
    front = max(enq.values())
    behind = tuple(sorted(r for r, e in enq.items() if e < front))
    if not behind:
        return None
    seq = min(enq[r] for r in behind) + 1
    ahead = tuple(sorted(r for r, e in enq.items() if e == front))
    op = next((o.name for r in ahead for o in tracks[r].ops if o.seq == seq), "")
    return Divergence(
        "missing",
        seq,
        op,
        behind,
        ahead,
        False,
        f"pg {name}: rank{'s' if len(behind) > 1 else ''} "
        f"{', '.join(map(str, behind))} never scheduled seq {seq}"
        f"{' (' + op + ')' if op else ''}; {len(ahead)} peer(s) reached seq {front}",
    )


def _no_dump(
    tracks: dict[int, GroupTrack], no_dump: tuple[int, ...], name: str
) -> Divergence | None:
    if not no_dump or not tracks:
        return None
    waiting = tuple(sorted(tracks))
    last = max((t.enqueued or 0) for t in tracks.values())
    op = next((o.name for t in tracks.values() for o in t.ops if o.seq == last), "")
    return Divergence(
        "no_dump",
        last,
        op,
        no_dump,
        waiting,
        False,
        f"pg {name}: every dumped member reached seq {last} ({op or 'op'}); "
        f"rank{'s' if len(no_dump) > 1 else ''} {', '.join(map(str, no_dump))} left no dump",
    )


def _break_tie(
    g: GroupAlignment, groups: list[GroupAlignment], tracks: dict[str, dict[int, GroupTrack]]
) -> GroupAlignment:
    """Settle a 1:1 mismatch by what sibling groups (same description and size, e.g. the
    other tensor-parallel groups) recorded at the same sequence number."""
    d = g.divergence
    if d is None or d.kind != "mismatch" or not d.tie or d.seq is None:
        return g
    ops = {r: o for r in d.culprits for o in tracks[g.name][r].ops if o.seq == d.seq}
    votes = Counter(_signature(o) for o in ops.values())
    siblings = [
        s.name
        for s in groups
        if s.name != g.name and s.desc == g.desc and len(s.members) == len(g.members)
    ]
    for name in siblings:
        for o in (o for t in tracks[name].values() for o in t.ops if o.seq == d.seq):
            if _signature(o) in votes:
                votes[_signature(o)] += 1
    (top, n_top), (_s, n_second) = votes.most_common(2)
    if n_top == n_second:
        return g
    odd = tuple(sorted(r for r, o in ops.items() if _signature(o) != top))
    peers = tuple(sorted(r for r in ops if r not in odd))
    text = (
        f"pg {g.name} seq {d.seq}: rank {', '.join(map(str, odd))} issued "
        f"{', '.join(_describe(ops[r]) for r in odd)} where rank {', '.join(map(str, peers))} "
        f"and the sibling groups ({', '.join(siblings)}) issued {_describe(ops[peers[0]])}"
    )
    div = Divergence("mismatch", d.seq, ops[peers[0]].name, odd, peers, False, text)
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
            few = min(seen.values(), key=len)
            many = max(seen.values(), key=len)
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
                    f"pg {a} and pg {b} were scheduled in opposite orders: rank(s) "
                    f"{', '.join(map(str, sorted(few)))} against "
                    f"{', '.join(map(str, sorted(many)))}",
                )
                g = out[idx]
                out[idx] = GroupAlignment(g.name, g.desc, g.members, g.positions, g.no_dump, div)
    return out


def _kept_ops(ds: dict[int, RankDump]) -> Iterable[RankOp]:
    for r in sorted(ds):
        for n, t in ds[r].groups.items():
            yield from (RankOp(r, n, o.seq, o.name, o.state, ()) for o in t.ops)


def _last_ops(ds: dict[int, RankDump]) -> Iterable[RankOp]:
    for r in sorted(ds):
        ops = [(o, n) for n, t in ds[r].groups.items() for o in (*t.ops, *t.p2p)]
        if ops:
            o, n = max(ops, key=lambda p: p[0].record_id)
            yield RankOp(r, n, o.seq, o.name, o.state, o.frames)


def _straggler(name: str, tracks: dict[int, GroupTrack]) -> Straggler | None:
    if len(tracks) < 2:
        return None
    import numpy as np

    ranks = sorted(tracks)
    index = {r: i for i, r in enumerate(ranks)}
    times: dict[int, list[float]] = {}
    for r, t in tracks.items():
        for seq, ns in t.times:
            times.setdefault(seq, [np.nan] * len(ranks))[index[r]] = ns
    full = np.array([row for row in times.values() if not np.isnan(row).any()], dtype=np.float64)
    if len(full) < STRAGGLER_MIN_SAMPLES:
        return None
    late = full - np.median(full, axis=1, keepdims=True)
    adj = late - np.quantile(late, 0.25, axis=0, keepdims=True)
    means = adj.mean(axis=0)
    top = int(np.argmax(means))
    share = float(np.mean(np.argmax(adj, axis=1) == top))
    excess_ms = float(means[top] - np.median(np.delete(means, top))) / 1e6
    if share >= STRAGGLER_SHARE and excess_ms >= STRAGGLER_MIN_MS:
        return Straggler(ranks[top], name, share, excess_ms, len(full))
    return None
