"""Reduced dumps sent from worker processes by number (``doctor.flight.transfer``) arrive
whole: every field of every record, equal values of all workers as one object, each value
sent once by each worker, and a folder read in workers gives what reading it here gives."""

from __future__ import annotations

import importlib
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from doctor.flight.dump import RankDump, parse_config, reduce_dump, reduce_dump_raw
from doctor.flight.reader import PARALLEL_FROM, read_flight
from doctor.flight.transfer import Packer, Unpacker

REPO = Path(__file__).resolve().parents[2]
TORCH_DUMPS = sorted((REPO / "tests" / "fixtures" / "fr").glob("gloo-*/rank_*"))


def _sources(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """torch's own gloo dumps (two jobs) and the benchmark's NCCL-style layout."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    bench = importlib.import_module("bench_analyze")
    made = [pickle.dumps(bench.dump_of(r, 64, 2000, 5), 2) for r in (5, 6, 7)]
    return [p.read_bytes() for p in TORCH_DUMPS] + made


def test_dumps_sent_by_two_workers_arrive_whole_and_share_equal_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN reduced dumps of torch's gloo dumps and the benchmark's, and two workers
    reduced = [reduce_dump_raw(r, f"rank_{r}", d) for r, d in enumerate(_sources(monkeypatch))]
    assert len(reduced) >= 10
    workers, parent = [Packer(), Packer()], Unpacker()
    # WHEN the workers take turns, each sending its results through a pickle as a pool does
    got = [
        parent.unpack(pickle.loads(pickle.dumps(workers[i % 2].pack(d, raw))))
        for i, (d, raw) in enumerate(reduced)
    ]
    # THEN every field of every record is what reading here gives (dataclass equality)
    assert got == [replace(d, config=parse_config(raw)) for d, raw in reduced]
    # AND equal values of different dumps and workers are one object
    frames = [o.frames for d in got[-3:] for g in d.groups.values() for o in g.ops if o.frames]
    assert len(frames) >= 6 and all(f is frames[0] for f in frames if f == frames[0])
    names = [o.name for d in got for g in d.groups.values() for o in g.ops]
    assert all(n is next(m for m in names if m == n) for n in names)
    configs = [ranks for d in got for _desc, ranks in d.config.values()]
    assert all(r is next(s for s in configs if s == r) for r in configs)


def test_a_worker_sends_each_value_once() -> None:
    # GIVEN one worker that already sent a reduced dump
    data = TORCH_DUMPS[0].read_bytes()
    worker, parent = Packer(), Unpacker()
    first = worker.pack(*reduce_dump_raw(0, "rank_0", data))
    # WHEN it sends the same rank's dump again
    again = worker.pack(*reduce_dump_raw(0, "rank_0", data))
    # THEN the second carries numbers only, and both arrive equal
    assert first[1] and again[1] == []
    assert parent.unpack(first) == parent.unpack(again)


def test_a_folder_read_in_workers_is_what_reading_it_here_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a folder of more dumps than the parallel path starts at, of different layouts
    sources = _sources(monkeypatch)
    for r in range(PARALLEL_FROM + 6):
        (tmp_path / f"rank_{r}").write_bytes(sources[r % len(sources)])
    # WHEN it is read (in worker processes)
    read = read_flight([tmp_path])
    # THEN each dump is the one reduce_dump gives for its file, in rank order
    here: list[RankDump] = [
        reduce_dump(r, f"rank_{r}", (tmp_path / f"rank_{r}").read_bytes())
        for r in range(PARALLEL_FROM + 6)
    ]
    assert sorted(read.dumps, key=lambda d: d.rank) == here and not read.skipped


def test_a_stray_copy_of_the_worker_state_is_not_reused() -> None:
    # GIVEN the packer of a process (as a forked worker inherits its parent's module state)
    from doctor.flight import reader

    parent = reader._packer()
    # WHEN a process with another pid asks for its packer
    parent.pid = -1
    # THEN it gets a new numbering, not the copy
    assert reader._packer() is not parent and reader._packer() is reader._packer()
