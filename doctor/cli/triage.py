"""`nccl-doctor triage`: not built yet; issue 4 owns it."""

from __future__ import annotations

import typer

from doctor.errors import NotYetImplementedError


def register(app: typer.Typer) -> None:
    @app.command("triage")
    def triage() -> None:
        """Not built yet."""
        raise NotYetImplementedError("'triage' is not built yet (issue 4)")
