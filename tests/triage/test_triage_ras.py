"""NCCL RAS read live: the client protocol against a replay of NVIDIA's recorded reports."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from ras_server import ras_replay

from doctor.evidence import Evidence
from doctor.logs import kinds
from doctor.model import HangClass
from doctor.triage.sources.ras import RasError, RasSource, query_ras, ras_address
from doctor.triage.target import RankTarget, Target
from doctor.verdict.classify import classify

REAL = Path(__file__).parents[1] / "fixtures" / "real"
DEAD = (REAL / "ras-doc-dead-process" / "ras.txt").read_text()
JSON = (REAL / "ras-doc-json-missing-rank" / "ras.json").read_text()


def target(port: int, pid: int | None = None) -> Target:
    env = {"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}
    rank = RankTarget(0, pid or os.getpid(), "h", env=env)
    return Target("job", "h", (rank,), 32)


def test_the_client_speaks_ras_protocol_and_reads_the_report() -> None:
    with ras_replay(DEAD) as (port, received):
        text, cut = query_ras(("127.0.0.1", port), deadline=time.monotonic() + 10)
    assert received == ["CLIENT PROTOCOL 2", "TIMEOUT 5", "STATUS"]
    assert text == DEAD and not cut


def test_json_where_the_version_has_it_text_where_it_does_not() -> None:
    with ras_replay(DEAD, JSON) as (port, received):
        text, _ = query_ras(("127.0.0.1", port), deadline=time.monotonic() + 10, json=True)
    assert text == JSON and "SET FORMAT json" in received
    with ras_replay(DEAD) as (port, received):  # NCCL before 2.28.7
        text, _ = query_ras(("127.0.0.1", port), deadline=time.monotonic() + 10, json=True)
    assert text == DEAD


def test_a_listener_that_never_answers_is_bounded_by_the_deadline() -> None:
    with ras_replay(DEAD, answer=False) as (port, _received):
        started = time.monotonic()
        with pytest.raises(RasError):
            query_ras(("127.0.0.1", port), deadline=started + 0.5)
    assert time.monotonic() - started < 3


def test_the_source_turns_the_report_into_a_rank_loss_verdict() -> None:
    # GIVEN this process holding a RAS listener that reports rank 21 dead
    with ras_replay(DEAD) as (port, _received):
        got = RasSource({}).collect(target(port), time.monotonic() + 10)
    # THEN the events are RAS's, and the verdict names the dead rank
    assert {e.kind for e in got.logs} == {kinds.RAS_DEAD, kinds.RAS_MISSING}
    verdict = classify(Evidence("job", 32, logs=got.logs))
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.RANK_LOSS, (21,))


def test_another_jobs_ras_is_not_read_and_no_ras_is_no_problem() -> None:
    with ras_replay(DEAD) as (port, received):
        got = RasSource({}).collect(target(port, pid=1), time.monotonic() + 10)
    assert received == [] and "not one of this job's ranks" in got.skipped[0].reason
    with ras_replay(DEAD) as (port, _):
        free = port
    assert RasSource({}).collect(target(free), time.monotonic() + 5) == type(got)()
    assert RasSource({"NCCL_DOCTOR_RAS": "0"}).collect(target(free), 0).logs == ()


def test_ras_address_forms() -> None:
    assert ras_address({}) == ("localhost", 28028)
    assert ras_address({"NCCL_RAS_ADDR": "10.0.0.1:3000"}) == ("10.0.0.1", 3000)
    assert ras_address({"NCCL_RAS_ADDR": "[::1]:3001"}) == ("::1", 3001)


def test_counts_singled_out_are_asked_twice_and_frozen_counts_are_a_stuck_communicator() -> None:
    # GIVEN a RAS that keeps answering NVIDIA's sample of six ranks one operation behind
    counts = (REAL / "ras-doc-counts-in-flight" / "ras.txt").read_text()
    with ras_replay(counts) as (port, received):
        got = RasSource({}, window=0.2).collect(target(port), time.monotonic() + 10)
    # THEN RAS was asked twice across the window, and counts that did not move name the six
    assert received.count("STATUS") == 2
    verdict = classify(Evidence("job", 32, logs=got.logs))
    assert (verdict.hang_class, verdict.culprit_ranks) == (
        HangClass.COLLECTIVE_MISMATCH,
        (0, 2, 3, 4, 5, 7),
    )
