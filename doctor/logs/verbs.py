"""RDMA verbs set-up failures, whoever prints them: NCCL's IB wrappers (``Call to ibv_...
failed with error ...``), UCX's ``ibv_...() failed: ...``, or the error quoted bare in a
thread's title. A verbs object (a memory region, a completion or queue pair) that cannot
be created for want of memory is the locked-memory limit (``ulimit -l``, a container's
``--ulimit memlock``): the host's set-up, not the fabric, so ``bootstrap``.

    ERROR mlx5_0: ibv_create_cq() failed: Cannot allocate memory.
    ibv_create_cq(cqe=4096) failed: Cannot allocate memory
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.lines import Line

_LOCKED_MEMORY = re.compile(
    r"\bibv_(?:reg_mr|reg_dmabuf_mr|create_cq|create_qp|create_srq|alloc_pd)\w{0,16}"
    r"[^\n]{0,80}?(?:Cannot allocate memory|ENOMEM)"
)


def locked_memory(text: str) -> bool:
    """Whether ``text`` says a verbs object could not be created for want of memory."""
    return "ibv_" in text and _LOCKED_MEMORY.search(text) is not None


def events(line: Line) -> list[LogEvent]:
    if not locked_memory(line.text):
        return []
    return [
        line.event(
            kinds.BOOTSTRAP,
            text="an RDMA verbs object could not be created (Cannot allocate memory): the "
            "locked-memory limit (ulimit -l, a container's --ulimit memlock) is too low",
        )
    ]
