"""`nccl-doctor preflight`: not built yet; issue 2 owns it."""

from __future__ import annotations

import typer

from doctor.errors import NotYetImplementedError


def register(app: typer.Typer) -> None:
    @app.command("preflight")
    def preflight() -> None:
        """Not built yet."""
        raise NotYetImplementedError("'preflight' is not built yet (issue 2)")
