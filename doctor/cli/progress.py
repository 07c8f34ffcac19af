"""The progress bar the commands share: rich, on stderr, gone when done or off a terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from rich.progress import Progress

    from doctor.evidence import Evidence


def stderr_bar(quiet: bool = False) -> Progress:
    """A description, a bar and ``done/total``; disabled when ``quiet`` or stderr is no
    terminal (a pipe, a log file), so machine output is never mixed with it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
        disable=quiet or not console.is_terminal,
    )


LOG_BAR_BYTES = 16 << 20
"""Logs this large get a bar: they read at a few MB/s where most lines say something."""


def read_showing_progress(paths: list[Path]) -> Evidence:
    """``load_evidence`` with a progress bar on a terminal's stderr while a large folder of
    dumps or large logs are read (nothing when stderr is a file or a pipe, nor for a few
    dumps, whose bar starts when the worker pool starts, nor for logs under
    ``LOG_BAR_BYTES``)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    from doctor.analyze.load import load_evidence

    console = Console(stderr=True)
    if not console.is_terminal:
        return load_evidence(paths)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TimeElapsedColumn(),
    )
    bar = Progress(*columns, console=console, transient=True)
    tasks: dict[str, TaskID] = {}

    def show(what: str, done: int, total: int, count: str) -> None:
        if what not in tasks:
            tasks[what] = bar.add_task(what, total=total, count="")
        bar.update(tasks[what], completed=done, total=total, count=count)
        if not bar.live.is_started:
            bar.start()

    def dumps(done: int, total: int) -> None:
        show("reading Flight Recorder dumps", done, total, f"{done}/{total}")

    def logs(done: int, total: int) -> None:
        if total >= LOG_BAR_BYTES:
            show("reading logs", done, total, f"{done / 2**20:.0f}/{total / 2**20:.0f} MB")

    try:
        return load_evidence(paths, dumps, logs)
    finally:
        bar.stop()
