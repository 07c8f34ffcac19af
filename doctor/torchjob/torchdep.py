"""PyTorch is the job's, not ours: only the parts that run inside a rank need it.

``pip install nccl-doctor`` does not pull torch: on a login node or in a CI
image it would download gigabytes of CUDA wheels, and in a job's environment
the resolver could touch the job's own torch. Preflight, triage, analyze and
collect never import it. The restart wrapper, ``recover`` (which speaks to the
wrapper's TCPStore), the bench workers and the demo job do; they call
``require_torch`` first, so a missing torch is one sentence, not a traceback.
"""

from __future__ import annotations

import importlib.util
import sys

from doctor.errors import TorchMissing

INSTALL_HINT = "install torch here, or pip install 'nccl-doctor[torch]'"


def require_torch(what: str) -> None:
    """Raise ``TorchMissing`` naming ``what`` when torch cannot be imported (without importing
    it: the check costs microseconds)."""
    if importlib.util.find_spec("torch") is None:
        raise TorchMissing(
            f"{what} runs with the job's PyTorch, which is not installed for "
            f"{sys.executable}: {INSTALL_HINT}"
        )
