"""The bundled in-process restart wrapper (same contract as nvidia-resiliency-ext's inprocess)."""

from doctor.restart.assignment import RankAssignment
from doctor.restart.call import CallWrapper, current_call
from doctor.restart.exceptions import (
    RestartError,
    RestartLimitError,
    RestartRequested,
    StoppedByDoctor,
)
from doctor.restart.state import RankState
from doctor.restart.wrapper import Wrapper

__all__ = [
    "CallWrapper",
    "RankAssignment",
    "RankState",
    "RestartError",
    "RestartLimitError",
    "RestartRequested",
    "StoppedByDoctor",
    "Wrapper",
    "current_call",
]
