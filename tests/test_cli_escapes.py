"""Item 7 of issue 14 for the plain lines the commands print beside the verdict.

triage's bundle line names a path built from the job id, its watch lines come back from
a file in the job's folder, collect's summary names the host and job of a host document
and bench's table names the device the driver reported. Each is printed with control
characters escaped and (where rich prints it) never read as markup.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from hostile_text import HOSTILE, assert_inert, hostile_evidence
from rich.console import Console

from doctor.bench.links import GPUS, Topology, params_from_topology
from doctor.bench.model import predict
from doctor.bench.probe import ProbeResult
from doctor.bench.render import format_table
from doctor.bench.result import Measured, Timing, build_result
from doctor.cli.collect import _summary
from doctor.cli.triage import _print
from doctor.triage.snapshot import TriageSnapshot
from doctor.watch.events import summary


def test_triage_bundle_and_watch_lines_are_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a hostile verdict, a bundle and a report whose names carry the hostile job id, two watch
    # events read back from the job's folder: one hostile, one with fields of the wrong type
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "4000")
    evidence, analysis = hostile_evidence(tmp_path)
    events = [
        {"action": "restart", "job": HOSTILE, "reason": HOSTILE, "bundle": HOSTILE},
        {"action": "restart", "verdict": [1], "detection": {"stalled_for": "x"}},
    ]
    # WHEN triage prints them on a terminal
    snapshot = TriageSnapshot(evidence, analysis, 0.0)
    _print(snapshot, False, tmp_path / f"b{HOSTILE}", events, tmp_path / f"r{HOSTILE}")
    # THEN nothing hostile is raw (no markup read, no traceback on the wrong types)
    out = capsys.readouterr().out
    assert_inert(out, shown_at_least=20)
    assert "watch: restart job None: None after 0.0s" in out


def test_watch_stop_line_is_one_escaped_line() -> None:
    # GIVEN a stop event whose job, reason, hosts and bundle are hostile
    event = {"action": "stop", "job": HOSTILE, "reason": HOSTILE, "hosts": [HOSTILE], "bundle": 5}
    # WHEN it is summarised THEN it is one line, every hostile part escaped
    assert_inert(summary(event), shown_at_least=3)


def test_collect_summary_escapes_host_and_job(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a host document whose host and job names are hostile
    _summary({"host": HOSTILE, "job": HOSTILE, "processes": [{"rank": 0, "alive": True}]})
    # WHEN collect prints its summary THEN both are shown escaped
    assert_inert(capsys.readouterr().out, shown_at_least=2)


def test_bench_table_escapes_the_device_name() -> None:
    # GIVEN a result whose device name (from the driver) and model source are hostile
    spec = GPUS["H100"]
    params = params_from_topology(Topology(HOSTILE, 8, spec.nvlinks, spec.nvlink, nvswitch=True))
    times = (Timing(1 << 20, predict(params, 1 << 20).time_us),)
    probe = ProbeResult(alpha_us=100.0, link_gbps=1.0, reduce_gbps=10.0)
    result = build_result(Measured("nccl", 8, probe, times, HOSTILE), params)
    # WHEN the table is printed as bench prints it
    console = Console(file=StringIO(), force_terminal=True, width=4000, highlight=False)
    console.print(format_table(result), markup=False)
    # THEN nothing hostile is raw
    assert_inert(console.file.getvalue(), shown_at_least=2)  # type: ignore[attr-defined]
