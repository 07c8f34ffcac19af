"""`nccl-doctor analyze`: not built yet; issue 3 owns it."""

from __future__ import annotations

import typer

from doctor.errors import NotYetImplementedError


def register(app: typer.Typer) -> None:
    @app.command("analyze")
    def analyze() -> None:
        """Not built yet."""
        raise NotYetImplementedError("'analyze' is not built yet (issue 3)")
