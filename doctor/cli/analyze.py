"""`nccl-doctor analyze PATH... [--json]`: the post-mortem verdict from saved evidence."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from doctor.errors import EXIT_FOUND, EXIT_OK, InputError, UsageError


def analyze(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="a triage bundle (.tar.gz), a folder or archive of Flight Recorder dumps, "
            "dump files, or logs: a job's output, NCCL debug files, ncclras reports, dmesg; "
            "'-' reads pasted text from standard input",
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
    from doctor.cli.progress import read_showing_progress
    from doctor.verdict.classify import analyse
    from doctor.verdict.render import render, to_json

    with _stdin_as_file(paths) as given:
        evidence = load_evidence(given) if as_json else read_showing_progress(given)
    analysis = analyse(evidence)
    if as_json:
        print(json.dumps(to_json(evidence, analysis), indent=2))
    else:
        Console().print(render(evidence, analysis))
    raise typer.Exit(EXIT_FOUND if analysis.verdict.hang_class.is_hang else EXIT_OK)


STDIN = Path("-")


@contextmanager
def _stdin_as_file(paths: list[Path]) -> Iterator[list[Path]]:
    """``paths`` with ``-`` replaced by a file of standard input's text (a paste, a pipe), in
    a folder only this user can enter, removed afterwards."""
    if STDIN not in paths:
        yield paths
        return
    if sys.stdin is None or sys.stdin.closed:
        raise UsageError("'-' reads standard input, and this process has none")
    if sys.stdin.isatty():
        print(
            "nccl-doctor: reading the log from standard input; end it with Ctrl-D", file=sys.stderr
        )
    with tempfile.TemporaryDirectory(prefix="nccl-doctor-stdin-") as folder:
        pasted = Path(folder) / "stdin.log"
        with pasted.open("wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out)
        if not pasted.stat().st_size:
            raise UsageError("'-' reads standard input, and it held no text")
        try:
            yield [pasted if p == STDIN else p for p in paths]
        except InputError as exc:  # its file is ours: the user gave standard input
            said = str(exc).replace(str(pasted), "standard input")
            raise InputError(said.replace(f"({pasted.name}:", "(standard input:")) from None
