"""Commands are plain module-level functions: importable, callable, and sharing their types."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from doctor.cli import app
from doctor.cli.analyze import analyze
from doctor.cli.launch import launch
from doctor.cli.preflight import preflight
from doctor.jobconfig.lanes import Lane

GLOO = Path(__file__).resolve().parents[1] / "fixtures" / "fr" / "gloo-wrong-collective"


def test_analyze_can_be_called_directly(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the command function itself, no CLI runner
    # WHEN it judges the wrong-collective dumps
    with pytest.raises(typer.Exit) as ended:
        analyze([GLOO], as_json=True)
    # THEN it exits 1 (a hang) and prints the triage JSON
    assert ended.value.exit_code == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["verdict"]["hang_class"], doc["verdict"]["culprit_ranks"]) == (
        "collective_mismatch",
        [2],
    )


def test_preflight_and_launch_take_the_same_lane_type() -> None:
    lanes = {typing.get_type_hints(f)["lane"] for f in (preflight, launch)}
    assert lanes == {Lane | None}


def test_an_unknown_lane_is_a_usage_error_for_launch_too() -> None:
    res = CliRunner().invoke(app, ["launch", "--lane", "two-node", "--", "true"])
    assert res.exit_code == 2
    assert "two-node" in res.output and "Traceback" not in res.output
