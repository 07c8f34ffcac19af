"""Memory-backed files that ran out of room, however a runtime or a user words it: the
``/dev/shm`` (or disk) a job's set-up writes to.

* ``No space left on device`` (``ENOSPC``, ``[Errno 28]``) on its own: a process could not
  grow a file. In a distributed job the usual one is a container's small ``/dev/shm``
  (NCCL's and the data loader's segments), any full disk being the host's set-up too; never
  the fabric, never a lost peer. NCCL's own ``posix_fallocate`` warning is read by
  ``doctor.logs.nccl``.
* A bus error whose code is ``BUS_ADRERR`` (the kernel's ``nonexistent physical
  address``): a process touched a page of a mapped file that has no backing, which on a
  tmpfs such as ``/dev/shm`` is the file system full. Whoever prints it (UCX's crash
  banner, a user quoting it in a sentence), it is the shared memory, not a crash of the
  rank's own making.

    OSError: [Errno 28] No space left on device
    Bus error: nonexistent physical address with signal 7

* A runtime saying ``/dev/shm`` has not enough memory for what it maps (UCX's posix
  transport) or not enough space (Open MPI's shared-memory segment), the same full tmpfs in
  its own words.

    UCX  ERROR Not enough memory to write total of 4208440835 bytes. Please check that
        /dev/shm or the directory you specified has more available memory.

* A process refused another's memory or file descriptors (``process_vm_readv`` or
  ``process_vm_writev``: cross-memory attach, as UCX's CMA transport uses it; ``pidfd_getfd``:
  how a runtime takes a peer's CUDA IPC handle) with ``Operation not permitted``: the
  kernel's Yama ``ptrace_scope`` or a container without ``CAP_SYS_PTRACE`` forbids it, the
  host's set-up.

    process_vm_readv delivered 0 instead of 480960, error message Operation not permitted

* UCX's shared-memory transport unable to attach a peer's segment (``Permission denied``
  opening the peer's ``/proc/PID/fd``; ``Shared memory error`` creating the endpoint): the
  ranks of one host run in different containers or user/PID namespaces, the host's set-up.

    mm_posix.c:445  UCX  ERROR Error returned from open in attach. Permission denied.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.guarded import Guarded
from doctor.logs.lines import Line

_NO_SPACE = Guarded(
    re.compile(r"No space left on device|\[Errno 28\]|\bENOSPC\b"),
    ("No space", "Errno 28", "ENOSPC"),
)
_NO_BACKING = re.compile(r"Bus error: nonexistent physical address|\bBUS_ADRERR\b")
_BUS_CODE = re.compile(r"Bus error: \w|\bBUS_[A-Z]{3,6}\b")
_SHM_SHORT = re.compile(r"[Nn]ot enough (?:memory|space)|[Oo]ut of memory")
_PEER_MEMORY_REFUSED = re.compile(
    r"(?:process_vm_(?:readv|writev)|pidfd_getfd)\b.{0,300}?"
    r"(?:Operation not permitted|\bEPERM\b|errno 1\b)"
)
_PEER_SEGMENT_REFUSED = re.compile(
    r"Error returned from open in attach|failed to connect to remote peer with mm|"
    r"ucp_ep_create\(.{0,60}?\) failed: Shared memory error"
)


def no_backing(text: str) -> bool:
    """Whether ``text`` is a bus error on a mapped page with no backing (a full tmpfs)."""
    return "us" in text and _NO_BACKING.search(text) is not None


def bus_code_named(text: str) -> bool:
    """Whether a bus error's line names its kind (``Bus error: invalid address alignment``,
    ``BUS_ADRALN``): then it is that, not a mapped page of unknown cause."""
    return _BUS_CODE.search(text) is not None


MORE_SHM = "give the job more (docker --shm-size or --ipc=host, a larger /dev/shm mount)"
NO_BACKING = (
    "a bus error on a mapped page with no backing: shared memory (/dev/shm) is full or too "
    f"small; {MORE_SHM}"
)
SHM_SHORT = (
    "not enough memory in /dev/shm for a shared-memory segment (a container's default is "
    f"64 MB); {MORE_SHM}"
)
_FINDINGS: tuple[tuple[Callable[[str], bool], str], ...] = (
    (no_backing, NO_BACKING),
    (lambda text: "/dev/shm" in text and _SHM_SHORT.search(text) is not None, SHM_SHORT),
    (
        lambda text: (
            ("process_vm_" in text or "pidfd_getfd" in text)
            and _PEER_MEMORY_REFUSED.search(text) is not None
        ),
        "a process was refused another's memory or file descriptors (Operation not "
        "permitted): the kernel's ptrace_scope or the container's missing SYS_PTRACE "
        "capability; allow it (kernel.yama.ptrace_scope=0, --cap-add SYS_PTRACE) or leave "
        "out the transport that needs it (UCX_TLS=^cma)",
    ),
    (
        lambda text: (
            ("attach" in text or "mm" in text or "Shared" in text)
            and _PEER_SEGMENT_REFUSED.search(text) is not None
        ),
        "UCX could not attach a peer's shared memory: the ranks of one host run in different "
        "containers or user/PID namespaces; run them in one (docker --ipc=host --pid=host), "
        "or leave UCX's shared-memory transports out (UCX_TLS)",
    ),
    (
        lambda text: _NO_SPACE.search(text) is not None,
        "no space left on device: /dev/shm (a container's default is 64 MB) or the disk the "
        "job writes to is full; free or enlarge it",
    ),
)
"""Each finding's test of a line and what the event says: the finding and what to do."""
EXPLAINED = tuple(said for _, said in _FINDINGS)
"""The texts of this module's events: each already says the cause, and what to do."""


def events(line: Line) -> list[LogEvent]:
    text = line.text
    if "NCCL" in text:  # NCCL's own warnings are read by doctor.logs.nccl
        return []
    said = next((said for found, said in _FINDINGS if found(text)), None)
    return [line.event(kinds.BOOTSTRAP, text=said)] if said else []
