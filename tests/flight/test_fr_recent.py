"""A dump decoded newest entries first (``doctor.flight.recent``) reduces to exactly what the
whole decode gives: for torch's own dumps (gloo, written by torch 2.13; NCCL, from NVRx),
for the benchmark's, for groups sparse enough that older entries are needed, for strings
first pickled in the entries that were skipped, and for any dump hypothesis makes. Hostile
bytes are a ``DumpError`` or a reduced dump, as before."""

from __future__ import annotations

import importlib
import pickle
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.flight import dump, safe_pickle
from doctor.flight import recent as recent_module
from doctor.flight.align import align
from doctor.flight.dump import DumpError, RankDump, reduce_dump_raw
from doctor.flight.recent import HEAD, Load, RecentEntries, Unexpected

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
SHARED = REPO.parent / "shared" / "data" / "fr-nvrx"
TORCH_DUMPS = sorted(p for p in (FIXTURES / "fr").glob("gloo-*/rank_*"))


def _whole(rank: int, data: bytes, monkeypatch: pytest.MonkeyPatch) -> object:
    """What the reducer gives when it decodes the whole dump (the path before this one)."""

    def refuse(data: bytes, keep: int, load: Load | None = None) -> RecentEntries:
        raise Unexpected("decode it whole")

    with monkeypatch.context() as m:
        m.setattr(dump, "RecentEntries", refuse)
        return _outcome(rank, data)


def _outcome(rank: int, data: bytes) -> object:
    """The reduced dump (or the reason there is none), the same when the dump is read in
    pieces: a buffer of its size holds only what the decoder asked ``load`` for, the rest
    bytes no pickle has (any read of them fails the decode)."""
    poisoned = bytearray(b"\xff" * len(data))

    def load(lo: int, hi: int) -> None:
        poisoned[lo:hi] = data[lo:hi]

    decoded: list[bool] = []  # whether each read fell back to decoding the whole dump
    with pytest.MonkeyPatch.context() as m:
        real = dump.decode
        m.setattr(dump, "decode", lambda d: decoded.append(True) or real(d))
        whole = _reduced(rank, data, None)
        fell_back = bool(decoded)
        assert _reduced(rank, poisoned, load) == whole
    assert decoded.count(True) == 2 * fell_back, "read in pieces, it fell back"
    return whole


def _reduced(rank: int, data: bytes | bytearray, load: Load | None) -> object:
    try:
        return reduce_dump_raw(rank, f"rank_{rank}", data, load)
    except DumpError as exc:
        return f"DumpError: {exc}"


def _newest_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the reducer falls back to decoding the whole dump."""

    def whole(data: bytes) -> dict[str, Any]:
        raise AssertionError("the whole dump was decoded")

    monkeypatch.setattr(dump, "decode", whole)


def test_torch_dumps_have_the_layout_and_decode_the_same() -> None:
    assert TORCH_DUMPS, "the recorded gloo dumps are missing"
    for path in TORCH_DUMPS:
        data = path.read_bytes()
        full = safe_pickle.loads(data)
        for keep in (1, 3, 10_000):
            recent = RecentEntries(data, keep)
            got = recent.doc["entries"]
            assert got == full["entries"][-len(got) :], path
            assert {k: v for k, v in recent.doc.items() if k != "entries"} == {
                k: v for k, v in full.items() if k != "entries"
            }
            assert recent.older() == full["entries"]


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/fr-nvrx is not here")
def test_nccl_dumps_of_a_real_job_reduce_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    for path in sorted(SHARED.glob("*/_dump_*"))[:16]:
        data = path.read_bytes()
        assert _outcome(0, data) == _whole(0, data, monkeypatch), path


def _dump(entries: int, every: int, seed: int = 0) -> dict[str, Any]:
    """A dump of two groups: "tp" most of the time, "world" once in ``every`` entries."""
    rnd = random.Random(seed)
    seq = {"tp": 0, "world": 0}
    es = []
    for i in range(entries):
        pg = "world" if i % every == every - 1 else "tp"
        seq[pg] += 1
        es.append(
            {
                "record_id": i,
                "pg_id": 0 if pg == "world" else 1,
                "process_group": (pg, "default_pg" if pg == "world" else "TP"),
                "collective_seq_id": seq[pg],
                "op_id": seq[pg],
                "profiling_name": "gloo:all_reduce",
                "time_created_ns": 10**18 + i * 10**6 + rnd.randrange(1000),
                "input_sizes": [[4]],
                "output_sizes": [[4]],
                "input_dtypes": ["Float"],
                "state": "completed" if i < entries - 2 else "scheduled",
                "frames": [{"name": "train", "filename": "train.py", "line": 7}],
            }
        )
    status = {
        str(pg_id): {"last_enqueued_collective": seq[pg], "last_completed_collective": seq[pg] - 1}
        for pg, pg_id in (("world", 0), ("tp", 1))
    }
    config = {
        "world": {"name": "world", "desc": "default_pg", "ranks": "[0, 1]"},
        "tp": {"name": "tp", "desc": "TP", "ranks": "[0, 1]"},
    }
    return {"version": "2.10", "pg_config": config, "pg_status": status, "entries": es}


def test_a_sparse_group_takes_the_older_entries_not_the_whole_decode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = pickle.dumps(_dump(1500, every=20), 2)
    want = _whole(0, data, monkeypatch)
    assert isinstance(want, tuple)
    _newest_only(monkeypatch)
    monkeypatch.setattr(dump, "RECENT", 100)  # the world group's MIN_TIMES pairs lie further back
    assert _outcome(0, data) == want


def test_a_string_first_pickled_in_the_skipped_entries_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = _dump(600, every=4)
    late = "checkpoint_barrier_call_site"  # one object: the pickler memoizes it once
    for i in (HEAD + 100, 598):
        doc["entries"][i]["frames"] = [{"name": late, "filename": "ckpt.py", "line": 3}]
    data = pickle.dumps(doc, 2)
    recent = RecentEntries(data, 8)
    assert recent.doc["entries"] == doc["entries"][-8:]
    want = _whole(0, data, monkeypatch)
    _newest_only(monkeypatch)
    assert _outcome(0, data) == want


def test_the_benchmark_dumps_need_no_more_than_the_newest_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The issue 26 layout (a world group one entry in eight) is reduced from ``RECENT``
    entries, without ``older()``."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    bench = importlib.import_module("bench_analyze")
    data = pickle.dumps(bench.dump_of(5, 64, 2000, 5), 2)
    want = _whole(5, data, monkeypatch)
    monkeypatch.setattr(RecentEntries, "older", lambda self: pytest.fail("older() was called"))
    _newest_only(monkeypatch)
    assert _outcome(5, data) == want


@settings(max_examples=30, deadline=None)
@given(
    entries=st.integers(0, 400),
    every=st.integers(1, 30),
    recent=st.integers(1, 300),
    seed=st.integers(0, 3),
    step=st.integers(1, 5000),
)
def test_any_dump_reduces_the_same_newest_first(
    entries: int, every: int, recent: int, seed: int, step: int
) -> None:
    """Read in pieces too, ``step`` bytes at a time from the start: the entries key, the
    first entry and the head's entries fall across the steps' edges anywhere."""
    data = pickle.dumps(_dump(entries, every, seed), 2)
    with pytest.MonkeyPatch.context() as m:
        want = _whole(0, data, m)
        m.setattr(dump, "RECENT", recent)
        m.setattr(recent_module, "_STEP", step)
        assert _outcome(0, data) == want


def test_a_dump_cut_anywhere_near_its_first_entry_is_a_skip() -> None:
    data = pickle.dumps(_dump(80, every=5), 2)
    at = data.find(b"entries")
    for cut in range(at - 8, at + 400):
        got = _outcome(0, data[:cut])
        assert isinstance(got, str) and got.startswith("DumpError: truncated"), (cut, got)


@settings(max_examples=60, deadline=None)
@given(at=st.integers(0, 10**6), value=st.integers(0, 255), cut=st.booleans())
def test_hostile_bytes_are_a_skip_or_a_reduced_dump(at: int, value: int, cut: bool) -> None:
    data = bytearray(pickle.dumps(_dump(300, every=5), 2))
    at %= len(data)
    if cut:
        del data[at:]
    else:
        data[at] = value
    got = _outcome(0, bytes(data))
    assert isinstance(got, str) or isinstance(got[0], RankDump)


def _late_world(rank: int, late_ms: int, entries: int, every: int) -> bytes:
    """Rank ``rank``'s dump of a 4-rank job whose world group it enqueues ``late_ms`` late,
    every other collective (a rank late by the same time in every one is a clock offset)."""
    doc = _dump(entries, every, seed=rank)
    for cfg in doc["pg_config"].values():
        cfg["ranks"] = "[0, 1, 2, 3]"
    for e in doc["entries"]:
        e["profiling_name"] = "nccl:all_reduce"  # gloo's dumps do not say what completed
        if e["process_group"][0] == "world" and e["collective_seq_id"] % 2:
            e["time_created_ns"] += late_ms * 10**6
    return pickle.dumps(doc, 2)


def test_a_sparse_group_keeps_the_pairs_of_the_window_and_its_straggler_is_named() -> None:
    """The world group (one entry in eight) keeps the pairs of the newest ``WINDOW`` entries,
    fewer than ``TIMES`` (so 512 entries need no decoding), and a rank that enqueues half of
    its collectives 20 ms late is still named from them; a group sparser than ``MIN_TIMES`` in
    the window takes older pairs up to ``MIN_TIMES``."""
    dumps = [
        dump.reduce_dump(r, f"rank_{r}", _late_world(r, 20 if r == 2 else 0, 1500, every=8))
        for r in range(4)
    ]
    world = dumps[0].groups["world"]
    assert dump.MIN_TIMES <= len(world.times) // 2 == dump.WINDOW // 8 < dump.TIMES
    assert len(dumps[0].groups["tp"].times) // 2 == dump.TIMES
    assert [(s.rank, s.group) for s in align(dumps).stragglers] == [(2, "world")]
    sparse = reduce_dump_raw(0, "rank_0", _late_world(0, 0, 1500, every=40))[0]
    assert len(sparse.groups["world"].times) // 2 == dump.MIN_TIMES


@settings(max_examples=200, deadline=None)
@given(
    first=st.integers(0, 40_000),
    step=st.integers(1, 64),
    count=st.integers(1, 3000),
    change=st.none() | st.tuples(st.integers(0, 10**6), st.integers(-3, 3)),
)
def test_a_rank_list_reads_the_same_by_its_shape_as_parsed(
    first: int, step: int, count: int, change: tuple[int, int] | None
) -> None:
    """pg_config's long rank lists are recognised as progressions by comparing their text
    (no hash of 190 kB); any list, one rank changed or not, reads as the parser reads it."""
    ranks = list(range(first, first + step * count, step))
    if change is not None:
        ranks[change[0] % count] += change[1]
    text = str(ranks)
    assert dump._compact_text(text) == dump._progression(dump._ranks_text(text))
