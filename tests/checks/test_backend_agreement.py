"""Preflight and triage say the same about a gloo job: no dump on timeout, 30 minutes."""

from __future__ import annotations

import time
from pathlib import Path

from triage_helpers import start_sleeper

from doctor.checks import diag
from doctor.checks.facts import Facts
from doctor.model import Severity
from doctor.torchjob.backends import GLOO_FLIGHT_RECORDER
from doctor.triage.sources.flight import FlightSource
from doctor.triage.target import RankTarget, Target
from doctor.trust.subproc import stop_all

CPU_HOST = {"torch": "2.13.0+cpu", "nccl": "none (cpu torch build)", "driver": "none (no driver)"}


def test_preflight_on_a_gloo_host_says_what_triage_will_find(tmp_path: Path) -> None:
    # GIVEN a CPU host (gloo) with Flight Recorder turned on
    facts = Facts(env={"TORCH_FR_BUFFER_SIZE": "2000"}, versions=CPU_HOST)
    # WHEN preflight judges it
    (fr,) = diag.check_flight_recorder(facts)
    chain = facts.timeouts  # resolved once, with the host's backend
    # THEN it does not promise a dump on timeout, and the default timeout is gloo's 30 minutes
    assert facts.backend == "gloo"
    assert fr.severity is Severity.INFO and GLOO_FLIGHT_RECORDER in fr.message
    assert chain.seconds("watchdog") == 1800.0
    # AND triage of a gloo rank (no NCCL loaded) that left no dump says the same words
    rank = start_sleeper(tmp_path, {"RANK": "0", "TORCH_FR_BUFFER_SIZE": "2000"}, "rank0")
    try:
        target = Target("j", "h", (RankTarget(0, rank.pid, "h", env={"RANK": "0"}),), 1)
        found = FlightSource(window=0.05).collect(target, time.monotonic() + 2)
    finally:
        stop_all([rank])
    assert any(GLOO_FLIGHT_RECORDER in s.reason for s in found.skipped), found.skipped


def test_an_nccl_host_keeps_the_watchdog_promise() -> None:
    gpu = {"torch": "2.13.0+cu128", "nccl": "2.27.3", "driver": "580.65"}
    facts = Facts(env={}, versions=gpu)
    (fr,) = diag.check_flight_recorder(facts)
    assert facts.backend == "nccl" and fr.severity is Severity.PASS
    assert facts.timeouts.seconds("watchdog") == 600.0
