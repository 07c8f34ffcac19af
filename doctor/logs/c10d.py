"""torch.distributed's own messages: ProcessGroupNCCL's watchdog, its desync report, the
collective fingerprint check and the TCPStore, one line at a time.

What each message proves:

* ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=N, OpType=OP, ...)``:
  this rank waited in collective N (op OP) past the timeout. It is a *victim*.
* ``... at work: N, last enqueued NCCL work: E, last completed NCCL work: C`` (torch 2.11:
  ``failure detected by watchdog at work sequence id: N PG status: last enqueued work: E,
  last completed work: C``, and the dump signal's ``Last enqueued NCCL work: E, last
  completed NCCL work: C``): the rank issued collectives up to E and finished up to C. A
  rank whose E is lower than the others' never reached their collective.
* ``TORCH_NCCL_DESYNC_DEBUG``'s report (``ranks [..] are the lagging ranks``,
  ``[..] finished collective #N, but didn't join collective #N+1``) names the laggards;
  its snapshot (``#N started ranks:`` / ``[..] started OP``) says who ran what.
* ``Detected mismatch between collectives on ranks. Rank A is running collective:
  CollectiveFingerPrint(...), but Rank B is running collective: ...`` (DETAIL debug).
* torch's Flight Recorder analyzer (``fr_trace``): ``missing ranks: {1}`` of a collective
  not every rank joined, ``Culprit rank R; Error type: COLLECTIVE_TYPE_MISMATCH``.
* ``ProcessGroupNCCL's watchdog got stuck for N seconds``: PyTorch's heartbeat monitor found
  the watchdog thread itself blocked in a CUDA or NCCL call, and ``destroy_process_group()
  was not called before program exit``: the program was ending; together, a hang in the
  job's teardown.
* Compilation in progress: torch.compile's dynamo and inductor, JIT extension builds
  (``Building extension module``, Megatron's ``compiling and loading fused kernels``), a
  build's end (``Loading extension module``) and its lock: torch's ``Waited on lock
  file``, and the ``Lock file exists in build directory`` warning NVIDIA's research code
  prints before it builds; that code's own build line (``Setting up PyTorch plugin "X"...``,
  ``Done.`` or ``Failed!`` after it once the build ends) while the build runs.
* A wait on the store that ran past its timeout (TCPStore's ``wait timeout after Nms`` and
  ``waitForInput: socket ... timed out after Nms``): the rank waited for another that never
  set the key or reached the barrier, a wait like the watchdog's, read against the job's
  progress bars.
* Store and rendezvous failures (client socket timeouts, ``waiting for clients``,
  ``Address already in use``) are bootstrap failures; a store connection the other side
  closed mid-job is a peer gone. So is an address the job cannot find: Gloo's ``Unable
  to find address for: IFACE`` (``GLOO_SOCKET_IFNAME`` names no interface, or the host
  name has no address), and a host name that does not resolve (``gai error``, ``Name or
  service not known``, ``Temporary failure in name resolution``): the store is never
  reached. Gloo's ``connectFullMesh failed`` is a group whose ranks could not connect to
  each other while it was being created (a peer's advertised address unreachable). So is a
  torch built without the backend asked for (``Distributed package doesn't have NCCL built
  in``: the Windows and macOS wheels), and two processes that joined as one global rank
  (Lightning's ``initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8`` twice): the launch started
  more processes than the Trainer's nodes and devices, or two nodes took one node rank.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from typing import Any

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.guarded import Guarded
from doctor.logs.lines import Line

_WATCHDOG = Guarded(
    re.compile(
        r"(?:[Cc]aught collective operation timeout: |^\s*)WorkNCCL\(([^)]*)\)|"
        r"Timed out waiting (\d{1,18})ms for (\w+) operation"
    ),
    ("WorkNCCL", "Timed out waiting"),
)
"""The watchdog's line, or its record quoted alone at the start of a line (an excerpt that
begins there, or a user who cut the words before it); gloo's timeout."""
PAIR_TIMEOUT = "Application timeout caused pair closure"
"""gloo's reason for closing every pair of a process whose own operation timed out
(``unbound_buffer.cc``), read as that timeout: its peers then read ``Connection closed by
peer``, a timeout and not a death."""
_ABORTING = re.compile(r"Some NCCL operations have failed or timed out")
_STUCK = re.compile(r"watchdog got stuck for (\d{1,18}) seconds|Heartbeat monitor timed out!")
"""The heartbeat monitor's exit message, or the line it logs first (a paste may hold only it)."""
_EXITING = re.compile(r"destroy_process_group\(\) was not called before program exit")
_SEQ = re.compile(r"SeqNum=(\d{1,18})")
_OP = re.compile(r"OpType=(\w+)")
_NUMEL = re.compile(r"NumelIn=(\d{1,18})")
_PG = re.compile(r"\[PG (?:ID )?(\d{1,18})")
_WORK = re.compile(
    r"(?:at work|at work sequence id|Timeout at NCCL work): (\d{1,18}),? (?:PG status: )?"
    r"last enqueued (?:NCCL )?work: (?P<enq>-?\d{1,18}), "
    r"last completed (?:NCCL )?work: (?P<done>-?\d{1,18})"
)
_DUMP_SIGNAL = re.compile(
    r"Last enqueued NCCL work: (?P<enq>-?\d{1,18}), last completed NCCL work: (?P<done>-?\d{1,18})"
)
_LAGGING = re.compile(r"ranks \[([\d, ]*)\] are the lagging ranks")
_JOINED_NOT_FINISHED = re.compile(r"\[([\d, ]*)\] joined but didn't finish collective #(\d{1,18})")
_FINISHED_NOT_JOINED = re.compile(
    r"\[([\d, ]*)\] finished collective #(\d{1,18}), but didn't join collective #(\d{1,18})"
)
_STARTED_AT = re.compile(r"#(\d{1,18}) started ranks:")
_STARTED = re.compile(r"^\s*\[([\d, ]*)\] started (\S+)")
_FINGERPRINT = re.compile(
    r"Rank (\d{1,18})\]? (?:is running (?:inconsistent )?collective|Running collective): "
    r"CollectiveFingerPrint\(([^)]*)\)"
)
SHAPES_ACROSS = (
    r"Cannot apply desired operation due to shape mismatches|"
    r"Shape mismatch in the collective instance \d"
)
"""Accelerate's debug mode (``ACCELERATE_DEBUG_MODE``): it compares the processes' shapes
before each of its collectives; TensorFlow's collective executor, whose group members gave
one collective instance different shapes."""
RING_ABORT = r"Aborting Ring\w{1,30} with Out of range"
"""TensorFlow's ring collective aborted when a worker's input ran out (``End of sequence``)."""
GROUP_SIZE = r"is joining a group with size \d{1,9}, but that group has size \d{1,9}"
"""TensorFlow's collective executor: workers disagree on a collective group's size."""
MPI_TRUNCATED = r"Fatal error in PMPI_\w{1,40}: Message truncated|MPI_ERR_TRUNCATE"
"""MPI's size check (``MPI_ERR_TRUNCATE``): a rank received more than its call posted, so its
peers gave the collective other counts (MPICH's ``Fatal error in PMPI_Reduce_scatter_block:
Message truncated``, Open MPI's ``MPI_ERR_TRUNCATE: message truncated``)."""
REDUCER = (
    r"Expected to have finished reduction in the prior iteration|"
    r"parameters that were not used in producing (?:the )?loss|"
    r"Expected to mark a variable ready only once|"
    r"Your training graph has changed in this iteration|"
    r"Parameter indices which did not receive grad for rank \d"
)
"""DDP's reducer, on a parameter that got no gradient in an iteration (find_unused_parameters
off: its bucket never reduced, so the next iteration's reductions are not the ones the ranks
expect; the list of such parameters it prints with ``TORCH_DISTRIBUTED_DEBUG``), got two
(reentrant checkpointing, a parameter used outside ``forward``), or whose use changed under
``static_graph=True``."""
_MISMATCH = re.compile(
    r"Detected mismatch between collectives|Error when verifying shape tensors for collective "
    r"(\w+)|input shapes into the collective are mismatched|Mismatch between collective|"
    r"op\.preamble\.length <= op\.nbytes|appears not to match sizes of the same param in process|"
    r"DDP expects same model across all ranks|"
    + REDUCER
    + "|"
    + RING_ABORT
    + "|"
    + GROUP_SIZE
    + "|"
    + SHAPES_ACROSS
    + "|"
    + MPI_TRUNCATED
)
"""gloo's ``op.preamble.length <= op.nbytes``: a peer sent more bytes than this rank's
collective expects (its ranks gave different sizes, or ran different collectives); gloo since
2025 adds "Is there a distributed collective mismatch in your code?" (pytorch/gloo#456).
DDP's check, at construction, that every rank built the same model
(``_verify_params_across_processes``), and its reducer's (``REDUCER``). TensorFlow's ring
collectives aborted when a worker's input ran out (``Out of range: End of sequence``): the
workers were given different numbers of batches. Its collective executor's check of a
group's size (``GROUP_SIZE``). MPI's (``MPI_TRUNCATED``)."""
UNIQUE_ID = re.compile(r"retr(?:ie|ei)ving ncclUniqueId from \[(\d{1,9})\]")
MEMBER = re.compile(
    r"(?:initializing ddp|Initializing distributed): "
    r"GLOBAL_RANK: (\d{1,9}), MEMBER: \d{1,9}/(\d{1,9})"
)
"""Lightning's line as each process joins the job; two processes with one global rank are a
launch whose nodes and tasks do not match the Trainer's (``num_nodes``, ``devices``)."""
JOINING = re.compile(r"Rendezvous'ing worker group|Attempting to join next rendezvous")
"""torchelastic's agent (its ``etcd`` rendezvous, in older releases) as it waits for the
job's other agents; Lightning's own line is ``MEMBER``."""
JOINED = re.compile(r"All distributed processes registered|Rendezvous complete for workers")
_DDP_STATS = re.compile(r"\[Rank (\d{1,18}) / (\d{1,18})\] Training \S+ unused_parameter_size")
_DDP_BUILT = re.compile(
    r"DDP Initialized with|c10d/(?:logger|reducer)\.cpp:\d|"
    r"\b(?:logger|reducer)\.cpp:\d{1,6}\].{0,120}?(?:DDP|Reducer|[Bb]ucket|find_unused_parameters)"
)
"""DDP's C++ logger and reducer, which exist once DDP was built: its constructor checked and
broadcast the model over the process group first, so the ranks had connected. Their file
alone is not enough (other projects have a ``logger.cpp``): torch's path, or DDP's words."""
_DDP_TIMED = re.compile(
    r"Time stats are currently only collected for CPU and CUDA devices|"
    r"Cuda time stats are not collected for multi-device modules"
)
"""DDP's logger, once, from a training step's forward (``Logger::set_runtime_stats_and_log``,
``logger.cpp``) on a device it cannot time: the job trains."""
_JIT_PRINTS = (
    r"compiling and loading fused kernels|Emitting ninja build file|Building extension module|"
    r"Lock file exists in build directory|Waited on lock file|"
    r"Setting up PyTorch plugin \"[^\"]{1,100}\"\.\.\.\s*$|kernel during runtime now"
)
_JIT_STACK = re.compile(
    r"file_baton\.py\"?, line \d{1,9},? in wait|"
    r"cpp_extension\.py\"?, line \d{1,9},? in _jit_compile|waiting for baton release"
)
"""A stack in torch's build (``_jit_compile``) or in its lock's ``FileBaton.wait`` (a
traceback's or faulthandler's frame), and a project's own baton that says it waits."""
JIT_BUILD = re.compile(_JIT_PRINTS + "|" + _JIT_STACK.pattern)
"""A JIT extension build under way, or waiting on its lock."""
_JIT_DONE = (
    r"Loading extension module|Time (?:taken )?to compile(?: or load)? \S{1,100} op:|"
    r"done with compiling and loading fused kernels"
)
_JIT_LOADED = re.compile(_JIT_DONE)
"""What torch prints once a build is done, ColossalAI's builder (whose start is its
``... kernel during runtime now``) and Megatron's (``>>> done with compiling and loading
fused kernels``): the job went past it."""
_COMPILING = re.compile(
    _JIT_PRINTS
    + "|"
    + _JIT_DONE
    + r"|torchdynamo start tracing|calling compiler function|AUTOTUNE \w+\(|"
    r"Compiling (?:FX graph|kernels?)|torch\._inductor\.compile_fx"
)
_FR_MISSING = re.compile(r"missing ranks: \{([\d, ]+)\}")
_FR_CULPRIT = re.compile(r"Culprit rank (\d{1,18}); Error type: (\w+)")
_MONITORED = re.compile(
    r"Ranks? ([\d, ]+) failed to pass monitoredBarrier|"
    r"reached monitoredBarrier, but received errors while waiting for send/recv from rank (\d+)"
)
"""Gloo's monitored barrier naming the ranks that did not reach it (rank 0's report), or the
rank whose answer failed (another rank's: ``Please check rank 0 logs for faulty rank``)."""
_SHAPE = re.compile(r"TensorShape=\[([^\]]*)\]")
_SEQ_FP = re.compile(r"SequenceNumber=(\d{1,18})")
_UNSUPPORTED = re.compile(
    r"(?:ProcessGroup ?\w{0,20}|[Bb]ackend \w{1,20}|\b(?:NCCL|[Gg]loo|MPI|UCC|CCL))\s?"
    r"does not support (\w+)|"
    r"\b(\w{1,64})[`'\"’]? is not supported (?:by|in|for) (?:\w+ ){0,3}?"
    r"(?:[Cc]ollective|NCCL|[Gg]loo|MPI|[Pp]rocess ?[Gg]roup|[Bb]ackend)|"
    r"no support for (\w{1,64}) in \w{1,32} process group"
)
"""A backend's refusal of an operation, in words that name the backend (``ProcessGroupNCCL
does not support gather``, ``Backend gloo does not support alltoall``, TensorFlow's
```IndexSlices` is not supported for Collective All-Reduce``). Whatever else "does not
support" (torchvision's ``PyTorch does not support non-writable tensors``, a warning in
countless logs) refuses no collective: read as a refusal, it outranked a watchdog timeout."""
_REJECTED = Guarded(
    re.compile(
        r"Tensors must be (?P<check>CUDA and dense|contiguous)|"
        r"(?P<dtype>Unsupported data type for NCCL process group)|"
        r"Unconvertible NCCL type (?P<unconvertible>\w{1,32})|"
        r"No backend type associated with device type (?P<device>\w{1,32})|"
        r"(?P<mpi>CUDA tensor detected and the MPI used doesn't have CUDA-aware MPI support)|"
        r"module 'torch\.distributed' has no attribute '(?P<missing>\w{1,64})'|"
        r"(?P<dense>Only CUDA dense tensor is supported for NCCL)|"
        r"Cannot use ReduceOp\.(?P<redop>\w{1,32}) with (?P<with>[\w -]{1,40}?)(?:[.)]|$|\s*\()|"
        r"(?P<anyop>Invalid reduce op)|(?P<scalar>Invalid scalar type)|"
        r"(?P<fp8>FP8 reduction support begins with sm90)|"
        r"No OpKernel was registered to support Op '(?P<kernel>\w{1,64})'|"
        r"(?P<devices>is joining a group with incompatible device type)"
    ),
    (
        "ensor",
        "nsupported",
        "Unconvertible",
        "backend",
        "has no attribute",
        "ReduceOp",
        "Invalid",
        "FP8",
        "OpKernel",
        "incompatible",
    ),
)
"""torch's own refusals of a collective's tensor: ProcessGroupNCCL's tensor checks (old
releases: ``Only CUDA dense tensor``) and its data-type table, a process group with no backend
for the tensor's device (an NCCL group given a CPU tensor), ProcessGroupMPI given a CUDA tensor
by an MPI that is not CUDA-aware; a ``torch.distributed`` function this torch does not have
(code written for a newer one); a reduction a backend lacks (gloo and XPU have no
``ReduceOp.AVG``, torch_xla's ``Invalid reduce op``, NCCL's FP8 reductions before sm90); and
gloo's data-type table (``Invalid scalar type``: bfloat16 on old releases); TensorFlow built
without a collective's kernel (``No OpKernel ... 'NcclAllReduce'``: Windows, ROCm builds), and
its NCCL group given CPU and GPU devices."""
_REJECTED_TOO = re.compile(
    r"Unsupported dtype: torch\.(?P<torchdtype>\w{1,32})|"
    r"data type is not supported for NCCL process group: (?P<nccldtype>\w{1,32})|"
    r"(?:Could not run|The operator) 'c10d::(?P<c10dop>\w{1,40}?)_?' (?:with arguments from the "
    r"'(?P<c10dbackend>\w{1,40})' backend|is not currently implemented for the "
    r"(?P<c10ddevice>\w{1,20}) device)|"
    r"(?P<devices>with type \w{1,8} and group_key \d{1,9} but that group has type)"
)
"""More of them, tried only on a line that holds one of their words (``c10d::``, ``dtype``,
``process group:``, ``group_key``; most lines hold none): the table of the NCCL wrapper vLLM
and SGLang call (``pynccl``: ``Unsupported dtype: torch.float8_e4m3fn``), torch 2.x's wording
of its own, a c10d op with no kernel for its tensors, TensorFlow's group given a device of
another type."""
_BACKWARD = re.compile(r"(\w{1,40}) backward only supports '\w{1,16}' reduction, got '(\w{1,16})'")
"""A functional collective's backward given a reduction it has no gradient for
(``all_reduce backward only supports 'sum' reduction, got 'avg'``)."""
_REFUSED = {"CUDA and dense": "a CPU or sparse tensor", "contiguous": "a non-contiguous tensor"}


def _refused(found: re.Match[str]) -> str:
    """What a refusal of ``_REJECTED`` or ``_REJECTED_TOO`` says was refused."""
    m: dict[str, str | None] = defaultdict(lambda: None, found.groupdict())
    if m["check"]:
        return _REFUSED[m["check"]]
    if m["device"]:
        return f"a {m['device']} tensor"
    if m["mpi"]:
        return "a CUDA tensor (this MPI is not CUDA-aware)"
    if m["missing"]:
        return f"torch.distributed.{m['missing']}, which this torch does not have"
    if m["dense"]:
        return _REFUSED["CUDA and dense"]
    if m["redop"]:
        return f"ReduceOp.{m['redop']} with {m['with']}"
    if m["anyop"]:
        return "the reduction operation"
    if m["fp8"]:
        return "an FP8 reduction on a GPU older than sm90"
    if m["kernel"]:
        return f"{m['kernel']} (this build has no kernel for it)"
    if m["devices"]:
        return "a group of CPU and GPU devices"
    if dtype := m["torchdtype"] or m["nccldtype"] or m["unconvertible"]:
        return f"the tensor's data type ({dtype})"
    if m["c10dop"]:
        on = f"{m['c10dbackend']} backend's" if m["c10dbackend"] else f"{m['c10ddevice']} device's"
        return f"c10d's {m['c10dop']} on the {on} tensors (no implementation for them)"
    return "the tensor's data type"


_STORE_CONNECT = re.compile(
    r"client socket has (?:timed out after \d+ ?m?s while trying to connect|failed to connect) "
    r"to (?:any network address of )?\(?\[?([\w.:-]+?)\]?[,:] ?(\d{1,18})\)?|"
    r"Retry to connect to ([\w.:-]+?):(\d{1,18}) while the server is not yet listening"
)
_CONNECT_RETRY = re.compile(
    r"client socket has failed to connect to (?!any network address)|"
    r"Retry to connect to \S{1,300} while the server is not yet listening|"
    r"The server socket on \S{1,300} (?:is not yet listening .{0,200}|has timed out), will retry|"
    r"No socket on \(.{1,300}\) is listening yet, will retry|"
    r"network addresses of \(.{1,255}\) cannot be retrieved \(gai error: -?\d{1,4} - "
    r"(?:Address family for hostname not supported|No address associated with hostname)"
)
"""The store's warnings on one attempt, or one address family, that failed: the client's at
each attempt (``[W socket.cpp] ... has failed to connect to [host]:port (errno: 99 - Cannot
assign requested address)``; it retries until its deadline, then raises ``has timed out
after``, in older releases ``has failed to connect to any network address of``), and a host
with no address of one family (``The IPv6 network addresses of (node01, 29500) cannot be
retrieved (gai error: -9 - Address family for hostname not supported)``: the other family is
tried), its debug lines on each attempt (``The server socket on [host]:port is not yet
listening (errno: 111 - Connection refused), will retry.``), and PaddlePaddle's store client
at each attempt (``Retry to connect to host:port while the server is not yet listening``).
Many healthy jobs print one at start. A name that does not resolve at all (``Name or service
not known``) is no retry, nor is the same words raised (``DistNetworkError: The client socket
has failed to connect to ...``): the client gave up."""
_RAISED = re.compile(r"\w(?:Error|Exception): ")


def connect_retry(text: str) -> bool:
    """Whether ``text`` is the store's warning that one attempt, or one family, failed."""
    return _CONNECT_RETRY.search(text) is not None and _RAISED.search(text) is None


_OVERCOUNTED = re.compile(
    r"store[ _]based[ _]barrier.{0,200}?world_size=(\d{1,18}), "
    r"(?:worker_count|num_workers_joined)=(\d{1,18})"
)
"""The store-based barrier's count of workers; more than the world is a store left from an
earlier run (a ``file://`` init file reused, a store port a previous job still holds)."""


def overcounted(text: str) -> bool:
    """Whether ``text`` is the store-based barrier counting more workers than the world."""
    counted = "worker_count=" in text or "num_workers_joined=" in text
    m = _OVERCOUNTED.search(text) if counted else None
    return m is not None and int(m.group(2)) > int(m.group(1))


_BARRIER = re.compile(
    r"store based barrier on rank:? (\d{1,18}).*?world_size=(\d{1,18}), "
    r"(?:worker_count|num_workers_joined)="
)
PORT_IN_USE = r"[Aa]ddress already in use"
"""The store's port is taken (``EADDRINUSE``)."""
NO_ADDRESS = r"Unable to find address for"
"""Gloo's: ``GLOO_SOCKET_IFNAME`` names no interface, or the host name has no address."""
UNRESOLVED = r"host not found|Name or service not known|Temporary failure in name resolution"
"""A host name that does not resolve (the resolver's words, as torch passes them on)."""
UNBUILT = re.compile(r"Distributed package doesn't have \w{1,16} bu[il]{2}t in")
"""torch's word for a backend its build lacks (the Windows and macOS wheels have no NCCL);
a user retyping it swaps letters (``bulit``)."""
UNLOADED = re.compile(
    r"(?:ImportError|OSError)\b.{0,300}?(?:cannot open shared object file|undefined symbol)|"
    r"version [`'‘]GLIBC\w{0,8}_[\d.]{1,12}['’] not found"
)
"""The dynamic loader's refusals as Python raises them (a library missing, or built against
another version); NCCL's own INFO line about an absent net plugin, which every healthy job
without one prints, is not an ``ImportError``."""
_BOOTSTRAP = re.compile(
    r"waiting for clients\. \d+/(\d{1,18}) clients joined|"
    r"server socket has failed to (?:listen on any local network address|bind)|"
    + PORT_IN_USE
    + r"|RendezvousTimeoutError|RendezvousClosedError|"
    r"Rendezvous .{0,80}timed out|DistStoreError: Socket Timeout|"
    r"connect\(\) timed out\. Original timeout was|"
    r"ncclCommInitRank failed|NCCL communicator init(?:ialization)? (?:failed|timed out)|"
    + NO_ADDRESS
    + r"|addresses of \(.{1,255}\) cannot be retrieved \(gai error|"
    + UNRESOLVED
    + r"|nodename nor servname provided|Gloo connectFullMesh failed|"
    + UNBUILT.pattern
)
_STORE_WAIT = re.compile(
    r"(?:waitForInput: socket .{0,300}? timed out after|wait timeout after) (\d{1,18}) ?ms"
)
_STORE_GONE = re.compile(
    r"(?:recvValue|recvBytes|sendBytes)\w* failed .*?remote=\[([\w.:-]+)\]|"
    r"Connection was likely closed\. Did the remote server shutdown or crash|"
    r"has failed to send a keep-alive heartbeat to the rendezvous"
)
"""The store's other end gone: its socket closed under a read or a write, or torchelastic's
agent no longer reaching the rendezvous it keeps alive (the store's host, or its agent, is
down)."""


MAX_STREAMS = 4096
"""Writers whose desync snapshot is followed at once."""


def _ranks(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d{1,18}", text)][:4096]


def _numel(shape: str) -> int | None:
    dims = [int(x) for x in re.findall(r"\d{1,18}", shape)]
    return math.prod(dims) if dims else None


class C10dParser:
    """The single-line messages, plus the one piece of state the desync snapshot needs
    (which ``#N started ranks:`` header each stream is under)."""

    def __init__(self) -> None:
        self._snapshot_seq: dict[str, int] = {}
        self._members: Counter[int] = Counter()
        self._out: list[LogEvent] = []
        self._line: Line | None = None

    def _event(self, kind: str, **fields: Any) -> None:
        assert self._line is not None
        self._out.append(self._line.event(kind, **fields))

    def feed(self, line: Line) -> list[LogEvent]:
        self._line, self._out = line, []
        text = line.text
        pg = m.group(1) if (m := _PG.search(text)) else None
        if m := _WATCHDOG.search(text):
            work = m.group(1) or ""
            seq, op, numel = _SEQ.search(work), _OP.search(work), _NUMEL.search(work)
            self._event(
                kinds.WATCHDOG_TIMEOUT,
                seq=int(seq.group(1)) if seq else None,
                op=op.group(1) if op else m.group(3),
                numel=int(numel.group(1)) if numel else None,
                process_group=pg,
            )
        elif PAIR_TIMEOUT in text:
            self._event(kinds.WATCHDOG_TIMEOUT, process_group=pg)
        elif _ABORTING.search(text):
            self._event(kinds.NCCL_ABORT, process_group=pg)
        elif ("stuck" in text or "Heartbeat" in text) and (m := _STUCK.search(text)):
            seconds = int(m.group(1)) if m.group(1) else None
            self._event(kinds.WATCHDOG_STUCK, code=seconds, process_group=pg)
        elif _EXITING.search(text):
            self._event(kinds.EXITING)
        if m := _WORK.search(text):
            self._event(kinds.WATCHDOG_TIMEOUT, seq=int(m.group(1)), process_group=pg)
        if m := _WORK.search(text) or _DUMP_SIGNAL.search(text):
            self._event(
                kinds.WORK_PROGRESS, seq=int(m["enq"]), completed=int(m["done"]), process_group=pg
            )
        self._desync(line)
        for rank, fingerprint in _FINGERPRINT.findall(text)[:64]:
            op, seq, shape = (
                _OP.search(fingerprint),
                _SEQ_FP.search(fingerprint),
                _SHAPE.search(fingerprint),
            )
            self._event(
                kinds.COLLECTIVE_AT,
                rank=int(rank),
                op=op.group(1) if op else None,
                seq=int(seq.group(1)) if seq else None,
                numel=_numel(shape.group(1)) if shape else None,
            )
        if mismatched := _MISMATCH.search(text):
            self._event(kinds.MISMATCH_DETECTED, rank=None, op=mismatched.group(1))
        for m in _FR_CULPRIT.finditer(text):
            if m.group(2) != "COLLECTIVE_STATE_MISMATCH":
                self._event(kinds.MISMATCH_DETECTED, rank=int(m.group(1)))
        if m := _FR_MISSING.search(text):
            for rank in _ranks(m.group(1)):
                self._event(kinds.DESYNC, rank=rank)
        if _COMPILING.search(text) or (
            ("baton" in text or "_jit_compile" in text) and _JIT_STACK.search(text)
        ):  # one of these words is in every line _JIT_STACK matches: most lines skip it
            self._event(kinds.COMPILED if _JIT_LOADED.search(text) else kinds.COMPILING)
        if m := _DDP_STATS.search(text):
            self._event(kinds.PROGRESS, rank=int(m.group(1)), nranks=int(m.group(2)))
        elif ".cpp" in text or "DDP" in text:
            if _DDP_TIMED.search(text):
                self._event(kinds.PROGRESS)
            elif _DDP_BUILT.search(text):
                self._event(kinds.JOINED)
        if "monitoredBarrier" in text and (m := _MONITORED.search(text)):
            for rank in _ranks(m.group(1) or m.group(2)):
                self._event(kinds.DESYNC, rank=rank)
        too = "c10d::" in text or "dtype" in text or "process group:" in text or "group_key" in text
        if m := _REJECTED.search(text) or (_REJECTED_TOO.search(text) if too else None):
            self._event(kinds.UNSUPPORTED_OP, op=_refused(m))
        elif not mismatched and "support" in text and (m := _UNSUPPORTED.search(text)):
            # (not after a mismatch: DDP's reducer error lists unsupported cases as causes)
            self._event(kinds.UNSUPPORTED_OP, op=m.group(1) or m.group(2) or m.group(3))
        if "backward only" in text and (m := _BACKWARD.search(text)):
            self._event(
                kinds.UNSUPPORTED_OP, op=f"the backward of {m[1]} with ReduceOp.{m[2].upper()}"
            )
        if m := MEMBER.search(text):
            rank = int(m.group(1))
            self._members[rank] += 1
            world = int(m.group(2))
            self._event(kinds.JOINING, rank=rank, nranks=world)
            # the same rank twice before the world is whole: two processes, one rank (a job
            # restarted whole prints every rank again, after all of them)
            if self._members[rank] == 2 and len(self._members) < world:
                self._event(kinds.BOOTSTRAP, rank=rank, nranks=world)
        elif "endezvous" in text and JOINING.search(text):
            self._event(kinds.JOINING)
        if ("registered" in text or "complete" in text) and JOINED.search(text):
            self._event(kinds.JOINED)
        self._store(text)
        return self._out

    def _store(self, text: str) -> None:
        if _STORE_WAIT.search(text):
            self._event(kinds.STORE_TIMEOUT)
        elif m := _STORE_CONNECT.search(text):
            host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            self._event(kinds.BOOTSTRAP, peer=f"{host}:{port}")
        elif overcounted(text):
            self._event(kinds.BOOTSTRAP)
        elif m := _BARRIER.search(text):
            self._event(kinds.BOOTSTRAP, rank=int(m.group(1)), nranks=int(m.group(2)))
        elif m := _BOOTSTRAP.search(text):
            self._event(kinds.BOOTSTRAP, nranks=int(m.group(1)) if m.group(1) else None)
        elif ("Error" in text or "GLIBC" in text) and UNLOADED.search(text):
            self._event(kinds.BOOTSTRAP)
        elif m := _STORE_GONE.search(text):
            self._event(kinds.PEER_GONE, peer=m.group(1) or "the store")

    def _desync(self, line: Line) -> None:
        """The desync report's lines; the snapshot's rank lines follow a ``#N started`` line.
        A rank waiting for another's ``ncclUniqueId`` names a rank that never reached the
        group's first collective (the unique id is published there)."""
        text = line.text
        if m := UNIQUE_ID.search(text):
            self._event(kinds.DESYNC, rank=int(m.group(1)))
        if m := _LAGGING.search(text):
            for rank in _ranks(m.group(1)):
                self._event(kinds.DESYNC, rank=rank)
        if m := _JOINED_NOT_FINISHED.search(text):
            for rank in _ranks(m.group(1)):
                self._event(kinds.DESYNC, rank=rank, seq=int(m.group(2)))
        if m := _FINISHED_NOT_JOINED.search(text):
            for rank in _ranks(m.group(1)):
                self._event(kinds.DESYNC, rank=rank, seq=int(m.group(3)), completed=int(m.group(2)))
        if m := _STARTED_AT.search(text):
            if len(self._snapshot_seq) >= MAX_STREAMS:
                self._snapshot_seq.clear()
            self._snapshot_seq[line.stream] = int(m.group(1))
        elif "finished ranks:" in text:
            self._snapshot_seq.pop(line.stream, None)
        elif line.stream in self._snapshot_seq and (m := _STARTED.search(text)):
            for rank in _ranks(m.group(1)):
                self._event(
                    kinds.COLLECTIVE_AT,
                    rank=rank,
                    op=m.group(2),
                    seq=self._snapshot_seq[line.stream],
                )
