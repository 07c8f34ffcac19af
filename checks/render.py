"""Renderers of a preflight ``Report``: rich renderables for people, JSON for machines.

Two phases: the report (with the timeout chain its checks judged) is built
first; these functions only lay it out, so the CLI prints them
and a TUI could show them in a ``Static``.

Findings quote values from the environment, ``nccl.conf`` lines and file names:
every string enters a renderable through ``safe_text`` (control characters
escaped, never read as markup). A fix keeps its line breaks: ``checks.fixes``
builds each line inert.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from doctor.checks.registry import family
from doctor.checks.report import Report
from doctor.jobconfig.durations import format_duration
from doctor.jobconfig.timeouts import TimeoutChain
from doctor.model import Finding, Severity
from doctor.trust.safe_text import safe_text

MARKS = {
    Severity.FAIL: ("✗ fail", "bold red"),
    Severity.WARN: ("! warn", "yellow"),
    Severity.INFO: ("i info", "blue"),
    Severity.PASS: ("✓ pass", "green"),
    Severity.SKIP: ("- skip", "dim"),
}


def findings_table(report: Report) -> Table:
    """One row per finding, a section per check family, the fix under its message."""
    table = Table(
        title=safe_text(f"nccl-doctor preflight · lane {report.lane}"),
        title_justify="left",
        show_lines=False,
        expand=True,
    )
    table.add_column("", no_wrap=True, width=6)
    table.add_column("check", no_wrap=True)
    table.add_column("finding", ratio=1, overflow="fold")
    current = None
    for check, finding in _collapse_skips(report.findings):
        group = family(finding.check)
        if current is not None and group != current:
            table.add_section()
        current = group
        mark, style = MARKS[finding.severity]
        body = Text()
        if finding.subject not in finding.message:
            body.append(safe_text(f"{finding.subject}: ", style="bold"))
        body.append(safe_text(finding.message))
        if finding.fix and finding.severity in (Severity.FAIL, Severity.WARN):
            fix = "\nfix: " + finding.fix.replace("\n", "\n     ")
            body.append(safe_text(fix, style="cyan", keep="\n"))
        table.add_row(Text(mark, style=style), safe_text(check), body)
    return table


def _collapse_skips(findings: Iterable[Finding]) -> list[tuple[str, Finding]]:
    """Consecutive skips with one reason (every GPU check on a GPU-less host) become one row."""
    rows: list[tuple[list[str], Finding]] = []
    for finding in findings:
        last = rows[-1] if rows else None
        if (
            last
            and finding.severity is Severity.SKIP
            and last[1].severity is Severity.SKIP
            and last[1].message == finding.message
        ):
            last[0].append(finding.check)
        else:
            rows.append(([finding.check], finding))
    return [(ids[0] if len(ids) == 1 else _id_summary(ids), f) for ids, f in rows]


def _id_summary(ids: list[str]) -> str:
    heads = dict.fromkeys(i.split(".", 1)[0] for i in ids)
    return ", ".join(f"{h}.*" for h in heads) + f" ({len(ids)})"


def _duration(seconds: float | None, off: str = "off") -> str:
    return off if seconds is None else format_duration(seconds)


def timeout_table(chain: TimeoutChain) -> Table:
    """The resolved timeout chain with the worst-case time to detect a hang and to recover."""
    table = Table(title="timeout chain", title_justify="left", expand=True)
    table.add_column("layer", no_wrap=True)
    table.add_column("value", no_wrap=True, justify="right")
    table.add_column("set by", ratio=1, overflow="fold")
    for layer in chain.layers:
        table.add_row(
            safe_text(layer.title), Text(_duration(layer.seconds)), safe_text(layer.source)
        )
    table.add_section()
    table.add_row(
        Text("time to detect a hang", style="bold"),
        Text(_duration(chain.detect, "never")),
        Text("worst case"),
    )
    table.add_row(
        Text("time to recover", style="bold"),
        Text(_duration(chain.recover, "never")),
        safe_text(chain.recover_how),
    )
    return table


def summary_line(report: Report) -> Text:
    """The last line: the counts, the lane and where it came from, the NCCL files read."""
    counts = {s: report.count(s) for s in Severity}
    verdict = "FAIL" if counts[Severity.FAIL] else "WARN" if counts[Severity.WARN] else "OK"
    style = {"FAIL": "bold red", "WARN": "bold yellow", "OK": "bold green"}[verdict]
    line = Text(f"preflight {verdict}", style=style)
    parts = " · ".join(
        f"{counts[s]} {s.value}" for s in Severity if counts[s] or s is not Severity.INFO
    )
    line.append(safe_text(f": {parts} · lane {report.lane} ({report.lane_source or '?'})"))
    if report.conf_files:
        line.append(safe_text(f" · NCCL config files read: {', '.join(report.conf_files)}"))
    return line


def report_renderable(report: Report) -> RenderableType:
    """The whole report, findings first: what the CLI prints."""
    parts: list[RenderableType] = [findings_table(report)]
    if report.timeouts is not None:
        parts.append(timeout_table(report.timeouts))
    parts.append(summary_line(report))
    return Group(*parts)


def print_report(report: Report, console: Console) -> None:
    """Print the report for a person."""
    console.print(report_renderable(report))


def to_json(report: Report) -> str:
    """The report as ``nccl-doctor/preflight/v1`` JSON text."""
    return json.dumps(report.to_json(), indent=2)
