"""What launchers say about ranks that ended: torchelastic (torchrun), SLURM (a task that
died, a node that failed, a step it cancelled at its time limit or for a preemption), mpirun
(Open MPI's one line and its first-failed-process report, MPICH/Intel MPI's ``BAD
TERMINATION`` banner), ``torch.multiprocessing.spawn`` and horovodrun; and Horovod's stall
inspector, which names the ranks that never submitted a collective the others wait in.

torchrun's ``ChildFailedError`` summary lists every failed rank with its host, pid and
exit code, and singles out the *first observed failure* (its "Root Cause"); the other
launchers say it one line per task. An exit code below zero is the signal that killed the
process (-9: SIGKILL, often the OOM killer; -6: SIGABRT, which ProcessGroupNCCL's
watchdog raises itself after a timeout; -11: a segmentation fault).
"""

from __future__ import annotations

import re
import signal

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.block import Collecting, Fact
from doctor.logs.guarded import Guarded
from doctor.logs.lines import Line

ROOT_CAUSE = "first observed failure"
"""Text an ``exit`` event starts with when torchelastic names it the first failure."""

_SRUN = re.compile(
    r"srun: error: ([\w.-]+): tasks? ([\d,\-]+): (Killed|Exited with exit code (\d{1,18})|"
    r"Segmentation fault|Aborted|Bus error|Terminated|[A-Z][\w ]{2,40})"
)
_NODE_FAILURE = re.compile(
    r"srun: error: Node failure on ([\w.-]+)|srun: error: Aborting, io error and missing step"
)
_FIRST_EXITED = re.compile(r"srun: First task exited \d{1,9}s ago")
"""srun's word (``--wait``) that one of the step's tasks ended while the others still run."""
_CANCELLED = Guarded(
    re.compile(
        r"(?:(?:JOB|STEP) \S+ )?(?:ON ([\w.-]+) )?CANCELLED AT \S+ DUE TO "
        r"(TIME LIMIT|PREEMPTION|JOB REQUEUE|NODE FAILURE|TASK FAILURE)"
    ),
    ("CANCELLED",),
)
"""slurmstepd's (and srun's) line when the scheduler ends a job step: its time limit ran
out, a higher-priority job preempted it, or it was requeued (SIGTERM, then SIGKILL); or a
node or a task of the job failed, which is a rank lost there."""
_AFTER_CANCEL = {
    "time limit": "ask for more time, or checkpoint and requeue",
    "preemption": "requeue",
    "job requeue": "it was requeued",
}
_STEP_OOM = re.compile(
    r"Detected \d+ oom[-_]kill event|\bOOMKilled\b|killed due to the node running low on memory|"
    r"exceeded memory limit \(\d{1,20} > \d{1,20}\), being killed|Exceeded job memory limit"
)
"""The cgroup's OOM killer, as SLURM's step reports it (or its own accounting, killing a step
over its memory limit) and as Kubernetes gives a container's
reason for ending (``Reason: OOMKilled``, a pod's status); Ray's memory monitor, which kills a
task or actor before the kernel's would (``Task was killed due to the node running low on
memory``)."""
OWN_ABORT = "aborted on its own failed check"
"""Text an ``exit`` event starts with when a process stopped itself on a failed check (a
fatal check, ``MPI_Abort``)."""
_MPI_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d{1,9}) in communicator")
"""Open MPI's report of a rank that called ``MPI_Abort``: the program stopped on its own
error."""
_RUNTIME_LOST = re.compile(
    r"(?:ORTE|PRTE) has lost communication with a remote daemon|"
    r"(?:prterun|mpirun) failed to receive scheduled heartbeat communications|"
    r"(?:prterun|mpirun|prte) detected that one or more processes exited with non-zero status|"
    r"MPI_ERR_PROC_FAILED|Fatal error in PMPI_\w{1,40}: Process failed|"
    r"Horovod has been shut down\. This was caused by an exception on one of the ranks|"
    r"Horovod detected that one or more processes exited with non-zero status|"
    r"ProcessFailureError: Devices failed|"
    r"An MPI communication peer process has unexpectedly disconnected|"
    r"JAX distributed service detected fatal errors|"
    r"The actor died (?:unexpectedly|because its node has died)|"
    r"A worker died or was killed while executing|"
    r"has been marked dead because the detector has missed too many heartbeats|"
    r"Worker proc \S{1,80} died unexpectedly"
)
"""A runtime's own word that one of the job's processes (or its node) is gone: Open MPI's
(ORTE's, PRTE's) daemon or peer lost or silent, a process that exited non-zero, ULFM's and
MPICH's failed process, Horovod shut down by another rank's exception or exit, JAX's
coordination service seeing another task die (or its devices failed), a Ray actor (a
trainer's worker) or worker process that died, a Ray node its head stopped hearing from, a
vLLM worker process that died. Which one, and why, the runtime does not say here."""
_LOST_WORDS = (
    "ORTE",
    "PRTE",
    "MPI",
    "prterun",
    "mpirun",
    "JAX",
    "died",
    "dead",
    "Horovod",
    "Failure",
)
LAUNCH_SETUP = re.compile(
    r"pyxis: (?:couldn't start container|container start failed)|"
    r"spank: required plugin \S{1,200}: \w{1,40}\(\) failed|Failed to invoke spank plugin stack|"
    r"not enough slots available in the system|"
    r"(?:mpirun|prterun) was unable to (?:launch|find|start) the specified "
    r"(?:application|executable)|"
    r"PMIX? ERROR: .{0,200}?(?:UNREACHABLE|NOT-FOUND|OUT-OF-RESOURCE)|"
    r"PMI2?_Init failed|It looks like (?:MPI_INIT|orte_init|opal_init) failed|"
    r"(?:ORTE|PRTE) was unable to reliably start one or more daemons|"
    r"An? (?:ORTE|PRTE) daemon has unexpectedly failed after launch|"
    r"MPI_INIT has failed because at least one MPI process is unreachable|"
    r"Open MPI failed to TCP connect to a peer MPI process|"
    r"Open MPI has detected that this process has attempted to initialize|"
    r"Fatal error in PMPI_Init(?:_thread)?\b|"
    r"An error occurred in MPI_Init(?:_thread)?\b|Local abort before MPI_INIT completed|"
    r"HYDU_sock_(?:connect|get_iface_ip) .{0,80}?: unable to (?:get host address|find interface)|"
    r"Launch proxy failed|"
    r"srun: error: (?:Task launch for \S{1,80} failed on node|timeout waiting for task launch|"
    r"task \d{1,9} launch failed|Unable to create step for job)|"
    r"slurmstepd: error: execve\(\)|"
    r"ssh: connect to host \S{1,200} port \d{1,5}: (?:No route to host|Connection refused|"
    r"Connection timed out)|"
    r"Hostfile contains a bad entry|Unable to proceed, no GPU resources available"
)
"""The launcher could not start the job's processes (SLURM's container plugin pyxis or
another spank plugin, Open MPI's slots and daemons, PMI and PMIx: an MPI built without
SLURM's PMI started by srun; Open MPI's own start, ``It looks like MPI_INIT failed``, and
its errors-are-fatal banner for ``MPI_Init`` itself or an abort before it completed): the
set-up, before any rank ran. PRTE (Open MPI 5) and MPICH's Hydra say the same: daemons that
did not start, processes that cannot reach each other as MPI starts, an interface or host
that is not there; SLURM's srun a task it could not launch; pdsh's ssh a host it cannot
reach, DeepSpeed's launcher a hostfile it cannot use.
An ``Exited with exit code 1`` that follows is that failure, not a rank's."""
_SETUP_WORDS = (
    "pyxis",
    "spank",
    "slots",
    "unable",
    "PMI",
    "init failed",
    "INIT",
    "daemon",
    "Open MPI",
    "MPI_Init",  # and MPICH's PMPI_Init
    "HYDU",
    "Launch proxy",
    "aunch",
    "Unable to create step",
    "execve",
    "ssh: connect",
    "Hostfile",
    "GPU resources",
)
"""One of these words is in every line ``LAUNCH_SETUP`` matches."""
_MPIRUN = re.compile(
    r"process rank (\d{1,18}) with PID (\d{1,18}) on node ([\w.-]+) exited on signal (\d{1,18})"
)
_SPAWN = re.compile(r"process (\d{1,18}) terminated with (?:signal (SIG\w+)|exit code (\d{1,18}))")
_HOROVODRUN = re.compile(r"\bProcess (\d{1,9}) exit with status code (-?\d{1,18})")
"""horovodrun's launcher (its gloo run, ``horovod/runner/gloo_run.py``): the process index
is the rank; its command runs through a shell, so a signal is ``128 + N`` (137: SIGKILL)."""
_OMPI_FIRST = re.compile(
    r"Process name: \[(?:\[\d{1,18},\d{1,18}\]|[\w.-]{1,80}@\d{1,18}),(\d{1,9})\]"
)
"""Open MPI's report of the first process that exited with a non-zero status
(``help-orterun.txt``): ``Process name: [[jobid,step],rank]``, PRTE's
``[prterun-node-pid@step,rank]``; its exit code follows on a line of its own."""
_EXITED_DUE_TO = re.compile(
    r"(?:prterun|mpirun|mpiexec|prte) has exited due to process rank (\d{1,9}) with PID "
    r"(\d{1,18}) on node ([\w.-]{1,200})"
)
"""Open MPI's launcher ending the job for a rank that called ``abort`` or exited without
finalizing (``help-prun.txt``, ``help-orterun.txt``)."""
_DEEPSPEED = re.compile(r"exits with return code = (-?\d{1,18})")
_DIED_WITH = re.compile(r"died with <Signals\.(SIG[A-Z]{2,8}): \d{1,3}>")
"""Python's ``CalledProcessError`` for a child a signal killed, as the old
``torch.distributed.launch`` raised it: ``Command '[...]' died with <Signals.SIGSEGV: 11>.``"""
_SIGNALED = re.compile(r"process was signaled to shutdown with signal (\d{1,3})\b")
"""Text Generation Inference's launcher, for its shard, download or backend process a signal
ended (``Shard process was signaled to shutdown with signal 9``); the shard's number comes
on its next line (``Shard 0 failed to start``)."""
_EXITCODE_FIELD = re.compile(r"^\s*exitcode\s*:\s*(-\d{1,3})\b")
"""torchelastic's ``exitcode`` field without the ``Failures:`` table around it (a user
pasted the one line): only a signal's code (below zero) says how the rank ended."""
_AGENT_SIGNAL = re.compile(
    r"SignalException(?:: Process (\d{1,18}) got signal: (\d{1,3}))?|"
    r"Received Signals\.(SIG[A-Z]{2,8}) death signal, shutting down workers"
)
"""torchelastic's agent itself got a signal and stops its workers: the job was stopped
from outside (SIGHUP: the terminal that started it closed; SIGTERM: the scheduler, a
person, the host; SIGINT: Ctrl-C)."""
_STOPPED_BY = {
    "SIGHUP": "the terminal that started it closed (run it under nohup, tmux or the scheduler)",
    "SIGINT": "someone pressed Ctrl-C",
}
_LOCAL_RANK_ARG = re.compile(r"--local_rank=(\d{1,18})")
_ELASTIC = re.compile(
    r"failed \(exitcode: (-?\d{1,18})\)(?: local_rank: (\d{1,18}))?(?: \(pid: (\d{1,18})\))?"
)
"""torchelastic's failure line; the exit code is enough (a pasted line often loses the rest)."""
_ELASTIC_ROW = re.compile(
    r"rank:? ?(\d{1,18}) \(local[_ ]rank: ?\d{1,18}\)\s*exitcode:? ?(-?\d{1,18})"
    r"(?: \(pid: (\d{1,18})\))?"
)
"""One failure of torchelastic's table with its layout collapsed (as a pasted table renders)."""
_PDSH_EXIT = re.compile(r"pdsh@[\w.-]{1,200}: ([\w.-]{1,200}): ssh exited with exit code (\d{1,3})")
"""pdsh (DeepSpeed's multi-node launcher) on a host whose command ended badly: 255 is ssh's
own failure to reach it (its ``ssh: connect to host`` line says why, a set-up failure), any
other code the remote launcher's, whose ranks ended."""
_COMPOSE_EXIT = re.compile(r"^\s*([\w.-]{1,200}[-_]\d{1,4}) exited with code (\d{1,3})\s*$")
"""Docker Compose's line for a service's container (``project-service-N``, ``_N`` before
Compose 2) that ended: a code above 128 is the signal that ended it (137: SIGKILL, the OOM
killer's or ``docker kill``'s), 0 success, the job's end (progress, as ``doctor.logs.training``
reads a framework's word that training finished)."""
SIGNAL_WORDS = {
    "Killed": -9,
    "Segmentation fault": -11,
    "Aborted": -6,
    "Bus error": -7,
    "Terminated": -15,
    "Floating point exception": -8,
    "Illegal instruction": -4,
}
"""The exit code (minus the signal) of the words a shell or a runtime prints for a signal."""


def _task_ranks(spec: str) -> list[int]:
    ranks: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if _number(lo) and (not hi or _number(hi)):
            ranks.extend(range(int(lo), min(int(hi or lo), int(lo) + 4096) + 1))
    return ranks[:4096]


def _number(text: str) -> bool:
    """Digits ``int()`` reads, no more than 18 of them (a longer run is no task id)."""
    return text.isdecimal() and len(text) <= 18


def signal_code(name: str) -> int | None:
    try:
        return -int(signal.Signals[name])
    except KeyError:
        return None


def _shell_status(code: int) -> int:
    """A command's status as a shell reports it: ``128 + N`` is signal N (``-N`` here)."""
    return 128 - code if 128 < code < 160 else code


def events(line: Line) -> list[LogEvent]:
    text = line.text
    if m := _SRUN.search(text):
        code = int(m.group(4)) if m.group(4) else SIGNAL_WORDS.get(m.group(3))
        return [
            line.event(kinds.EXIT, rank=r, host=m.group(1), code=code)
            for r in _task_ranks(m.group(2))
        ]
    if m := _NODE_FAILURE.search(text):
        return [line.event(kinds.EXIT, host=m.group(1) or line.host, rank=None)]
    if "First task" in text and _FIRST_EXITED.search(text):
        return [line.event(kinds.EXIT, rank=None)]
    if m := _CANCELLED.search(text):
        why = m.group(2).lower()
        if why in ("node failure", "task failure"):
            return [line.event(kinds.EXIT, host=m.group(1) or line.host, rank=None)]
        return [
            line.event(
                kinds.CANCELLED,
                rank=None,
                host=m.group(1) or line.host,
                text=f"SLURM cancelled the job step due to {why}, stopping the ranks from "
                f"outside (SIGTERM, then SIGKILL): {_AFTER_CANCEL[why]}",
            )
        ]
    if "MPI_ABORT" in text and (m := _MPI_ABORT.search(text)):
        said = f"{OWN_ABORT}: {text.strip()[:300]}"
        return [line.event(kinds.EXIT, rank=int(m.group(1)), code=None, text=said)]
    if any(word in text for word in _LOST_WORDS) and _RUNTIME_LOST.search(text):
        return [line.event(kinds.EXIT, rank=None, code=None)]
    if any(w in text for w in ("oom", "OOM", "low on memory", "emory limit")) and (
        _STEP_OOM.search(text)
    ):
        return [line.event(kinds.OOM, code=kinds.KILLED)]
    if any(word in text for word in _SETUP_WORDS) and LAUNCH_SETUP.search(text):
        return [line.event(kinds.BOOTSTRAP)]
    if m := _MPIRUN.search(text):
        return [
            line.event(
                kinds.EXIT,
                rank=int(m.group(1)),
                pid=int(m.group(2)),
                host=m.group(3),
                code=-int(m.group(4)),
            )
        ]
    if m := _SPAWN.search(text):
        code = signal_code(m.group(2)) if m.group(2) else int(m.group(3))
        return [line.event(kinds.EXIT, rank=int(m.group(1)), code=code)]
    if m := _HOROVODRUN.search(text):
        return [line.event(kinds.EXIT, rank=int(m.group(1)), code=_shell_status(int(m.group(2))))]
    if "exited due to" in text and (m := _EXITED_DUE_TO.search(text)):
        return [line.event(kinds.EXIT, rank=int(m.group(1)), pid=int(m.group(2)), host=m.group(3))]
    if m := _OMPI_FIRST.search(text):
        return [line.event(kinds.EXIT, rank=int(m.group(1)), code=None)]
    if "died with" in text and (m := _DIED_WITH.search(text)):
        return [line.event(kinds.EXIT, rank=None, code=signal_code(m.group(1)))]
    if "signaled" in text and (m := _SIGNALED.search(text)):
        return [line.event(kinds.EXIT, rank=None, code=-int(m.group(1)))]
    if "exitcode" in text and (m := _EXITCODE_FIELD.match(text)):
        return [line.event(kinds.EXIT, rank=None, code=int(m.group(1)))]
    if "ignal" in text and (m := _AGENT_SIGNAL.search(text)):
        return [_agent_stopped(line, m)]
    if m := _DEEPSPEED.search(text):
        local = _LOCAL_RANK_ARG.search(text)
        rank = int(local.group(1)) if local else line.rank
        return [line.event(kinds.EXIT, rank=rank, code=int(m.group(1)))]
    if m := _ELASTIC.search(text):
        pid = int(m.group(3)) if m.group(3) else None
        return [line.event(kinds.EXIT, rank=None, pid=pid, code=int(m.group(1)))]
    if m := _ELASTIC_ROW.search(text):
        pid = int(m.group(3)) if m.group(3) else None
        return [line.event(kinds.EXIT, rank=int(m.group(1)), pid=pid, code=int(m.group(2)))]
    if "pdsh@" in text and (m := _PDSH_EXIT.search(text)) and m.group(2) != "255":
        return [line.event(kinds.EXIT, rank=None, host=m.group(1), code=int(m.group(2)))]
    if "exited with code" in text and (m := _COMPOSE_EXIT.match(text)):
        if m.group(2) == "0":  # the container's command succeeded: the job ran to its end
            return [line.event(kinds.PROGRESS, rank=None)]
        code = _shell_status(int(m.group(2)))
        return [line.event(kinds.EXIT, rank=None, host=m.group(1), code=code)]
    return []


def _agent_stopped(line: Line, m: re.Match[str]) -> LogEvent:
    name = m.group(3) or (signal_name(int(m.group(2))) if m.group(2) else "a signal")
    why = _STOPPED_BY.get(
        name, "something outside the job stopped it (the scheduler, a person, the host)"
    )
    pid = f" (pid {m.group(1)})" if m.group(1) else ""
    return line.event(
        kinds.CANCELLED,
        rank=None,
        text=f"torchelastic's agent{pid} got {name} and stopped its workers: {why}",
    )


def signal_name(number: int) -> str:
    """``9`` -> ``SIGKILL``; a number no signal has -> ``signal 99``."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*)$")
_RANK = re.compile(r"(\d{1,18})")
_EXITCODE = re.compile(r"(-?\d{1,18})(?: \(pid: (\d{1,18})\))?")


class ElasticFailures(Collecting):
    """torchelastic's ``ChildFailedError`` summary: ``Failures:`` and ``Root Cause``
    sections of ``[i]:`` entries with ``host``, ``rank``, ``exitcode``, ``traceback``."""

    @staticmethod
    def start(line: Line) -> bool:
        return "Failures:" in line.text or "Root Cause" in line.text

    def __init__(self, line: Line) -> None:
        super().__init__()
        self._root = "Root Cause" in line.text
        self._entry: dict[str, str] = {}
        self._where = line.where
        self._line = line

    def feed(self, line: Line) -> bool:
        text = line.text
        if "Root Cause" in text:
            self._flush()
            self._root = True
        elif "Failures:" in text or re.match(r"^\s*\[\d+\]:\s*$", text):
            self._flush()
        elif m := _FIELD.match(text):
            if not self._entry:
                self._line = line
            self._entry[m.group(1)] = m.group(2).strip()
        elif re.match(r"^\s*(?:[-=]{8,}|<NO_OTHER_FAILURES>)\s*$", text):
            self._flush()
        elif text.strip():
            self._flush()
            return False
        return True

    def _flush(self) -> None:
        entry, self._entry = self._entry, {}
        if "exitcode" not in entry and "rank" not in entry:
            return
        rank = _RANK.search(entry.get("rank", ""))
        code = _EXITCODE.match(entry.get("exitcode", ""))
        why = entry.get("traceback", "")
        text = (
            (f"{ROOT_CAUSE}: " if self._root else "")
            + f"rank {entry.get('rank', '?')} on {entry.get('host', '?')} "
            + f"exitcode {entry.get('exitcode', '?')}"
            + (f": {why}" if why and not why.startswith("To enable traceback") else "")
        )
        self._out.append(
            self._line.event(
                kinds.EXIT,
                rank=int(rank.group(1)) if rank else None,
                host=entry.get("host", "") or self._line.host,
                pid=int(code.group(2)) if code and code.group(2) else None,
                code=int(code.group(1)) if code else None,
                text=text[:400],
            )
        )

    def close(self) -> list[Fact]:
        self._flush()
        return self.take()


_HYDRA_FIELD = re.compile(
    r"(?:RANK (\d{1,18}) )?PID (\d{1,18}) RUNNING AT ([\w.-]+)|EXIT CODE: ?(-?\d{1,18})|"
    r"KILLED BY SIGNAL: ?(\d{1,3})"
)


_MISSING_RANK = re.compile(r"^\s*(\d{1,9})!?: \[([^\]]{0,300})")
MISSING_SAID = "Horovod's stall inspector: rank"
"""How the text of a ``Missing ranks:`` entry begins (``HorovodMissing``)."""


class HorovodMissing(Collecting):
    """Horovod's stall inspector's list after its warning (``stall_inspector.cc``):
    ``Missing ranks:`` then one ``R: [tensor, ...]`` line per rank that has not submitted
    those tensors (``R!:`` when it is past the shutdown time): the ranks the others wait
    for."""

    @staticmethod
    def start(line: Line) -> bool:
        return line.text.strip() == "Missing ranks:"

    def __init__(self, line: Line) -> None:
        super().__init__()

    def feed(self, line: Line) -> bool:
        m = _MISSING_RANK.match(line.text)
        if m is None:
            return False
        text = f"{MISSING_SAID} {m.group(1)} never submitted [{m.group(2)}]"
        self._out.append(line.event(kinds.MISMATCH_DETECTED, rank=int(m.group(1)), text=text))
        return True


class HydraTermination(Collecting):
    """MPICH's and Intel MPI's (Hydra's) banner for a process that ended badly: ``=``-framed
    lines ``BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES``, ``[RANK r] PID p RUNNING
    AT host``, then ``EXIT CODE: n`` (as the process exited) or ``KILLED BY SIGNAL: n``."""

    @staticmethod
    def start(line: Line) -> bool:
        return "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" in line.text

    def __init__(self, line: Line) -> None:
        super().__init__()
        self._line = line
        self._fields: dict[str, str] = {}

    def feed(self, line: Line) -> bool:
        if not line.text.lstrip().startswith("="):
            self._flush()
            return False
        for m in _HYDRA_FIELD.finditer(line.text):
            names = ("rank", "pid", "host", "exit", "signal")
            self._fields.update({k: v for k, v in zip(names, m.groups(), strict=True) if v})
        if set(line.text.strip()) == {"="}:
            self._flush()
        return True

    def _flush(self) -> None:
        fields, self._fields = self._fields, {}
        if "host" not in fields and "exit" not in fields and "signal" not in fields:
            return
        code = -int(fields["signal"]) if "signal" in fields else int(fields.get("exit", "0"))
        self._out.append(
            self._line.event(
                kinds.EXIT,
                rank=int(fields["rank"]) if "rank" in fields else None,
                host=fields.get("host", "") or self._line.host,
                pid=int(fields["pid"]) if "pid" in fields else None,
                code=code or None,
                text=f"MPI bad termination on {fields.get('host', '?')}: exit code {code}",
            )
        )

    def close(self) -> list[Fact]:
        self._flush()
        return self.take()
