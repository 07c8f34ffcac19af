"""The whole fleet preflight: sweep, merge, and (``--bench``) the isolating rounds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from doctor.fleet.benchjudge import FleetBench
from doctor.fleet.benchrun import run_bench
from doctor.fleet.merge import FleetReport, exclude_list, merge_fleet
from doctor.fleet.sweep import FleetTarget, sweep
from doctor.model import Finding, Severity
from doctor.remote.reach import Via


def run_fleet(
    target: FleetTarget,
    lane: str,
    timeout: float,
    strict: bool,
    bench: bool,
    env: Mapping[str, str],
    on_answer: Callable[[str], None] | None = None,
    on_round: Callable[[int], None] | None = None,
) -> tuple[FleetReport, FleetBench | None]:
    """The fleet report (with its exclude list) and the benchmark's outcome when asked."""
    report = merge_fleet(target.hosts, sweep(target, lane, timeout, env, on_answer))
    measured: FleetBench | None = None
    failed = ""
    if bench and len(report.answered) >= 2:
        if on_round is not None:
            on_round(len(report.answered))
        got = run_bench(report.answered, target.job if target.via is Via.SLURM else None, env)
        measured, failed = (got, "") if isinstance(got, FleetBench) else (None, got)
    elif bench:
        failed = "the benchmark needs at least two hosts that answered"
    if failed:
        extra = Finding("fleet.bench", Severity.FAIL, "allreduce", failed)
        report = dataclasses.replace(report, findings=(*report.findings, extra))
    culprits = measured.culprit_hosts if measured is not None else ()
    return dataclasses.replace(report, exclude=exclude_list(report, strict, culprits)), measured
