"""One line of a job's output, with the prefixes launchers and NCCL put in front of it.

A combined log interleaves every rank's lines, each behind the prefix of what
wrote it; peeling them off once here lets every parser read the message and
still know whose it is:

==========================  =================================================
prefix                      written by
==========================  =================================================
``3: ``                     ``srun --label`` (the task id, which is the rank; not when
                            torchrun's label follows, ``1: [default3]:``: srun then
                            started one torchrun per node, and its task is the node's)
``[rank3]:``                PyTorch's C++ logger (the global rank)
``[default3]:``             torchrun ``--tee`` (role and *local* rank; ``[trainer3|0]:``
                            with a replica id)
``(RayTrainWorker pid=7,    Ray's worker log forwarding (pid and node address)
ip=10.0.0.5)``
``host:pid:tid [dev]``      NCCL's debug output (``NCCL_DEBUG=INFO``/``WARN``; ``host:pid``
                            alone in its diagnostics)
``[1,3]<stderr>:``          Open MPI's ``--tag-output`` (job and rank; horovodrun writes
                            ``[3]<stderr>:``), after ``--timestamp-output``'s date if any
``[PG 0 Rank 3]``           ProcessGroupNCCL's messages (inside the text)
==========================  =================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from doctor.evidence import LogEvent

TEXT_CHARS = 400
"""How much of a line an event keeps as its text."""
# Every number a pattern captures is at most 18 digits (``\d{1,18}``): ``int()`` of a
# longer run of digits raises past 4,300 of them, and no rank, pid or count needs more.

SRUN_LABEL = re.compile(r"^ {0,5}(\d{1,6}): ")
TORCHRUN = re.compile(
    r"^ {0,8}\[([A-Za-z_]+)(\d{1,6})(?:\|\d{1,6})?\]: ?|^ {0,8}\[(rank)(?:: )?(\d{1,6})\] "
)
"""torchrun's ``[default3]:``, PyTorch's ``[rank3]:`` (Lightning's ``[rank: 3]``), and the
latter as users paste it (``[rank3] Watchdog caught ...``, the colon dropped, or indented
under a heading of their own: ``Ranks 4-7:`` then ``  [rank7]: ...``)."""
MPI_TAG = re.compile(
    r"^(?:\w{3} \w{3} {1,2}\d{1,2} \d\d:\d\d:\d\d \d{4})?"
    r"\[(?:\d{1,9},)?(?:mpirank:)?(\d{1,9})(?:,([\w.-]{1,64}))?\]<(?:stdout|stderr|stddiag)>: ?"
)
"""Open MPI's ``--tag-output``: ``[1,3]<stderr>:`` (job, rank), horovodrun's ``[3]<stderr>:``,
SageMaker's ``[1,mpirank:3,algo-2]<stdout>:`` (with the host)."""
RAY = re.compile(r"^\((?:(\w+)(?: rank=(\d{1,6}))? )?pid=(\d{1,18})(?:, ip=([\w.:-]+))?\) ?")
"""Ray's worker prefix, ``(RayTrainWorker pid=7, ip=10.0.0.5)`` (a task's without a name:
``(pid=7)``), and vLLM's worker processes' (``(VllmWorker rank=2 pid=2236)``: the rank in
the engine's world)."""
NCCL_PREFIX = re.compile(
    r"(?:^|[\s\]|])([\w.-]+):(\w+)(?::\d+)?(?: \[(\d{1,18}|\?)\])? (?:[\w./-]+:\d+ )?"
    r"NCCL (INFO|WARN|TRACE|ABORT|DIAG)"
)
TEXT_RANK = re.compile(r"\[(?:PG [^\]]{0,200}?)?Rank (\d{1,6})\]")
ESCAPE = re.compile(
    r"\x1b(?:\[[0-?]{0,32}[ -/]{0,8}[@-~]|\][^\x07\x1b\n]{0,512}(?:\x07|\x1b\\)?|[@-Z\\-_])"
)
"""A terminal's escape sequence (a colour, a cursor move, a window title): a log written
through a coloured logger or saved from a terminal holds them between and inside its words,
where no pattern looks for them (``\\x1b[31mRuntimeError\\x1b[0m: ...``). Dropped from a line
the gate passed (its words are whole either side of them) and from a small file's rows
before a terminal's wrap is undone."""
PDSH = re.compile(
    r"^(?!rank\d|python\d|(?:eth|ib|bond|br|docker|virbr|nvme|nvidia)\d|(?:en|wl|ib)[ospx]\w)"
    r"([a-z](?=[a-z0-9.-]{0,62}\d)[a-z0-9.-]{1,62}|\d{1,3}(?:\.\d{1,3}){3}): "
)
"""The host pdsh (DeepSpeed's multi-node launcher) and ClusterShell's ``clush`` put before
each line they relay: ``worker-1: [rank3]: ...``. A host's name, told from an exception's
(``RuntimeError: ``, ``boto3.exceptions.S3UploadFailedError: ``) by a host name's letters
(lowercase, digits, ``-`` and ``.``, no ``_``) with a digit among them (``gpu-node-12``,
``ip-10-0-0-5``), or an address; ``rank0:``, ``python3:`` and a kernel line's device
(``eth0:``, ``enp94s0f0:``, ``ib0:``, ``nvme0n1:``) are words of the line. Not looked for
where journald or syslog already named the host."""
_TP_ONLY = re.compile(r" TP(\d{1,6})")
"""SGLang's tensor-parallel rank alone: the rank in the job's one group (with a data- or
pipeline-parallel rank beside it, which global rank it is depends on the layout)."""
_LEVEL = "(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|SUCCESS|TRACE)"
PASTED = re.compile(
    r"^(?:> ?"  # a reply's quote marker
    r"|(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.+-]{8,40}Z?) "
    r"(?P<host>[\w.-]{1,64}) (?:kernel|[\w./@-]{1,64}\[\d{1,18}\]): "  # journald, syslog
    r"|\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"
    r"(?P<parallel>(?: [DPTE]P\d{1,6}){1,4})?\]? "  # SGLang's ``[time DP1 TP3]``
    r"(?:std(?:out|err) [FP] )?"  # the container runtime's own log file (CRI)
    rf"(?:(?P<logger_elastic>\w{{1,100}}+(?:\.\w{{1,100}}+){{1,20}}+): \[{_LEVEL}\] )?"  # elastic
    rf"|\[{_LEVEL}\] "  # a logging format's level: ``[%(asctime)s] [%(levelname)s]``
    rf"|{_LEVEL} \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{{1,6}})? "  # vLLM's level, time, place
    r"(?:\[[\w./ -]{1,100}:\d{1,9}\] )?"
    rf"|\| {_LEVEL} {{0,8}}\| (?:[\w.<>-]{{1,200}}:){{2}}\d{{1,9}} - "  # loguru's
    rf"|\d\d/\d\d/\d{{4}} \d\d:\d\d:\d\d - {_LEVEL} - (?P<logger_hf>[\w.]{{1,200}}) - "  # HF's
    rf"|{_LEVEL}:(?P<logger_py>[\w.]{{1,200}}):"  # Python's logging.basicConfig: ``ERROR:root:``
    rf"|\| {_LEVEL} \| (?P<logger_fairseq>[\w.]{{1,200}}) \| "  # fairseq's, after the time
    rf"|\[\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{{1,9}})?\]\[(?P<logger_hydra>[\w.]{{1,200}})\]"
    rf"\[{_LEVEL}\] - "  # Hydra's
    r"|\[NeMo [DIWEC] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [\w.-]{1,200}:\d{1,9}\] "  # NeMo's
    r"|\[[\w.-]{1,200}:\d{1,9}:\w{1,200}\] "  # DeepSpeed's ``[logging.py:96:log_dist]``
    r"|(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{1,9}: [IWEF]"  # TensorFlow's C++ logging
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{1,9} {1,8}\d{1,18}) [\w./-]{1,200}:\d{1,9}\] "  # glog's
    r"|\[pod/[^\]\s]{1,300}\] "  # kubectl logs --prefix
    r"|[\w.-]{1,64} {1,40}\| "  # docker compose logs
    r")+"
)
"""What a paste or a log shipper puts before a line, nested in any order: reply quote
markers (``> ``), journald's or syslog's ``Mon DD HH:MM:SS host kernel:`` or ``proc[pid]:``
(the host kept), a timestamp (ISO, or bracketed as Python's logging or SGLang prints it;
with the stream and tag the container runtime writes after it in ``/var/log/pods``:
``stderr F``), a logging format's level after it (``[INFO]``, loguru's ``| INFO |
module:function:line -``), vLLM's ``ERROR 05-01 12:00:00 [core.py:400]`` (on every line of a
traceback it logs), the logging formats of Python (``WARNING:torch.distributed.run:``),
torchelastic, transformers, fairseq, Hydra, NeMo, DeepSpeed, TensorFlow and glog (the
logger's name kept: ``Line.logger``), ``kubectl logs --prefix``'s ``[pod/NAME/CONTAINER]``
and ``docker compose logs``' ``NAME |``."""
_LOGGERS = tuple(group for group in PASTED.groupindex if group.startswith("logger_"))
"""The groups of ``PASTED`` that hold a logger's name (``Line.logger``)."""


@dataclass(frozen=True, slots=True)
class Line:
    """A line's message and whose it is, as far as its prefixes say."""

    text: str
    """The line less the launcher prefixes (NCCL's own prefix stays: parsers match on it)."""
    rank: int | None
    """Global rank, from an srun label, ``[rankN]:``, ``[Rank N]`` or the file's name."""
    local_rank: int | None
    """Rank within its host, from torchrun's ``[defaultN]:``."""
    host: str
    pid: int | None
    nccl: str
    """``INFO``/``WARN``/``TRACE``/``ABORT``/``DIAG`` for an NCCL debug line, else ''."""
    device: str
    """NCCL's ``[dev]``: the CUDA device index the line's thread uses."""
    stream: str
    """The prefix that identifies the writer: lines of one stream are one process's output."""
    where: str
    """``origin:line number``."""
    logger: str = ""
    """The logger a logging format named before the line (``WARNING:torch.distributed.run:``):
    no parser reads it, but its words are the line's (``dynamic_rendezvous``)."""

    def event(self, kind: str, **fields: Any) -> LogEvent:
        """An event of ``kind`` read from this line; ``fields`` override what the line says."""
        base: dict[str, Any] = {
            "rank": self.rank,
            "text": self.text.strip()[:TEXT_CHARS],
            "host": self.host,
            "pid": self.pid,
            "origin": self.where,
        }
        return LogEvent(kind=kind, **{**base, **fields})


def split(raw: str, where: str, file_rank: int | None = None) -> Line:
    """Peel the prefixes off ``raw`` (which has no line ending)."""
    text, rank, local, host, pid, logger = raw, file_rank, None, "", None, ""
    if pasted := PASTED.match(raw):
        text, host, logger = raw[pasted.end() :], pasted["host"] or "", _logger(pasted)
        if (parallel := pasted["parallel"]) and (tp := _TP_ONLY.fullmatch(parallel)):
            rank = int(tp.group(1))
    stream, by_srun = "", False
    if not host and ":" in text[:130] and (m := PDSH.match(text)):
        text, host, stream = text[m.end() :], m.group(1), m.group(0).strip()
        if pasted := PASTED.match(text):  # what the remote host printed before its line
            text, logger = text[pasted.end() :], _logger(pasted) or logger
    for _ in range(3):  # prefixes nest: `3: [rank3]:[E ...]` or `[default0]:host:pid:tid [0] NCCL`
        if m := SRUN_LABEL.match(text):
            rank, by_srun = int(m.group(1)), True
        elif m := TORCHRUN.match(text):
            role, number = m.group(1) or m.group(3), int(m.group(2) or m.group(4))
            if role == "rank":
                rank = number
            else:
                local = number
                if by_srun:  # srun started one torchrun per node: its task is no rank
                    rank, by_srun = file_rank, False
        elif m := MPI_TAG.match(text):  # the writer's rank; what follows is its text
            rank, host = int(m.group(1)), m.group(2) or host
            stream += m.group(0).strip()
            text = text[m.end() :]
            break
        elif m := RAY.match(text):
            pid, host = int(m.group(3)), m.group(4) or ""
            rank = int(m.group(2)) if m.group(2) else rank
        else:
            break
        stream += m.group(0).strip()
        text = text[m.end() :]
    if stream and (pasted := PASTED.match(text)):  # the rank's own timestamp or level
        text, logger = text[pasted.end() :], _logger(pasted) or logger
    nccl = device = ""
    if "NCCL" in text and (m := NCCL_PREFIX.search(text)):
        host, device, nccl = m.group(1), m.group(3) or "", m.group(4)
        pid = int(m.group(2)) if m.group(2).isdecimal() and len(m.group(2)) <= 18 else None
        stream = stream or f"{host}:{pid}"
    if rank is None and "Rank" in text and (m := TEXT_RANK.search(text)):
        rank = int(m.group(1))
    return Line(text, rank, local, host, pid, nccl, device, stream, where, logger)


def _logger(pasted: re.Match[str]) -> str:
    return " ".join(name for group in _LOGGERS if (name := pasted.group(group)))
