"""The bundled in-process restart wrapper (same contract as nvidia-resiliency-ext's inprocess)."""

from doctor.restart.assignment import RankAssignment
from doctor.restart.exceptions import RestartError, RestartLimitError, RestartRequested
from doctor.restart.state import RankState
from doctor.restart.wrapper import CallWrapper, Wrapper, current_call

__all__ = ["CallWrapper", "RankAssignment", "RankState", "RestartError", "RestartLimitError",
           "RestartRequested", "Wrapper", "current_call"]
