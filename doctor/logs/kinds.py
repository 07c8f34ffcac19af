"""The vocabulary of ``LogEvent.kind``: what a piece of log text says happened.

One name per fact the verdict rules (``doctor.verdict.log_rules``) reason about;
a parser that learns a new fact adds its kind here with the fields it sets.
"""

from __future__ import annotations

WATCHDOG_TIMEOUT = "watchdog_timeout"
"""ProcessGroupNCCL's watchdog timed out a collective: ``seq``, ``op``, ``numel``,
``process_group`` of the collective the rank waited in."""
STORE_TIMEOUT = "store_timeout"
"""A rank's wait on the c10d store (a store-based barrier, a key another rank sets) ran past
its timeout (TCPStore's ``waitForInput: socket ... timed out after Nms``): the rank waited
for another that never got there. ``rank`` is the waiter."""
NCCL_ABORT = "nccl_abort"
"""ProcessGroupNCCL's ``Some NCCL operations have failed or timed out ... we are taking the
entire process down``: the watchdog found a collective failed or timed out and ends the
process; which collective, the watchdog line before it says. A consequence, not a cause."""
WATCHDOG_STUCK = "watchdog_stuck"
"""PyTorch's heartbeat monitor: the rank's watchdog thread itself made no progress for
``code`` seconds, blocked in a CUDA or NCCL call (``ProcessGroupNCCL's watchdog got stuck
for N seconds``)."""
EXITING = "exiting"
"""The rank's program was ending (torch's ``destroy_process_group() was not called before
program exit``): what hangs after it hangs in the job's teardown."""
WORK_PROGRESS = "work_progress"
"""``last enqueued NCCL work: N, last completed NCCL work: M``: ``seq`` = N, ``completed`` = M."""
DESYNC = "desync"
"""TORCH_NCCL_DESYNC_DEBUG's report names ``rank`` as lagging: it never joined collective
``seq`` (or no collective at all when ``seq`` is None)."""
COLLECTIVE_AT = "collective_at"
"""``rank`` ran ``op`` (of ``numel`` elements) as collective ``seq``: TORCH_DISTRIBUTED_DEBUG=
DETAIL's fingerprint check and the desync report's snapshot say so; the rules compare ranks."""
NCCL_CALL = "nccl_call"
"""NCCL's own trace of one collective call (``NCCL_DEBUG_SUBSYS=COLL``): the process
(``host``, ``pid``) called ``op`` with ``numel`` elements as operation ``seq`` (NCCL's
``opCount``, counted per communicator) of communicator ``process_group``, which has
``nranks`` ranks. Kept apart from ``COLLECTIVE_AT``: ``opCount`` is per communicator, and
the line says which communicator only by this process's pointer to it."""
MISMATCH_DETECTED = "mismatch_detected"
"""torch's own check (TORCH_DISTRIBUTED_DEBUG=DETAIL) found the ranks disagreeing on a
collective: op type, shape or dtype; ``rank`` is the culprit where the check names one
(torch's Flight Recorder analyzer does), else None."""
WAITS_FOR_MAIN = "waits_for_main"
"""A rank's stack is inside a main-process-first section (``main_process_first()`` of
transformers and accelerate): it waits in a barrier until the main process is done."""
RANK_INFO = "rank_info"
"""Who a process is: NCCL's communicator init line (``rank``, ``nranks``, ``host``, ``pid``,
``device`` = bus id) or a launcher's report (torchelastic's failure block)."""
EXIT = "exit"
"""A rank's process ended: ``code`` is its exit status (negative: the signal that killed it)."""
CANCELLED = "cancelled"
"""The job was ended from outside (SLURM's ``CANCELLED AT ... DUE TO TIME LIMIT``,
``PREEMPTION`` or ``JOB REQUEUE``; torchrun's agent getting SIGTERM, SIGHUP or SIGINT):
``host`` where, ``text`` what then what to do, after the first ``": "``. Not a fault of the
job."""
EXCEPTION = "exception"
"""The last line of a Python traceback a rank printed (``ExcType: message``)."""
TRACEBACK_CUT = "traceback_cut"
"""A traceback that ends before its exception line (an excerpt cut short): ``text`` names
its last frame (``file:line in function``). Which exception it was is what would tell."""
OOM = "oom"
"""Memory ran out: a CUDA allocator error, the kernel's or a cgroup's OOM killer (``code``
``KILLED``: a process was killed, not an allocation refused)."""
KILLED = -9
"""SIGKILL, what the OOM killer sends."""
BOOTSTRAP = "bootstrap"
"""Communicator or store creation failed: ``peer`` is the address or interface it names."""
CONNECT_RETRY = "connect_retry"
"""A connection being retried (the store's client, NCCL's socket layer): healthy jobs print
these while their peers start; a set-up failure only where nothing says it connected."""
NETWORK = "network"
"""A transport error once the job ran: ``peer`` is the other end it names."""
PEER_GONE = "peer_gone"
"""A connection closed or reset by the other side: as often a peer that died as a link."""
UNSUPPORTED_OP = "unsupported_op"
"""The backend rejected an op: ``op`` names it."""
GPU_FAULT = "gpu_fault"
"""The GPU itself failed: an Xid (``code``), uncorrectable ECC, a GPU off the bus;
``device`` is the bus id where the text gives it."""
IOMMU_FAULT = "iommu_fault"
"""The IOMMU refused a device's DMA (Intel's ``DMAR: [DMA Write] ... fault``, AMD-Vi's
``IO_PAGE_FAULT``): ``device`` is the device's bus id. A GPU's peer-to-peer write (or a NIC's
RDMA) blocked this way never lands, and the collective waits for it until it times out."""
CUDA_ERROR = "cuda_error"
"""A CUDA error inside a rank (illegal memory access, launch failure): the GPU stopped
that rank's work, whether by a hardware fault or a bug in a kernel."""
COMPILING = "compiling"
"""A rank says it is compiling: torch.compile (dynamo, inductor, autotuning) or a JIT
extension build (torch.utils.cpp_extension, Megatron's fused kernels, DeepSpeed ops)."""
COMPILED = "compiled"
"""A rank says a build it ran is done (torch's ``Loading extension module``, Megatron's
``done with compiling and loading fused kernels``): it compiles no more."""
OUTLIER = "outlier"
"""NCCL's own diagnostics measured ``rank``'s link far from the median (``NCCL DIAG``)."""
PROGRESS = "progress"
"""The job reports it is training: DDP's runtime statistics, NCCL DIAG checks that pass,
a straggler detector that found none."""
STOPPED_EARLY = "stopped_early"
"""A rank's own early-stopping check ended its training (Keras' ``Epoch 00003: early
stopping``, LightGBM's ``Early stopping, best iteration is:``): where its peers went on, it
left the loop they wait in."""
WORKING = "working"
"""The job's own output counted on after a watchdog timeout (a progress bar went from
``completed`` to ``seq``): the process that drew it was at work in its own code."""
STRAGGLER = "straggler"
"""The job's straggler detector named ``rank`` slower than its peers."""
CATALOGUED = "catalogued"
"""A failure message NCCL or torchelastic prints that no specific parser reads, known from
their sources (``doctor.logs.catalogue``): ``hint_class`` is the class of the place that
raises it, ``hint_at`` that place."""
HARMLESS = "harmless"
"""A warning working jobs print, known from its source (``doctor.logs.harmless``): ``text``
is the line."""
JOINING = "joining"
"""A rank says it is joining the job's rendezvous, just before it blocks there until every
rank has come (Lightning's ``Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8``,
torchelastic's ``Rendezvous'ing worker group``)."""
JOINED = "joined"
"""The rendezvous completed (Lightning's ``All distributed processes registered``,
torchelastic's ``Rendezvous complete for workers``)."""
RAS_DEAD = "ras_dead"
"""NCCL RAS: a process is considered dead (unreachable via the RAS network)."""
RAS_MISSING = "ras_missing"
"""NCCL RAS: a rank sent no data about its communicator (unresponsive)."""
RAS_COUNT = "ras_count"
"""NCCL RAS: how many operations of ``op`` a rank launched (``seq``) in communicator
``process_group``; written for the ranks RAS singles out and for the groups it counts."""
RAS_ERROR = "ras_error"
"""NCCL RAS: a rank reported an initialization or asynchronous error (``text``)."""

ALL = (
    WATCHDOG_TIMEOUT,
    WATCHDOG_STUCK,
    EXITING,
    STORE_TIMEOUT,
    WORK_PROGRESS,
    NCCL_ABORT,
    DESYNC,
    COLLECTIVE_AT,
    NCCL_CALL,
    MISMATCH_DETECTED,
    WAITS_FOR_MAIN,
    RANK_INFO,
    EXIT,
    CANCELLED,
    EXCEPTION,
    TRACEBACK_CUT,
    OOM,
    BOOTSTRAP,
    CONNECT_RETRY,
    NETWORK,
    PEER_GONE,
    UNSUPPORTED_OP,
    GPU_FAULT,
    IOMMU_FAULT,
    CUDA_ERROR,
    COMPILING,
    COMPILED,
    OUTLIER,
    PROGRESS,
    STOPPED_EARLY,
    WORKING,
    STRAGGLER,
    CATALOGUED,
    HARMLESS,
    JOINING,
    JOINED,
    RAS_DEAD,
    RAS_MISSING,
    RAS_COUNT,
    RAS_ERROR,
)

RAS_KINDS = frozenset({RAS_DEAD, RAS_MISSING, RAS_COUNT, RAS_ERROR})
"""Kinds whose ``rank`` is a rank of the communicator ``process_group`` names."""

SET_UP_PROGRESS = frozenset({RANK_INFO, JOINING, JOINED, COMPILED})
"""Who a process is and how far its set-up got (NCCL's init line, a rendezvous joined, a
build done): a log holds these whatever failed later, and they never say that something did."""
BENIGN = SET_UP_PROGRESS | {
    EXITING,
    HARMLESS,
    PROGRESS,
    STOPPED_EARLY,
    WORKING,
    RAS_COUNT,
    NCCL_CALL,
    CONNECT_RETRY,
}
"""What a log holds whatever failed: set-up's progress, a program ending, a warning working
jobs print, the job's progress (an early stop too: alone it is a job that ended), RAS's
counts, NCCL's call trace, a connection retried."""
FAULTS = frozenset(ALL) - BENIGN
"""What says something failed, or waits (every other kind)."""
