"""Write a report file: the one edge of ``doctor.report`` that touches the disk."""

from __future__ import annotations

import sys
from pathlib import Path

from doctor.errors import UsageError
from doctor.evidence import Evidence
from doctor.report import html, markdown
from doctor.report.content import build
from doctor.trust.safeio import write_atomic
from doctor.verdict.classify import Analysis

FORMATS = ("html", "md")


def check_format(fmt: str) -> None:
    """``UsageError`` unless ``fmt`` is a format this writes."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be html or md, not {fmt!r}")


def report_text(evidence: Evidence, analysis: Analysis, fmt: str = "html") -> str:
    """The report of one verdict as HTML or Markdown."""
    check_format(fmt)
    content = build(evidence, analysis)
    return html.render(content) if fmt == "html" else markdown.render(content)


def write_report(evidence: Evidence, analysis: Analysis, out: Path, fmt: str = "html") -> None:
    """Write the report to ``out`` (``-``: standard output), atomically and private (0600:
    it quotes what the ranks' owner could read, as a bundle does)."""
    page = report_text(evidence, analysis, fmt)
    if str(out) == "-":
        sys.stdout.write(page)
        return
    write_atomic(out, page)
