"""`nccl-doctor playbook`: not built yet."""

from __future__ import annotations

import typer

from doctor.errors import NotYetImplementedError


def register(app: typer.Typer) -> None:
    @app.command("playbook")
    def playbook() -> None:
        """Not built yet."""
        raise NotYetImplementedError("'playbook' is not built yet (issue 2)")
