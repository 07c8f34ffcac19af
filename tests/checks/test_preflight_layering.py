"""Preflight's contract: checks judge facts; the timeout chain is resolved once, below both."""

from __future__ import annotations

import ast
from pathlib import Path

from preflight_helpers import facts

from doctor.checks.registry import run_checks

REPO = Path(__file__).resolve().parents[2]
MAY_IMPORT_CHECKS = {
    "doctor/cli/preflight.py",
    "doctor/cli/fleethost.py",  # one host's part of `preflight --job/--hosts`
    "doctor/launch/prologue.py",
}
FLEET = "doctor/fleet/"
"""Preflight across hosts: its documents carry the checks' facts and findings."""


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_nothing_under_doctor_but_the_preflight_command_and_launch_imports_the_checks() -> None:
    # GIVEN every module of the package outside checks/
    offenders = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "doctor").rglob("*.py")
        if str(p.relative_to(REPO)) not in MAY_IMPORT_CHECKS
        and not str(p.relative_to(REPO)).startswith(FLEET)
        and any(n == "doctor.checks" or n.startswith("doctor.checks.") for n in _imports(p))
    )
    # THEN none of them reaches into preflight (the in-rank wrapper least of all)
    assert offenders == []


def test_the_timeout_chain_is_resolved_once_and_reported_as_judged() -> None:
    # GIVEN facts with a restart wrapper whose hard timeout outlasts the collective timeout
    f = facts(toml='[distributed]\ntimeout = "60s"\n[restart]\nenabled = true\n')
    # WHEN every check runs
    report = run_checks(f)
    # THEN the report carries the very chain the timeout checks judged, as a typed value
    assert report.timeouts is f.timeouts
    assert report.timeouts.seconds("watchdog") == 60
    failed = {x.check for x in report.findings if x.severity.value == "fail"}
    assert "timeout.watchdog-vs-hard" in failed
    assert report.to_json()["timeouts"]["layers"]["watchdog"]["seconds"] == 60
