"""``bench.allreduce``: the verdict over a result, and when it runs."""

from __future__ import annotations

import pytest

from doctor.bench.model import params_from_probe
from doctor.bench.probe import ProbeResult
from doctor.bench.result import BenchResult, Measured, Timing, build_result
from doctor.checks import bench
from doctor.checks.facts import BenchFacts, Facts
from doctor.model import Severity

PROBE = ProbeResult(alpha_us=100.0, link_gbps=1.0, reduce_gbps=10.0)


def result_at(efficiency: float, backend: str = "gloo") -> BenchResult:
    params = params_from_probe(PROBE, 4)
    sizes = [1 << k for k in range(18, 27, 2)]
    times = []
    for size in sizes:
        predicted = build_result(Measured(backend, 4, PROBE, (Timing(size, 1.0),)), params).rows[0]
        # time such that measured busbw = efficiency * predicted busbw
        times.append(Timing(size, size * 1.5 / (predicted.predicted_busbw_gbps * efficiency * 1e3)))
    return build_result(Measured(backend, 4, PROBE, tuple(times)), params)


def test_passes_at_the_model() -> None:
    finding = bench.judge(result_at(1.0), 0.7, {})
    assert finding.severity is Severity.PASS
    assert "100% of the model" in finding.message


def test_fails_below_the_fraction_naming_size_ranks_and_causes() -> None:
    finding = bench.judge(result_at(0.4), 0.7, {})
    assert finding.severity is Severity.FAIL
    assert finding.subject == "ranks 0-3 (gloo, cpu)"
    assert "40% of the model at 4MB-64MB, below 70%" in finding.message
    assert "Likely causes: other work on the same cores" in finding.message


def test_nccl_causes_name_the_variables_that_are_set() -> None:
    env = {"NCCL_P2P_DISABLE": "1", "NCCL_MAX_NCHANNELS": "2"}
    finding = bench.judge(result_at(0.4, backend="nccl"), 0.7, env)
    assert "NCCL_P2P_DISABLE=1 forces traffic through host memory" in finding.message
    assert "NCCL_MAX_NCHANNELS=2 limits what NCCL may use" in finding.message
    assert "PCIe fallback" in finding.message and "too few channels" in finding.message


@pytest.mark.parametrize(
    ("raw", "expected"), [("", 0.7), ("0.5", 0.5), ("abc", 0.7), ("0", 0.7), ("3", 0.7)]
)
def test_minimum_fraction_is_configurable(raw: str, expected: float) -> None:
    env = {bench.MIN_EFFICIENCY_ENV: raw} if raw else {}
    assert bench.min_efficiency(env) == expected


def test_a_configured_fraction_changes_the_verdict() -> None:
    result = result_at(0.6)
    assert bench.judge(result, bench.min_efficiency({}), {}).severity is Severity.FAIL
    lenient = bench.min_efficiency({bench.MIN_EFFICIENCY_ENV: "0.5"})
    assert bench.judge(result, lenient, {}).severity is Severity.PASS


def test_skipped_unless_asked_for() -> None:
    [finding] = bench.run(Facts(env={}))
    assert finding.severity is Severity.SKIP
    assert "preflight --bench" in finding.message


@pytest.mark.parametrize(
    ("outcome", "severity", "words"),
    [
        (BenchFacts(None, "no free port"), Severity.FAIL, "could not run: no free port"),
        (BenchFacts(None), Severity.SKIP, "rank 0 of this job reports it"),
        (BenchFacts(result_at(0.4)), Severity.FAIL, "40% of the model"),
    ],
)
def test_the_verdict_is_a_pure_function_of_the_gathered_outcome(outcome, severity, words) -> None:
    # GIVEN what `preflight --bench` measured, gathered beforehand
    # WHEN the check judges it THEN it reaches its verdict without running anything
    [finding] = bench.run(Facts(env={}, bench=outcome))
    assert finding.severity is severity and words in finding.message
