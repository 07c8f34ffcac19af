"""The bundled in-process restart wrapper (same contract as nvidia-resiliency-ext's inprocess)."""

from doctor.restart.assignment import RankAssignment
from doctor.restart.call import CallWrapper, current_call
from doctor.restart.exceptions import (
    RestartError,
    RestartLimitError,
    RestartRequested,
    StoppedByDoctor,
)
from doctor.restart.hooks import HookState
from doctor.restart.wrapper import Wrapper

__all__ = [
    "CallWrapper",
    "HookState",
    "RankAssignment",
    "RestartError",
    "RestartLimitError",
    "RestartRequested",
    "StoppedByDoctor",
    "Wrapper",
    "current_call",
]
