"""`nccl-doctor bench`: not built yet; issue 6 owns it."""

from __future__ import annotations

import typer

from doctor.errors import NotYetImplementedError


def register(app: typer.Typer) -> None:
    @app.command("bench")
    def bench() -> None:
        """Not built yet."""
        raise NotYetImplementedError("'bench' is not built yet (issue 6)")
