"""`nccl-doctor report PATH... -o FILE [--format html|md]`: the verdict as a file to share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="what analyze reads: a triage bundle, Flight Recorder dumps, logs",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("-o", "--output", help="the file to write; - for standard output"),
    ],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="html: one self-contained page; md: a GitHub issue body (< 65,536 characters)",
        ),
    ] = "html",
) -> None:
    """Write an incident report: the verdict, next steps, ranks, stack tree, evidence."""
    from doctor.cli.progress import read_showing_progress
    from doctor.report.write import check_format, write_report
    from doctor.verdict.classify import analyse

    check_format(fmt)  # before reading anything
    evidence = read_showing_progress(paths)  # a bar on a terminal's stderr, never in the report
    write_report(evidence, analyse(evidence), out, fmt)
    if str(out) != "-":
        typer.echo(f"report written: {out}", err=True)
