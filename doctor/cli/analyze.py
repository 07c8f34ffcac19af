"""`nccl-doctor analyze PATH... [--json]`: the post-mortem verdict from saved evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from doctor.errors import EXIT_FOUND, EXIT_OK

if TYPE_CHECKING:
    from doctor.evidence import Evidence


def analyze(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="a triage bundle (.tar.gz), a folder or archive of Flight Recorder dumps, "
            "dump files, or logs: a job's output, NCCL debug files, ncclras reports, dmesg",
            show_default=False,
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="print nccl-doctor/triage/v1 JSON")
    ] = False,
) -> None:
    """Judge a hang after the fact: which rank, which hang class, what to do."""
    from rich.console import Console

    from doctor.analyze.load import load_evidence
    from doctor.verdict.classify import analyse
    from doctor.verdict.render import render, to_json

    evidence = load_evidence(paths) if as_json else _read_showing_progress(paths)
    analysis = analyse(evidence)
    if as_json:
        print(json.dumps(to_json(evidence, analysis), indent=2))
    else:
        Console().print(render(evidence, analysis))
    raise typer.Exit(EXIT_FOUND if analysis.verdict.hang_class.is_hang else EXIT_OK)


def _read_showing_progress(paths: list[Path]) -> Evidence:
    """``load_evidence`` with a progress bar on a terminal's stderr while a large folder of
    dumps is read (nothing when stderr is a file or a pipe, nor for a few dumps: the bar
    starts when the worker pool starts)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from doctor.analyze.load import load_evidence

    console = Console(stderr=True)
    if not console.is_terminal:
        return load_evidence(paths)
    columns = (
        "reading Flight Recorder dumps",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    bar = Progress(*columns, console=console, transient=True)
    task = bar.add_task("read", total=None)

    def tell(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)
        if not bar.live.is_started:
            bar.start()

    try:
        return load_evidence(paths, tell)
    finally:
        bar.stop()
