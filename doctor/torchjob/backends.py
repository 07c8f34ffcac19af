"""What each distributed backend does on its own: one source for preflight and triage alike.

Preflight (``checks.diag``, ``checks.timeouts``) tells a user what evidence a
hang will leave; triage says what it found missing. Both read these facts, so
they never contradict each other on the same job. From PyTorch's sources:
``ProcessGroupNCCL`` has a watchdog that dumps the Flight Recorder on a
collective timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT``); ``ProcessGroupGloo`` has
none, so a gloo job's trace is read only while it lives, by asking the ranks
(``nccl-doctor launch``'s in-rank agent). The default collective timeout is
10 minutes for NCCL and 30 minutes for gloo (and for mixed backends).
"""

from __future__ import annotations

DEFAULT_COLLECTIVE_TIMEOUT_S = {"nccl": 600.0, "gloo": 1800.0, "mixed": 1800.0}
DUMPS_ON_TIMEOUT = {"nccl": True, "gloo": False, "mixed": True}
GLOO_FLIGHT_RECORDER = (
    "gloo does not dump its Flight Recorder on a timeout (it has no watchdog; its default "
    "collective timeout is 30 minutes): a gloo job's trace is read only live, from ranks "
    "started with `nccl-doctor launch` (its in-rank agent answers dump requests)"
)


def default_timeout(backend: str) -> float:
    return DEFAULT_COLLECTIVE_TIMEOUT_S.get(backend, DEFAULT_COLLECTIVE_TIMEOUT_S["mixed"])
