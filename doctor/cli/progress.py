"""The progress bar the commands share: rich, on stderr, gone when done or off a terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress


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
