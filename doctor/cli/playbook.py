"""`nccl-doctor playbook [ID]`: print the playbook of a check or hang class, or list them."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def playbook(
    playbook_id: Annotated[
        str | None,
        typer.Argument(metavar="ID", help="a check id (env.unknown), family (env) or hang class"),
    ] = None,
) -> None:
    """Print the playbook of a hang class or check; without ID, list them."""
    from rich.console import Console
    from rich.markdown import Markdown

    from doctor import playbooks

    if playbook_id is None:
        for known in playbooks.known():
            print(f"{known:<22} {playbooks.title(known)}")
        return
    Console(file=sys.stdout).print(Markdown(playbooks.load(playbook_id)))
