"""What the wrapper hands its hooks, and what a running call reads of its ``Wrapper``.

Kept below ``call``, ``state``, ``wrapper`` and ``health`` so none of them
imports another for a type: the hooks get a ``HookState``; ``CallWrapper``
reads its settings through ``WrapperSettings``, which ``Wrapper`` provides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from doctor.restart.assignment import RankAssignment
from doctor.restart.options import RestartOptions


@dataclass(frozen=True)
class HookState:
    """Read-only view handed to the ``initialize``, ``finalize`` and ``health_check`` hooks."""

    iteration: int
    rank: int
    """-1 for a spare that waits this iteration out."""
    world_size: int
    initial_rank: int
    initial_world_size: int
    active: bool
    last_fault: dict[str, Any] | None


Hook = Callable[[HookState], object]
"""An ``initialize``, ``finalize`` or ``health_check`` hook; what it returns is ignored."""


class WrapperSettings(Protocol):
    """The settings of a ``Wrapper`` that one call of the wrapped function runs with."""

    options: RestartOptions
    initialize: Hook | None
    finalize: Hook | None
    health_check: Hook | None
    rank_assignment: RankAssignment
    store_host: str | None
    store_port: int | None
    directory: Path | None
    flight_recorder: bool | None
    timeout_policy: str
