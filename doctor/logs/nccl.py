"""NCCL's own words: its debug lines (``host:pid:tid [dev] NCCL INFO|WARN ...``) and the
error strings it hands to PyTorch (``ncclSystemError ... Last error: ...``).

* Who is who: ``comm 0x.. rank R nranks N cudaDev D ... busId B ... Init COMPLETE`` ties a
  process (host, pid) to its rank and GPU; ``Bootstrap : Using eth0:10.0.0.1<0>`` ties it
  to the address its peers' errors will name.
* Transport errors after start-up: ``NET/IB : Got completion from peer X with error 12``
  (the retry counter ran out on that link), IB async events (port error, catastrophic
  error), ``NET/OFI`` request errors. A connection *closed or reset by the peer* is kept
  apart (``peer_gone``): it follows a peer process dying as often as a link failing; UCX
  says the same reset in its words (``UCS_ERR_CONNECTION_RESET``: ``Connection reset by
  remote peer``).
* NCCL's system-error class (``unhandled system error``, ``ncclSystemError: System call
  ... failed``) with nothing more specific on the line: a system call or library NCCL
  depends on failed (a ``/dev/shm`` segment, a socket, locked memory), which at start-up is
  the host's set-up (``bootstrap``); the rules weigh it less once a collective has run.
  An RDMA object that cannot be created for want of memory is read by ``doctor.logs.verbs``.
* Bootstrap failures: no usable interface, connect failures and refusals to a peer's
  bootstrap port, a rank count mismatch, duplicate GPUs (also as users quote the message,
  without NCCL's prefix), a net plugin that cannot start, ``/dev/shm`` segments that cannot
  be created, grown or unlinked (something else, such as systemd, removed them).
* Its per-call trace (``NCCL_DEBUG_SUBSYS=COLL``): ``AllReduce: opCount 28c ... count N ...
  comm 0x.. [nranks=4]``, one line per collective a process calls, read as ``NCCL_CALL``
  for the rules to compare what the processes called at one operation count.
* CUDA failures NCCL reports (``Cuda failure 'an illegal memory access was encountered'``)
  are read by ``doctor.logs.cuda`` from any line.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds, verbs
from doctor.logs.lines import Line

_INIT = re.compile(
    r"\bcomm 0x[0-9a-f]+ rank (\d{1,18}) n[Rr]anks (\d{1,18})(?:.*?\bbusId ([0-9a-fA-F]+))?"
)
_ADDRESS = re.compile(
    r"(?:Bootstrap|OOB) ?: ?(?:Using )?\[?\d*\]?([\w.-]+):([\d.]+|[0-9a-fA-F:]+)<"
)
_ADDR_PORT = re.compile(r"(?<![\w.:%\[\]-])([\w.:%\[\]-]{1,256})<\d+>")
_IB_STATUS = re.compile(r"Got completion (?:from peer \S+ )?with (?:error |status=)(\d{1,18})")
IB_STATUS: dict[int, str] = {
    4: "local protection error: often ACS or the IOMMU blocking GPU Direct RDMA",
    5: "work request flushed: the queue pair had already failed",
    10: "remote access error",
    12: "transport retry counter exceeded: the peer's NIC does not answer (link, switch, "
    "RoCE GID or routing)",
    13: "receiver-not-ready retry counter exceeded",
}
"""``ibv_wc_status`` values (libibverbs' ``verbs.h``) NCCL prints in ``Got completion``."""
_NAMED_PEER = re.compile(r"(?:peer|node) \[?([\w.:-]*\w)\]?")
_NETWORK = re.compile(
    r"NET/IB ?: ?Got completion (?:from peer \S+ )?with (?:error|status)|"
    r"NET/IB ?: ?Got async event|"
    r"transport retry counter exceeded|NET/IB ?:.*?(?:ibv_poll_cq|ibv_post_send|ibv_post_recv)"
    r".*?(?:failed|error)|NET/OFI .*?(?:completed with error|Request .*? error)|"
    r"NET/IB ?: ?.*?(?:port error|link down|Port .*? down|catastrophic)|"
    r"NCCL WARN .*?(?:Message truncated|Net : .*?(?:error|failed))|"
    r"NCCL WARN Timeout waiting for|IB ?: ?.*?timeout|Call to ibv_\w+ failed"
)
_TRUNCATED = re.compile(r"message truncated ?: ?receiving")
"""The socket transport received more bytes than the call posted: "most often triggered by
a mismatch in collective size or env settings between ranks" (NVIDIA/nccl#605, which made
it ncclInvalidUsage and put that hint in the message)."""
_BOOTSTRAP_TRUNCATED = re.compile(r"Message truncated ?: ?received")
"""The same check in the bootstrap's own exchange (``bootstrap.cc``): ranks that run
different NCCL versions (Google Cloud's NCCL troubleshooting guide, "Message truncated")."""
_PEER_GONE = re.compile(
    r"[Cc]onnection closed by (?:remote )?peer|[Cc]onnection reset by (?:remote )?peer|"
    r"ncclRemoteError|remote process exit(?:ed|ing)|Broken pipe|"
    r"socketProgress(?:Opt)?: .*?(?:failed|closed|reset)|"
    r"Net(?:/Socket)? ?: ?(?:Connection|socket) (?:closed|reset)|"
    r"[Cc]onnection closed by peer|UNAVAILABLE: Socket closed"
)
"""A peer's connection that ended: closed or reset by the peer, a write into a dead socket;
gRPC's status for a channel whose socket the other end closed (TensorFlow's and XLA's
runtimes)."""
NO_INTERFACE = (
    r"no socket interface found|No usable interface found|is neither AF_INET|"
    r"Address family not supported"
)
"""No interface NCCL can use: ``NCCL_SOCKET_IFNAME`` names none the host has, or excludes
them all."""
SHM_SEGMENT = r"creating shared memory segment|posix_fallocate failed|failed to extend /dev/shm"
"""NCCL could not make its ``/dev/shm`` segment."""
SHM_REMOVED = r"unlink shared memory \S+ failed"
"""NCCL's ``/dev/shm`` segment was gone when it unlinked it: another process removed it."""
_BOOTSTRAP = re.compile(
    r"[Bb]ootstrap ?: ?no socket interface found|"
    + NO_INTERFACE
    + r"|no (?:socket )?interface found|NET/Socket ?: ?No interface found|"
    r"socketStartConnect: Connect to .*? failed|socketPollConnect|"
    r"bootstrap\.cc:\d+ NCCL WARN|Bootstrap Root ?: ?mismatch|[Bb]ootstrap.*?(?:timeout|failed)|"
    r"Duplicate GPU detected|Failed to initialize any NET plugin|"
    r"does not contain rank|ncclInvalidUsage|Error : ring \d+ does not|"
    r"No interface found in the same subnet|NCCL_SOCKET_IFNAME.*?(?:not found|invalid)|"
    r"Connection refused|ncclSocketInit|Socket creation failed|" + SHM_SEGMENT + "|" + SHM_REMOVED
)
CONNECT_RETRY = re.compile(r"Call to connect returned .{1,100}, retrying")
"""NCCL's socket layer retrying a connection (``misc/socket.cc``): a peer not listening yet,
or an address on the wrong interface; it fails only once the retries run out
(``socketStartConnect: Connect to ... failed``)."""
_SETUP_WARN = re.compile(
    r"(?:^|\s)(?:init|bootstrap|transport/nvls|channel|transport)\.cc:\d+ NCCL WARN"
)
TOPOLOGY_WARN = (
    r"(?:^|\s)graph/\w{1,20}\.(?:cc|h):\d{1,6} NCCL WARN Attribute \w{1,40} of node \w{1,40}"
    r" not found"
)
"""NCCL's topology code (``graph/xml.h``) failing to read a device's attribute, as it returns
``ncclInternalError`` while a communicator is created: the host's devices as NCCL read them
(``/sys``, a topology file) lack what it needs; ``node nic`` names a device, not a peer. Not
every warning of ``graph/`` fails: ``Topology detection: network path ... is not a PCI
device (vmbus). Attaching to first CPU`` is an Azure VM's working run."""
_TOPOLOGY_WARN = re.compile(TOPOLOGY_WARN)
UNHANDLED_CUDA = r"unhan\w{0,3}led cuda error|ncclUnhandledCudaError"
"""NCCL's ``ncclUnhandledCudaError``: a CUDA call inside NCCL failed (case aside)."""
_SYSTEM_ERROR = re.compile(
    r"unhan\w{0,3}led system error|ncclSystemError|" + UNHANDLED_CUDA, re.IGNORECASE
)
"""NCCL's ``ncclSystemError`` and ``ncclUnhandledCudaError`` as PyTorch, Paddle, RCCL and
NCCL's tests print them: "a call to an external library failed" (NCCL's troubleshooting
guide), a system call or a CUDA call."""
_ERROR_THEN = r"(?:[NR]CCL|[NR]ccl) [Ee]rror\b.{0,300}?"
"""How torch, Paddle and RCCL print an NCCL result: ``NCCL error in: <where>, <string>``
(torch 1.0-1.1: ``NCCL Error 3: internal error``)."""
_INVALID_CALL = re.compile(
    _ERROR_THEN + r"invalid (?:usage|argument)|ncclInvalid(?:Usage|Argument)"
)
"""NCCL's ``ncclInvalidUsage`` and ``ncclInvalidArgument`` as torch prints them (``NCCL
error in: ..., invalid usage``): NCCL's argument checks refused the call, at communicator
creation (two ranks on one GPU) or at the call (a communicator used from another device, a
build that does not support it); every dev case that said only this was the set-up."""
_INTERNAL = re.compile(_ERROR_THEN + r"internal error|ncclInternalError")
"""NCCL's ``ncclInternalError``: a check inside NCCL failed."""
_INIT_ERROR = re.compile(r"\binit\.cc:\d+ -> [1-9]")
"""NCCL's error return path (``init.cc:1462 -> 1``): the error happened creating a communicator."""
_CALL = re.compile(
    r"NCCL INFO (AllReduce|AllGather|ReduceScatter|Broadcast|Reduce): opCount ([0-9a-fA-F]{1,16})"
    r" .*?\bcount (\d{1,18}) .*?\bcomm (0x[0-9a-fA-F]{1,16}) \[nranks=(\d{1,18})\]"
)
"""NCCL's trace of a collective call; point-to-point calls (Send, Recv) differ by design."""
_DIAG_OUTLIER = re.compile(r"net bw: (\S+) rank (\d{1,18}) \(([\w.-]+)\): .*?off median")


def _stopped_answering(text: str) -> bool:
    """A connection that timed out (``ETIMEDOUT``): a peer that stopped answering; not a
    connect that timed out (NCCL's ``Connect to ... failed``, the store's ``failed to
    connect``, gloo's ``connect [addr]: Connection timed out``): a job that never connected,
    read as set-up where it is read."""
    return "Connection timed out" in text and "connect" not in text and "Connect to" not in text


def bare_result(text: str) -> bool:
    """Whether ``text`` is one of NCCL's error classes without a word of which call failed:
    a system or CUDA call, an internal check, an invalid call. At start-up that is the
    host's set-up (a driver older than the build, an NCCL the GPU is too new for, NVLS the
    fabric does not offer, an interface NCCL cannot use: every dev case that said only this
    was one); a CUDA error of the GPU's own work, where printed, is read apart
    (``doctor.logs.cuda``) and outweighs it."""
    return (
        _SYSTEM_ERROR.search(text) is not None
        or (("nternal" in text or "ncclI" in text) and _INTERNAL.search(text) is not None)
        or invalid_call(text)
    )


def invalid_call(text: str) -> bool:
    """Whether ``text`` is NCCL refusing a call's arguments or its use."""
    return "nvalid" in text and _INVALID_CALL.search(text) is not None


def bus_id(hex_id: str) -> str:
    """NCCL's ``busId 4d000`` (``%lx`` of ``0000:4d:00.0`` read as hex) -> ``0000:4d:00``,
    the form the kernel's Xid lines use."""
    digits = hex_id.lower().rjust(9, "0")[-9:]
    return f"{digits[0:4]}:{digits[4:6]}:{digits[6:8]}"


def _peer(text: str) -> str:
    """The other end a line names: NCCL's ``addr<port>``, else ``peer X`` / ``node X``."""
    for m in _ADDR_PORT.finditer(text):
        if not m.group(1).startswith("0.0.0.0"):
            return m.group(0)
    named = _NAMED_PEER.search(text)
    return named.group(1) if named else ""


_VERSIONS = re.compile(r"NCCL INFO NCCL version \d")
"""The banner line that states NCCL's version and its CUDA (kept as configuration)."""


IOMMU_NOT_PT = re.compile(r"Missing \"iommu=pt\" from kernel command line")
"""RCCL's warning that the host's IOMMU translates device DMA (ROCm's install FAQ: the cause
of applications that hang at full GPU use); printed by runs that work too, so weak alone."""


def events(line: Line) -> list[LogEvent]:
    """The events one NCCL line (or a line quoting an NCCL error) holds."""
    text = line.text
    if not any(
        k in text for k in ("CCL", "ccl", "NET/", "ocket", "onnection", "eer", "Duplicate GPU")
    ):
        return []
    event = line.event

    if verbs.locked_memory(text):  # read by doctor.logs.verbs: the host's limit, not the link
        return []
    if "iommu=pt" in text and IOMMU_NOT_PT.search(text):
        return [event(kinds.IOMMU_FAULT)]
    if "ncclShmOpen" in text:  # a crash inside NCCL's /dev/shm segment: the segment is too small
        return [event(kinds.BOOTSTRAP)]
    if line.nccl == "DIAG":
        if m := _DIAG_OUTLIER.search(text):
            return [event(kinds.OUTLIER, rank=int(m.group(2)), host=m.group(3), op=m.group(1))]
        return [event(kinds.PROGRESS)] if "[OK]" in text else []
    if line.nccl == "INFO":
        if m := _INIT.search(text):
            return [
                event(
                    kinds.RANK_INFO,
                    rank=int(m.group(1)),
                    nranks=int(m.group(2)),
                    device=bus_id(m.group(3)) if m.group(3) else "",
                )
            ]
        if m := _ADDRESS.search(text):
            return [event(kinds.RANK_INFO, peer=m.group(2))]
        if _VERSIONS.search(text):  # what an incident report's versions block quotes
            return [event(kinds.RANK_INFO)]
        if _INIT_ERROR.search(text):
            return [event(kinds.BOOTSTRAP)]
        if "opCount" in text and (m := _CALL.search(text)):
            return [
                event(
                    kinds.NCCL_CALL,
                    op=m.group(1).upper(),
                    seq=int(m.group(2), 16),
                    numel=int(m.group(3)),
                    process_group=f"comm {m.group(4)}",
                    nranks=int(m.group(5)),
                )
            ]
        if "Connection refused" not in text and "failed" not in text:
            return []  # INFO lines are configuration and progress, not failures
    if "graph/" in text and _TOPOLOGY_WARN.search(text):
        return [event(kinds.BOOTSTRAP)]
    if _SETUP_WARN.search(text):
        return [event(kinds.BOOTSTRAP, peer=_peer(text))]
    if _TRUNCATED.search(text):
        return [event(kinds.MISMATCH_DETECTED, peer=_peer(text))]
    if _BOOTSTRAP_TRUNCATED.search(text):
        return [event(kinds.BOOTSTRAP, peer=_peer(text))]
    if _NETWORK.search(text):
        status = _IB_STATUS.search(text)
        return [
            event(kinds.NETWORK, peer=_peer(text), code=int(status.group(1)) if status else None)
        ]
    if _PEER_GONE.search(text) or _stopped_answering(text):
        return [event(kinds.PEER_GONE, peer=_peer(text))]
    if _BOOTSTRAP.search(text):
        return [event(kinds.BOOTSTRAP, peer=_peer(text))]
    if bare_result(text):
        return [event(kinds.BOOTSTRAP)]
    return []
