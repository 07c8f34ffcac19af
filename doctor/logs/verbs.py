"""RDMA verbs failures, whoever prints them: NCCL's IB wrappers (``Call to ibv_...
failed with error ...``), UCX's ``ibv_...() failed: ...`` and its completion errors, or
the error quoted bare in a thread's title.

* A verbs object (a memory region, a completion or queue pair) that cannot be created for
  want of memory is the locked-memory limit (``ulimit -l``, a container's ``--ulimit
  memlock``): the host's set-up, not the fabric, so ``bootstrap``.
* A work completion that failed, in libibverbs' own words for its status
  (``ibv_wc_status_str``: the transport or receiver-not-ready retry counter exceeded, or
  UCX's mlx5 ``Transport retry count exceeded``, a
  remote access or operation error, a local protection error), is the link between two
  ranks after they connected: ``network``, as NCCL's ``NET/IB : Got completion ... with
  error`` (read by ``doctor.logs.nccl``). libfabric's EFA provider says the same in its
  words (``Unresponsive receiver``, ``Unreachable remote``): most often a security group
  that does not let the instances' EFA traffic reach the group itself, else the peer's
  hardware or a peer process that ended.

    ERROR mlx5_0: ibv_create_cq() failed: Cannot allocate memory.
    ibv_create_cq(cqe=4096) failed: Cannot allocate memory
    rc_verbs_iface.c:52   UCX  ERROR Send completion with error: transport retry counter exceeded
    ud_iface.c:781  Fatal: transport error: Endpoint timeout

UCX's UD transport gives up on a peer that stopped answering (``Endpoint timeout``), its EFA
SRD transport on a send that failed (``send completion[0] with error``): the same.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.guarded import Guarded
from doctor.logs.lines import Line

_LOCKED_MEMORY = re.compile(
    r"\bibv_(?:reg_mr|reg_dmabuf_mr|create_cq|create_qp|create_srq|alloc_pd)\w{0,16}"
    r"[^\n]{0,80}?(?:Cannot allocate memory|ENOMEM)"
)

_COMPLETION = Guarded(
    re.compile(
        r"(?i)(?:transport|RNR) retry count(?:er)? exceeded|"
        r"remote (?:access|operation|invalid request) error|local protection error|"
        r"completion(?:\[\d{1,4}\])? (?:with )?error|transport error: Endpoint timeout|"
        r"receive-no-ready retry count exceeded|local QP operation error|remote side aborted|"
        r"IB Async event on \S{1,40}: (?:port error|local (?:work queue )?catastrophic error)|"
        r"error 'Endpoint timeout'|completion Endpoint timeout|unhandled timeout error|"
        r"ibv_poll_cq failed, status: \d{1,3}|"
        r"(?P<efa>Unresponsive receiver|Unreachable remote|Unresponsive remote)"
    ),
    (
        "retry",
        "error",
        "unre",
        "abort",
        "timeout",
        "ibv_poll_cq",
    ),  # lowercased: the pattern is case-blind
    fold=True,
)
"""libibverbs' ``ibv_wc_status_str`` for the statuses that end a connection, the
completion error its callers print around them, and libfabric's EFA provider's
(``efa_strerror``) for a peer its device cannot reach or that never answers the handshake."""


LOCKED_MEMORY = (
    "an RDMA verbs object could not be created (Cannot allocate memory): the locked-memory "
    "limit (ulimit -l, a container's --ulimit memlock) is too low; raise it (ulimit -l "
    "unlimited, the scheduler's or container's memlock limit)"
)
"""The event's text: the cause and what to do."""


def locked_memory(text: str) -> bool:
    """Whether ``text`` says a verbs object could not be created for want of memory."""
    return "ibv_" in text and _LOCKED_MEMORY.search(text) is not None


def events(line: Line) -> list[LogEvent]:
    text = line.text
    if "NCCL" not in text and "NET/" not in text and (m := _COMPLETION.search(text)):
        efa = m.group("efa") is not None
        return [
            line.event(
                kinds.NETWORK,
                text="an EFA completion failed: the peer's device did not answer (a security "
                "group that does not allow all traffic to and from itself, the peer's "
                "hardware, or a peer process that ended)"
                if efa
                else "an RDMA work completion failed between two ranks: the link, a switch, "
                "or routing (RoCE GID, LMC path) between their NICs",
            )
        ]
    if not locked_memory(text):
        return []
    return [line.event(kinds.BOOTSTRAP, text=LOCKED_MEMORY)]
