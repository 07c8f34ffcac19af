"""Complexity guard: the paths that meet the largest jobs stay linear in ranks (run by
``test_complexity.py`` in a pytest of its own).

Time is no guard on a shared 2-core machine, so this counts operations: every Python
line executed and every call made (``sys.settrace``), for the same work at three sizes,
n, 2n and 4n ranks (or hosts). Two figures come out of the counts f:

* the growth exponent, log(f(4n) / f(n)) / log 4: 1 for linear work, 2 for quadratic;
* the quadratic share, (f(4n) - 3 f(2n) + 2 f(n)) / f(4n): with f(n) = a + b n + c n^2
  the numerator is 6 c n^2, zero for linear work whatever its constant and slope, so a
  quadratic path too small yet to move the exponent (one scan of every rank per rank,
  beside a classifier's thousands of steps per rank) still shows.

The counts are deterministic, so the limits need no slack for load. Covered: reading one
dump and a folder of dumps, the aligner, the post-mortem verdict and its JSON, the
multi-host merge (with and without a silent host) and the stack tree. A loop inside one
C call (``x in some_list``) is not counted: the benchmarks
(``benchmarks/bench_analyze.py``, ``bench_multihost_merge.py``) time those.
"""

from __future__ import annotations

import importlib
import json
import math
import pickle
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from clitools import REPO
from triage_helpers import hung_evidence, recorded_stack

from doctor.evidence import Evidence
from doctor.flight import align as align_module
from doctor.flight.align import align
from doctor.flight.dump import RankDump, reduce_dump
from doctor.flight.reader import read_flight
from doctor.remote.document import to_document
from doctor.remote.merge import merge
from doctor.remote.transport import HostAnswer
from doctor.verdict import stacktree
from doctor.verdict.classify import analyse
from doctor.verdict.render import to_json

SMALL = 16
EXPONENT = 1.35
"""Largest growth exponent allowed."""
QUADRATIC = 0.004
"""Largest quadratic share allowed: linear paths measure 0.0013 at most, the quadratic
``last_op`` scan below 0.0086 at 16, 32 and 64 ranks (and more at larger sizes)."""


def operations(work: Callable[[], object]) -> int:
    """Python lines executed and calls made while ``work`` runs."""
    count = 0

    def tracer(_frame: FrameType, _event: str, _arg: Any) -> Any:
        nonlocal count
        count += 1
        return tracer

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def growth(make: Callable[[int], Callable[[], object]], small: int = SMALL) -> tuple[float, float]:
    """The growth exponent and the quadratic share of ``make(n)``'s work (module docstring)."""
    works = [make(small), make(2 * small), make(4 * small)]
    operations(works[0])  # first calls fill caches (lru_cache, imports): count warm runs
    f1, f2, f4 = (operations(w) for w in works)
    return math.log(f4 / f1, 4), (f4 - 3 * f2 + 2 * f1) / f4


def assert_linear(make: Callable[[int], Callable[[], object]], small: int = SMALL) -> None:
    exponent, quadratic = growth(make, small)
    assert exponent < EXPONENT and quadratic < QUADRATIC, (exponent, quadratic)


@pytest.fixture(scope="module")
def bench() -> Iterator[Any]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        yield importlib.import_module("bench_analyze")
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def test_the_guard_tells_linear_from_quadratic() -> None:
    def linear(n: int) -> Callable[[], object]:
        return lambda: [x for x in range(n)]

    def quadratic(n: int) -> Callable[[], object]:
        return lambda: [y for x in range(n) for y in range(x)]

    assert_linear(linear)
    exponent, share = growth(quadratic)
    assert exponent > EXPONENT and share > QUADRATIC


def test_reading_one_dump_does_not_grow_with_its_entries(bench: Any) -> None:
    """The reducer scans newest first and stops: 4x the entries, about the same work."""

    def make(entries: int) -> Callable[[], object]:
        data = pickle.dumps(bench.dump_of(3, 64, entries, -1), 2)
        return lambda: reduce_dump(3, "rank_3", data)

    assert growth(make, 256)[0] < 0.5


def test_reading_a_folder_is_linear_in_dumps(bench: Any, tmp_path: Path) -> None:
    def make(ranks: int) -> Callable[[], object]:
        folder = tmp_path / str(ranks)
        folder.mkdir()
        bench.make_dumps(folder, ranks, 96, ranks // 2)
        return lambda: read_flight([folder])

    assert_linear(make, 8)  # below the parallel reader's threshold: read in-process


def _reduced(bench: Any, ranks: int) -> list[RankDump]:
    return [
        reduce_dump(r, f"rank_{r}", pickle.dumps(bench.dump_of(r, ranks, 96, ranks // 2), 2))
        for r in range(ranks)
    ]


def test_alignment_is_linear_in_ranks(bench: Any) -> None:
    def make(ranks: int) -> Callable[[], object]:
        dumps = _reduced(bench, ranks)
        return lambda: align(dumps)

    assert_linear(make)


def _verdict_json(bench: Any) -> Callable[[int], Callable[[], object]]:
    def make(ranks: int) -> Callable[[], object]:
        evidence = Evidence("job", None, dumps=tuple(_reduced(bench, ranks)))
        return lambda: to_json(evidence, analyse(evidence))

    return make


def test_the_post_mortem_verdict_and_its_json_are_linear_in_ranks(bench: Any) -> None:
    """What ``analyze --json`` does after reading: classify, then one row per rank."""
    assert_linear(_verdict_json(bench))


def test_the_guard_catches_a_scan_per_rank(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``FlightAnalysis.last_op`` as it was: a scan of every rank's last op, once per row
    of the JSON (32,768 ranks: 5e8 steps). Beside the classifier's own work per rank it
    hardly moves the exponent at 64 ranks; the quadratic share shows it."""

    def scan(self: align_module.FlightAnalysis, rank: int) -> align_module.RankOp | None:
        return next((o for o in self.last_ops if o.rank == rank), None)

    monkeypatch.setattr(align_module.FlightAnalysis, "last_op", scan)
    assert growth(_verdict_json(bench))[1] > QUADRATIC


def _answers(hosts: int, silent: int = 0) -> dict[str, HostAnswer]:
    """Host documents of 8 ranks each (rank 5 stuck elsewhere); the last ``silent`` hosts
    did not answer."""
    wait, stuck = recorded_stack("dataloader", 0), recorded_stack("dataloader", 2)
    world = hosts * 8
    answers = {}
    for h in range(hosts):
        name = f"node{h:04d}"
        if h >= hosts - silent:
            answers[name] = HostAnswer(name, None, None, "no answer within 6s")
            continue
        ranks = range(h * 8, h * 8 + 8)
        stacks = [replace(stuck if r == 5 else wait, rank=r) for r in ranks]
        whole = hung_evidence(stacks, world=world)
        part = Evidence(
            "job",
            world,
            processes=tuple(p for p in whole.processes if p.rank in ranks),
            stacks=whole.stacks,
        )
        answers[name] = HostAnswer(name, json.dumps(to_document(part, name, world, ranks)), 1)
    return answers


@pytest.mark.parametrize("silent", [0, 1])
def test_the_multihost_merge_is_linear_in_hosts(silent: int) -> None:
    def make(hosts: int) -> Callable[[], object]:
        answers = _answers(hosts, silent)
        return lambda: merge("job", list(answers), answers, 1.0)

    assert_linear(make, 8)


def test_the_stack_tree_is_linear_in_ranks() -> None:
    """Built, judged and printed (``to_json``: ranks folded into ranges)."""
    wait, stuck = recorded_stack("dataloader", 0), recorded_stack("dataloader", 2)

    def make(ranks: int) -> Callable[[], object]:
        stacks = [replace(stuck if r % 37 == 5 else wait, rank=r) for r in range(ranks)]

        def work() -> object:
            tree = stacktree.build(stacks)
            return stacktree.to_json(tree), stacktree.branch_lines(tree), stacktree.leavers(tree)

        return work

    assert_linear(make, 64)
