"""`nccl-doctor recover`: not built yet; issue 5 owns it."""

from __future__ import annotations

import typer

from doctor.errors import NotYetImplementedError


def register(app: typer.Typer) -> None:
    @app.command("recover")
    def recover() -> None:
        """Not built yet."""
        raise NotYetImplementedError("'recover' is not built yet (issue 5)")
