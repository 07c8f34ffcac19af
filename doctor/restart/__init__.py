"""The bundled in-process restart wrapper (same contract as nvidia-resiliency-ext's inprocess).

It runs inside the job's ranks, with the job's PyTorch: without torch, importing it
raises ``TorchMissing`` (an ``ImportError``) that says so in one sentence.
"""

from doctor.torchjob.torchdep import require_torch

require_torch("the restart wrapper (doctor.restart)")

# ruff: noqa: E402 - torch is checked before the modules that import it

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
