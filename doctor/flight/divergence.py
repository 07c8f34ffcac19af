"""Where the members of one process group first disagree: pure functions over tracks.

Each finder looks at every member's ``GroupTrack`` of one group and returns
the first ``Divergence`` of its kind (see ``doctor.flight.align`` for the
kinds and the order they are tried in), or None.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from doctor.flight.dump import GroupTrack, Op
from doctor.ranks import rank_prose

VARIABLE_SIZE_OPS = ("all_to_all", "alltoall", "gather", "scatter", "_v")


@dataclass(frozen=True)
class Divergence:
    """The first place the members of one group disagree."""

    kind: str
    seq: int | None
    op: str
    """The collective to look at: what the culprits issued there (mismatch), or what they
    never scheduled or completed."""
    culprits: tuple[int, ...]
    waiting: tuple[int, ...]
    """Members that wait on the culprits."""
    tie: bool
    text: str


def describe(op: Op) -> str:
    """``all_reduce[1024]/Float``: an op as the divergence texts show it."""
    sizes = ",".join("x".join(map(str, s)) for s in op.in_sizes)
    return f"{op.name}[{sizes}]{'/' + op.dtypes[0] if op.dtypes else ''}"


def signature(op: Op) -> tuple[object, ...]:
    """What must agree across ranks at one sequence number (op, sizes, dtypes)."""
    return (op.name, op.dtypes, None if _variable_size(op.name) else op.in_sizes)


@functools.lru_cache(maxsize=512)
def _variable_size(name: str) -> bool:
    """Whether an op's sizes may differ between ranks; a job has a handful of op names."""
    return any(v in name for v in VARIABLE_SIZE_OPS)


def mismatch(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    """The first sequence number at which members recorded different collectives."""
    by_seq: dict[int, dict[int, Op]] = {}
    for r, t in tracks.items():
        for o in t.ops:
            by_seq.setdefault(o.seq, {})[r] = o
    for seq in sorted(by_seq):
        ops = by_seq[seq]
        first = next(iter(ops.values()))
        if not _same_objects(first, ops.values()):
            votes = Counter(signature(o) for o in ops.values())
            if len(votes) > 1:
                return _vote(name, seq, ops, votes)
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


def _same_objects(first: Op, ops: Iterable[Op]) -> bool:
    """Whether every op's name, dtypes and sizes are ``first``'s very objects: then their
    signatures agree without being built (the reader makes equal values of all ranks one
    object; 880,000 ops at 32,768 ranks)."""
    name, dtypes, sizes = first.name, first.dtypes, first.in_sizes
    return all(o.name is name and o.dtypes is dtypes and o.in_sizes is sizes for o in ops)


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
    majority = tuple(sorted(r for r, o in ops.items() if signature(o) == top))
    odd = tuple(sorted(r for r in ops if r not in majority))
    culprits = tuple(sorted(ops)) if tie else odd
    what = {r: describe(o) for r, o in ops.items()}
    shown = ops[odd[0]] if odd and not tie else ops[majority[0]]
    if tie:
        text = (
            f"pg {name} seq {seq}: "
            + " vs ".join(f"rank {r} {what[r]}" for r in sorted(ops))
            + " (a tie: nothing in this group says which is wrong)"
        )
    else:
        text = (
            f"pg {name} seq {seq}: {rank_prose(odd)} "
            f"issued {', '.join(sorted({what[r] for r in odd}))} "
            f"where {len(majority)} rank{'s' if len(majority) > 1 else ''} "
            f"issued {what[majority[0]]}"
        )
    return Divergence("mismatch", seq, shown.name, culprits, () if tie else majority, tie, text)


def stalled(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    """Ranks that did not complete (or start) what their peers completed."""
    known = {
        r: (t.completed, t.enqueued)
        for r, t in tracks.items()
        if t.completed is not None and t.enqueued is not None
    }
    if len(known) < 2:
        return not_started(tracks, name)
    best = max(done for done, _enq in known.values())
    lag = tuple(sorted(r for r, (done, enq) in known.items() if done < best and done < enq))
    if lag:
        seq = min(known[r][0] for r in lag) + 1
        op = next((o.name for r in lag for o in tracks[r].ops if o.seq == seq), "")
        others = tuple(sorted(r for r in known if r not in lag))
        return Divergence(
            "not_completed",
            seq,
            op,
            lag,
            others,
            False,
            f"pg {name}: {rank_prose(lag)} did not complete seq {seq} ({op or 'op'}), which "
            f"{'peers' if others else 'the group'} completed up to seq {best}",
        )
    return not_started(tracks, name)


def not_started(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    """The first collective some members scheduled but never started on their GPU."""
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
                f"pg {name} seq {seq}: never started on {rank_prose(late)} while peers started it",
            )
    return None


def missing(tracks: dict[int, GroupTrack], name: str) -> Divergence | None:
    """Members that never scheduled a collective their peers reached."""
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
        f"pg {name}: {rank_prose(behind)} never scheduled seq {seq}"
        f"{' (' + op + ')' if op else ''}; {len(ahead)} peer(s) reached seq {front}",
    )


def no_dump(
    tracks: dict[int, GroupTrack], no_dump: tuple[int, ...], name: str
) -> Divergence | None:
    """Members without a dump while every dumped member waits: the silent ones."""
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
        f"{rank_prose(no_dump)} left no dump",
    )
