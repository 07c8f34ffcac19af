"""The fleet report for a terminal (short at any size) and as versioned JSON.

The table has one row per difference (the hosts, folded: ``h[4,17]``, and what
they have against what the others have) and per finding that holds everywhere
at warn or fail, at most ``MAX_ROWS``; the rest is counted, never listed. 2,000
hosts print as few lines as 6.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from doctor.checks.render import MARKS
from doctor.fleet.benchjudge import FleetBench, bench_findings, bench_json
from doctor.fleet.merge import SCHEMA, FleetReport
from doctor.model import Finding, Severity
from doctor.remote.hosts import fold
from doctor.trust.safe_text import safe_text

MAX_ROWS = 16
MAX_CELL = 160


NORM_CELL = 48


def _cut(text: str, limit: int = MAX_CELL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rows(report: FleetReport, bench: FleetBench | None) -> list[tuple[Severity, str, str, str]]:
    """(severity, hosts, what, finding) for every row the table could show, worst first."""
    n = len(report.answered)
    rows = []
    for f in report.findings:
        if f.check == "fleet.differs":
            continue
        if f.check == "fleet.unreachable":
            rows.append((f.severity, f.subject, "unreachable", f.message))
        elif f.severity in (Severity.FAIL, Severity.WARN):
            rows.append((f.severity, f"all {n}", f"{f.check} · {f.subject}", f.message))
    for d in report.differences:
        if d.severity not in (Severity.FAIL, Severity.WARN):
            continue  # passes that differ in wording (a GPU count in a subject): --json
        for g in d.outliers:
            what = f"{g.value}  (the other {len(d.norm.hosts)}: {_cut(d.norm.value, NORM_CELL)})"
            rows.append((d.severity, fold(g.hosts), d.key, what))
    for f in bench_findings(bench) if bench is not None else []:
        rows.append(
            (f.severity, f.subject if f.check != "fleet.bench" else "all", f.check, f.message)
        )
    rows.sort(key=lambda r: r[0].rank)
    return rows


def fleet_renderable(report: FleetReport, bench: FleetBench | None = None) -> RenderableType:
    """The table, then the summary line and the exclude line."""
    rows = _rows(report, bench)
    table = Table(title="nccl-doctor fleet preflight", title_justify="left", expand=True)
    table.add_column("", no_wrap=True, width=6)
    table.add_column("hosts", no_wrap=True, max_width=28, overflow="ellipsis")
    table.add_column("check · subject", max_width=30, overflow="fold")
    table.add_column("finding", ratio=1, overflow="fold")
    for severity, hosts, what, finding in rows[:MAX_ROWS]:
        mark, style = MARKS[severity]
        table.add_row(
            Text(mark, style=style),
            safe_text(hosts),
            safe_text(_cut(what)),
            safe_text(_cut(finding)),
        )
    parts: list[RenderableType] = [table]
    minor = sum(d.severity not in (Severity.FAIL, Severity.WARN) for d in report.differences)
    if len(rows) > MAX_ROWS or minor:
        more = f"{len(rows) - MAX_ROWS} more rows, " if len(rows) > MAX_ROWS else ""
        parts.append(Text(f"… {more}{minor} differences at info or pass: --json lists them all"))
    parts.append(summary_line(report, bench))
    if report.exclude:
        parts.append(safe_text(f"exclude: {fold(report.exclude)}"))
    return Group(*parts)


def _verdict(findings: list[Finding]) -> str:
    if any(f.severity is Severity.FAIL for f in findings):
        return "FAIL"
    return "WARN" if any(f.severity is Severity.WARN for f in findings) else "OK"


def summary_line(report: FleetReport, bench: FleetBench | None) -> Text:
    findings = all_findings(report, bench)
    verdict = _verdict(findings)
    odd = {h for d in report.differences for g in d.outliers for h in g.hosts}
    clean = len(report.answered) - len(odd)
    style = {"FAIL": "bold red", "WARN": "bold yellow", "OK": "bold green"}[verdict]
    line = Text(f"fleet preflight {verdict}", style=style)
    line.append(
        safe_text(
            f": {len(report.asked)} hosts asked, {len(report.answered)} answered, "
            f"{len(report.unreachable)} unreachable; {len(odd)} differ"
            + (f" ({fold(odd)})" if odd else "")
            + f", {clean} agree on everything; {len(report.everywhere)} findings hold everywhere"
        )
    )
    return line


def all_findings(report: FleetReport, bench: FleetBench | None) -> list[Finding]:
    """What the exit code is judged on: the fleet's findings and the benchmark's."""
    return [*report.findings, *(bench_findings(bench) if bench is not None else [])]


def to_json(report: FleetReport, bench: FleetBench | None = None) -> dict[str, Any]:
    """The ``nccl-doctor/fleet-preflight/v1`` document."""
    findings = all_findings(report, bench)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "hosts": {
            "asked": len(report.asked),
            "answered": len(report.answered),
            "nodes": fold(report.asked),
            "unreachable": dict(report.unreachable),
        },
        "everywhere": [f.to_json() for f in report.everywhere],
        "differences": [
            {
                "kind": d.kind,
                "key": d.key,
                "severity": d.severity.value,
                "norm": {"value": d.norm.value, "count": len(d.norm.hosts)},
                "outliers": [
                    {"value": g.value, "severity": g.severity.value, "hosts": list(g.hosts)}
                    for g in d.outliers
                ],
            }
            for d in report.differences
        ],
        "clock_offsets": {h: o for h, o in report.clock_offsets.items() if o},
        "findings": [f.to_json() for f in findings],
        "summary": {s.value: sum(f.severity is s for f in findings) for s in Severity},
        "exclude": list(report.exclude),
    }
    if bench is not None:
        doc["bench"] = bench_json(bench)
    return doc
