"""How many generated inputs each reader was fed in this run (the fuzz tests count, the
fuzz folder's ``conftest`` prints the figures). A module of its own because ``conftest``
names a different module depending on which folders a run collects."""

from __future__ import annotations

TRIED: dict[str, int] = {}


def tried(reader: str) -> None:
    """Count one generated input for ``reader``."""
    TRIED[reader] = TRIED.get(reader, 0) + 1
