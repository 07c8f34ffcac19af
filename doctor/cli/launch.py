"""`nccl-doctor launch`: not built yet; issue 5 owns it."""

from __future__ import annotations

import typer

from doctor.errors import NotYetImplementedError


def register(app: typer.Typer) -> None:
    @app.command("launch")
    def launch() -> None:
        """Not built yet."""
        raise NotYetImplementedError("'launch' is not built yet (issue 5)")
