"""Divergence kinds that the real fixtures do not cover, on hand-built tracks."""

from __future__ import annotations

import random
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.flight import align as align_module
from doctor.flight.align import STRAGGLER_MIN_SAMPLES, _columns, _late_rank, align
from doctor.flight.divergence import mismatch
from doctor.flight.dump import GroupTrack, Op, RankDump


def _op(seq: int, name: str, rec: int, sizes=((4,),), out=None, state="scheduled") -> Op:
    return Op(seq, name, sizes, out if out is not None else sizes, ("Float",), state, rec, None)


def _dump(rank: int, groups: dict[str, GroupTrack], config) -> RankDump:
    return RankDump(rank, f"rank_{rank}", "2.10", "nccl", config, groups, {})


def test_group_order_mismatch() -> None:
    # GIVEN two ranks in groups A and B; rank 0 scheduled A then B, rank 1 B then A,
    # and neither completed either (a cross-group deadlock)
    cfg = {"A": ("a", (0, 1)), "B": ("b", (0, 1))}
    d0 = _dump(
        0,
        {
            "A": GroupTrack("A", "a", "1", 5, 4, (_op(5, "all_reduce", 10),), ()),
            "B": GroupTrack("B", "b", "2", 3, 2, (_op(3, "all_reduce", 11),), ()),
        },
        cfg,
    )
    d1 = _dump(
        1,
        {
            "A": GroupTrack("A", "a", "1", 5, 4, (_op(5, "all_reduce", 21),), ()),
            "B": GroupTrack("B", "b", "2", 3, 2, (_op(3, "all_reduce", 20),), ()),
        },
        cfg,
    )
    fa = align([d0, d1])
    (g,) = fa.divergent
    assert g.divergence.kind == "group_order" and g.divergence.tie
    assert g.divergence.culprits == (0, 1)


def test_all_to_all_split_inconsistency() -> None:
    # GIVEN an all_to_all where the ranks together send 10 elements but receive 12
    cfg = {"E": ("expert", (0, 1))}
    ops = {
        0: _op(7, "all_to_all", 1, ((4,),), ((6,),)),
        1: _op(7, "all_to_all", 1, ((6,),), ((6,),)),
    }
    dumps = [
        _dump(r, {"E": GroupTrack("E", "expert", "1", 7, 6, (ops[r],), ())}, cfg) for r in (0, 1)
    ]
    (g,) = align(dumps).divergent
    assert g.divergence.kind == "mismatch" and "10 elements sent, 12 received" in g.divergence.text


def test_uneven_all_to_all_sizes_are_not_a_mismatch() -> None:
    cfg = {"E": ("expert", (0, 1))}
    ops = {
        0: _op(7, "all_to_all", 1, ((4,),), ((6,),)),
        1: _op(7, "all_to_all", 1, ((8,),), ((6,),)),
    }
    dumps = [
        _dump(r, {"E": GroupTrack("E", "expert", "1", 7, 6, (ops[r],), ())}, cfg) for r in (0, 1)
    ]
    assert align(dumps).divergent == ()


def test_not_started_where_peers_started() -> None:
    cfg = {"T": ("tp", (0, 1, 2))}
    states = {0: "started", 1: "started", 2: "scheduled"}
    dumps = [
        _dump(
            r,
            {
                "T": GroupTrack(
                    "T", "tp", "1", 9, None, (_op(9, "all_reduce", 1, state=states[r]),), ()
                )
            },
            cfg,
        )
        for r in (0, 1, 2)
    ]
    (g,) = align(dumps).divergent
    assert (g.divergence.kind, g.divergence.culprits) == ("not_started", (2,))


@settings(max_examples=80, deadline=None)
@given(
    seqs=st.lists(st.integers(0, 40), min_size=0, max_size=12),
    ranks=st.integers(1, 5),
    drop=st.none() | st.tuples(st.integers(0, 4), st.integers(0, 11)),
    shuffle=st.booleans(),
    seed=st.integers(0, 9),
)
def test_time_columns_are_the_same_by_the_fast_path_and_by_dicts(
    seqs: list[int], ranks: int, drop: tuple[int, int] | None, shuffle: bool, seed: int
) -> None:
    """The straggler test's columns: when every rank kept the same sequence numbers in order
    they are sliced from the (seq, time) arrays; otherwise they come from the pairs every rank
    has. Both give what the pairs give (a later pair of a repeated number wins)."""
    rnd = random.Random(seed)
    per_rank = []
    for r in range(ranks):
        mine = list(seqs)
        if drop is not None and drop[0] == r and mine:
            del mine[drop[1] % len(mine)]
        if shuffle and r == ranks - 1:
            rnd.shuffle(mine)
        per_rank.append([(s, rnd.randrange(10**9)) for s in mine])
    times = [array("q", [x for pair in pairs for x in pair]) for pairs in per_rank]
    got = _columns(times)
    pairs = [dict(p) for p in per_rank]
    common = sorted(set(pairs[0]).intersection(*pairs[1:]))
    assert got == (common, [[p[s] for s in common] for p in pairs])


@settings(max_examples=300, deadline=None)
@given(
    cells=st.lists(
        st.lists(
            st.sampled_from([0, 1000]) | st.integers(0, 1000),
            min_size=STRAGGLER_MIN_SAMPLES,
            max_size=10,
        ),
        min_size=2,
        max_size=6,
    )
)
def test_no_rank_is_later_than_the_others_by_more_than_four_spreads(cells: list[list[int]]) -> None:
    """Why the straggler test may skip a group whose every sample's spread S is under a
    quarter of STRAGGLER_MIN_MS: the excess it measures (a rank's mean lateness, less its first
    quartile, over the others' median) is never more than 4 S, whatever the times."""
    samples = min(map(len, cells))
    cols = [[i * 10**7 + c for i, c in enumerate(col[:samples])] for col in cells]
    rows = list(zip(*cols, strict=True))
    spread = max(max(row) - min(row) for row in rows)
    with pytest.MonkeyPatch.context() as m:  # every group's most late rank, however little
        m.setattr(align_module, "STRAGGLER_SHARE", 0.0)
        m.setattr(align_module, "STRAGGLER_MIN_MS", -1e18)
        found = _late_rank("g", list(range(len(cols))), samples, cols, rows)
    assert found is not None and found.median_delay_ms * 1e6 <= 4 * spread


def test_a_mismatch_is_found_whether_equal_values_are_one_object_or_copies() -> None:
    """The aligner skips building signatures when every rank's op holds the same objects
    (the parallel reader shares them); copies of equal values, as a single-process read
    leaves them, are compared by value, and a different size is a mismatch either way."""

    def tracks(sizes_of: list[tuple[tuple[int, ...], ...]]) -> dict[int, GroupTrack]:
        ops = [_op(7, "all_reduce", 1, sizes) for sizes in sizes_of]
        return {r: GroupTrack("0", "default_pg", "0", 7, 6, (o,), ()) for r, o in enumerate(ops)}

    shared = ((1024,),)
    copies = [tuple(tuple(list(s)) for s in shared) for _ in range(4)]
    assert copies[0] == shared and copies[0] is not shared
    assert mismatch(tracks([shared] * 4), "0") is None
    assert mismatch(tracks(copies), "0") is None
    odd = mismatch(tracks([shared, shared, ((2048,),), shared]), "0")
    assert odd is not None and odd.culprits == (2,)
