"""The ordered registry of check families, and the one function preflight calls.

Order is the report's order: what breaks bootstrap first (env, lane, net),
then what breaks recovery (nvls, plugin, timeout), then diagnosability,
hardware and versions. ``gpu`` and ``bench`` belong to the bandwidth issue.
"""

from __future__ import annotations

from collections.abc import Callable

from doctor.checks import bench, diag, env, gpu, lane, net, nvls, plugin, stack, timeouts
from doctor.checks.facts import Facts
from doctor.checks.report import Report
from doctor.model import Finding, Severity

Check = Callable[[Facts], list[Finding]]

FAMILIES: tuple[tuple[str, Check], ...] = (
    ("env", env.run),
    ("lane", lane.run),
    ("net", net.run),
    ("nvls", nvls.run),
    ("plugin", plugin.run),
    ("timeout", timeouts.run),
    ("diag", diag.run),
    ("gpu", gpu.run),
    ("bench", bench.run),
    ("stack", stack.run),
)


def family(check_id: str) -> str:
    """``env.unknown`` -> ``env``; ``nvlink.*`` findings group with ``gpu``."""
    head = check_id.split(".", 1)[0]
    return "gpu" if head == "nvlink" else head


def run_family(name: str, check: Check, facts: Facts) -> list[Finding]:
    """One family's findings; a bug in one family costs its findings, never the whole report."""
    try:
        return check(facts)
    except Exception as exc:  # a preflight that dies tells the user nothing
        return [
            Finding(
                f"{name}.internal-error",
                Severity.FAIL,
                name,
                f"the {name} checks crashed ({type(exc).__name__}: {exc}); "
                "the other families ran. Please report this as a bug.",
            )
        ]


def run_checks(facts: Facts) -> Report:
    """Every family in order; the report carries the timeout chain they judged and the lane
    source."""
    findings = [finding for name, check in FAMILIES for finding in run_family(name, check, facts)]
    return Report(
        facts.lane,
        tuple(findings),
        lane_source=facts.lane_source,
        conf_files=tuple(facts.conf_files),
        timeouts=facts.timeouts,
    )
