"""Lines in, facts out: the one pass every log goes through, with its bounds.

Each line is peeled of its prefixes (``doctor.logs.lines``), handed to the block of its
stream if one is open (a traceback, a RAS report, a torchelastic summary, an nvidia-smi
table, a py-spy dump, a JSON document), else to the single-line parsers. Lines that can
mean nothing (no keyword any parser looks for) are dropped before any of that, which is
what keeps a 2 GB log of loss values cheap.

Bounds: a line is cut at ``Bounds.line_chars``; one writer keeps at most
``events_per_key`` events of one kind about one rank and group (the first ones: the
first failure is the one that matters); a file at most ``events`` events. What a bound
cut is counted in ``Parsed.cut``, which the reader turns into ``Skipped`` evidence.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from doctor.evidence import LogEvent
from doctor.logs import (
    c10d,
    catalogue,
    crash,
    cuda,
    disagree,
    gpu_health,
    harmless,
    kernel,
    kinds,
    launcher,
    nccl,
    ras,
    setup,
    shm,
    smi,
    traceback,
    training,
    verbs,
)
from doctor.logs.block import Block, Fact, StackDump
from doctor.logs.kernel import NvrmGpu
from doctor.logs.launcher import ElasticFailures, HorovodMissing, HydraTermination
from doctor.logs.lines import ESCAPE, TEXT_CHARS, Line, split
from doctor.logs.pyspy_text import PyspyDump
from doctor.logs.ras import RasText
from doctor.logs.smi import SmiTable
from doctor.logs.traceback import Traceback  # noqa: F401 - the module is used too
from doctor.logs.words import add_words, markup, telling


@dataclass(frozen=True)
class Bounds:
    """What one reading may keep; hitting one is reported, never an error."""

    line_chars: int = 16_384
    events_per_key: int = 16
    events: int = 20_000
    stacks: int = 4_096
    json_chars: int = 8 << 20
    streams: int = 4_096
    """Writers with an open block at once (ranks interleaving tracebacks)."""
    file_bytes: int = 4 << 30
    """Text read from one file (a 2 GB combined log fits)."""
    inflate_ratio: int = 16
    inflate_floor: int = 4 << 20
    """A compressed file's text: at most ``inflate_ratio`` times the file's own size (logs
    compress 5 to 12 times), and ``inflate_floor`` bytes at least."""
    word_bytes: int = 1 << 20
    """A file this small (an excerpt, pasted text) gives the word model the words of every
    telling line; a bigger one only those of lines past the parsers' gate, which cost no
    extra scan (a per-line search of a 30 MB log made its reading 8 times slower)."""
    inflate_lines: float = 0.5
    inflate_lines_floor: int = 100_000
    """A compressed file's lines: at most ``inflate_lines`` per byte of the file (a log's
    line of ~100 characters takes ~10 compressed bytes), ``inflate_lines_floor`` at least.
    Lines, not bytes, are what reading costs: a 1 MB file that inflates to a GiB of
    newlines stops within a second or two, and is reported as cut."""

    def text_bytes(self, size: int, compressed: bool) -> int:
        """The most text read from a file of ``size`` bytes."""
        if not compressed:
            return self.file_bytes
        return min(self.file_bytes, max(self.inflate_floor, self.inflate_ratio * size))

    def text_lines(self, size: int, compressed: bool) -> int | None:
        """The most lines read from a file of ``size`` bytes (None: no bound)."""
        if not compressed:
            return None
        return max(self.inflate_lines_floor, int(self.inflate_lines * size))


@dataclass
class Parsed:
    """What one text held."""

    events: list[LogEvent] = field(default_factory=list)
    stacks: list[StackDump] = field(default_factory=list)
    cut: Counter[str] = field(default_factory=Counter)
    """Bound name -> how many things it cut."""
    lines: int = 0
    words: set[str] = field(default_factory=set)
    """The distinct words of the lines past the gate, and of a small file's telling lines
    (``doctor.logs.words``)."""


BLOCKS: tuple[type, ...] = (
    Traceback,
    ElasticFailures,
    HydraTermination,
    HorovodMissing,
    RasText,
    SmiTable,
    PyspyDump,
    NvrmGpu,
)
LINE_PARSERS: tuple[Callable[[Line], list[LogEvent]], ...] = (
    nccl.events,
    cuda.events,
    kernel.events,
    gpu_health.events,
    launcher.events,
    disagree.events,
    crash.events,
    smi.events,
    ras.monitor_events,
    traceback.events,
    training.events,
    verbs.events,
    shm.events,
    setup.events,
)
_CAPITALISED = (
    "NCCL|WARN|ERROR|Error|Exception|Traceback|Watchdog|SeqNum|Rank|Timed out|"
    "Timeout|Collective|Culprit|Detected|Rendezvous|Connection|Socket|CUDA|Cuda|Xid|"
    "NVRM|Out of memory|Memory|OOM|Kill|Exit|Segmentation|Aborted|Signal|Failures:|"
    "Root Cause|Process |Thread |Job summary|Communicators|Group |Errors|Warnings|"
    "DEAD|INCOMPLETE|MISMATCH|Mismatched|NVIDIA-SMI|GPU|BAD TERMINATION|CANCELLED AT|DMAR|"
    "IO_PAGE_FAULT|Missing ranks|No backend type|Parameter indices|Aborting Ring|"
    "joining a group|shape mismatches|GLIBC|NVML|Default process|Invalid scalar type|MPI_ERR|#|{|"
    "No pre-built|Time t|ORTE |An MPI|The actor died|Task was killed|Shape mismatch|JIT|"
    "Link is Down|Link down|Lost carrier|Cable unplugged|Retry to connect|SXid|NvLink|PRTE|"
    "Open MPI|MTL|HYDU|Hostfile|UCX|UCC|TL_UCP|TL_NCCL|CL_HIER|Port state"
).split("|")
_WORTH_A_LOOK = re.compile("|".join(map(re.escape, _CAPITALISED)))
"""Words (mostly capitalised, which keeps the scan fast) one of which a line that matters
holds; with ``_LOWER`` below, the gate ``tests/logs`` checks is lossless on the corpus."""
_LOWER = (
    "socket|nccl|srun:|slurmstepd|main_process_first|lagging|started |support|return code|"
    "oom-kill|exited on signal|exitcode|missing ranks|ignal|core dumped|subset of ranks|"
    "ncclShm|compiling|ninja|torchdynamo|extension module|ock file|PyTorch plugin|"
    "compiler function|AUTOTUNE|compile_fx|distributed_c10d|dist.|torch.distributed.|"
    "'torch.distributed'|GLOBAL_RANK|processes registered|"
    "it/s]|s/it]|stragglers|fail|error|fatal|NET/|retry count|No space left|find address|"
    "fabricmanager|pair closure|was encountered|PTX|assert triggered|misaligned address|baton|"
    "_jit_compile|enough slots|spank|pyxis|worker_count|*** SIG|<= op.nbytes|marked dead|"
    "died unexpectedly|prterun|pdsh@|ssh: |mismatch|Endpoint timeout|not enough space|"
    "stopped: `max_|Training complete|Training finished|Training done|Training successfully|"
    "Training time|train metrics|succeeded|SUCCE|bus bandwidth|test concluded|"
    "successfully finished|after training is done|PMIx server|during startup|raylet failed|"
    "worker group finished|exited with code|reducer.cpp|logger.cpp|arly stopping"
).split("|") + ["%|"]  # tqdm's bar (its rate may be cut off); "|" is the separator above
_WORTH_A_LOOK_TOO = re.compile("|".join(map(re.escape, _LOWER)))
"""One search for them all: cheaper than a substring test each on a line that holds none
(most lines of a big log)."""


_INFO_FAILING = re.compile(r"(?i)fail|error|refused|abort|timed? ?out|unable|cannot|not found")
"""Words of an ``NCCL INFO`` line that may report a failure (``init.cc:1356 -> 6`` follows
one): such a line goes through every parser. The others (rings, channels, trees, thresholds,
the per-call trace of ``NCCL_DEBUG_SUBSYS=COLL``) are configuration and progress, which
NCCL's own parser alone reads; a log of ``NCCL_DEBUG=INFO`` is mostly those."""


def worth_a_look(raw: str) -> bool:
    """Whether a line can mean anything to a parser (most lines of a job's log cannot)."""
    return bool(_WORTH_A_LOOK.search(raw) or _WORTH_A_LOOK_TOO.search(raw))


_JSON_START = re.compile(r"^\s*[{\[]\s*$|^\s*\{\s*\"")
_RECORD = re.compile(r"Work\w*\(")
_TIMEOUT_SAID = re.compile(r"collective operation timeout:\s*$")


def _open_record(text: str) -> bool:
    """Whether ``text`` ends inside a c10d record a terminal or the user wrapped
    (``WorkNCCL(SeqNum=7, OpType=ALLREDUCE,`` then ``NumelIn=..., Timeout(ms)=600000)``),
    or just before one (``... collective operation timeout:``)."""
    if "Work" not in text and "timeout:" not in text:  # most lines: no regex run
        return False
    if _TIMEOUT_SAID.search(text):
        return True
    starts = [m.start() for m in _RECORD.finditer(text)]
    if not starts:
        return False
    rest = text[starts[-1] :]
    return rest.count("(") > rest.count(")")


def _continued(held: str, more: str) -> str:
    """``held`` and the line that continues it: a user wraps after a separator (joined
    with a space), a terminal anywhere, inside a word (joined as it was)."""
    held, more = held.rstrip(), more.strip()
    return f"{held} {more}" if held[-1:] in ",:;(" else held + more


WRAPPED_LINES = 3
"""Lines of a wrapped record joined at most, after its first."""


class _JsonDoc:
    """A JSON document being collected line by line."""

    def __init__(self, first: Line) -> None:
        self.first = first
        self.lines: list[Line] = []
        self.size = 0
        self.depth = 0

    def add(self, line: Line) -> None:
        text = line.text
        self.lines.append(line)
        self.size += len(text)
        self.depth += text.count("{") + text.count("[") - text.count("}") - text.count("]")

    def load(self) -> object:
        try:
            return json.loads("\n".join(line.text for line in self.lines))
        except (ValueError, RecursionError):
            return None


def _block_for(line: Line) -> type | None:
    """The kind of block ``line`` opens, if it opens one."""
    for kind in BLOCKS:  # a loop, not a generator: this runs for every line that passes the gate
        if kind.start(line):  # type: ignore[attr-defined]
            return kind
    return None


def _retried(text: str) -> bool:
    """Whether a set-up line says a connection is being retried, not that it failed."""
    return c10d.connect_retry(text) or nccl.CONNECT_RETRY.search(text) is not None


class Parser:
    """Feed it a text's lines one at a time; ``finish`` returns what they held."""

    def __init__(
        self,
        origin: str = "",
        file_rank: int | None = None,
        bounds: Bounds = Bounds(),
        every_line_words: bool = True,
    ):
        self.origin = origin
        self.file_rank = file_rank
        self.bounds = bounds
        self.every_line_words = every_line_words
        """Keep the words of telling lines the gate passes over too (``Bounds.word_bytes``)."""
        self.result = Parsed()
        self._c10d = c10d.C10dParser()
        self._bars = training.BarWatch()
        self._blocks: dict[str, Block] = {}
        self._json: dict[str, _JsonDoc] = {}
        self._wrapped: tuple[Line, int] | None = None
        """A record whose line was cut (``_open_record``), and how many lines it took."""
        self._seen: dict[tuple[object, ...], int] = {}
        """Each event's facts and text, and where in ``events`` it was last added."""
        self._per_key: Counter[tuple[object, ...]] = Counter()
        self._traceback_ended = ""
        """``file:line`` of the exception line that ended a traceback (read there, once)."""
        self._step: tuple[str, int] | None = None
        """The latest step report not yet told, and its line's number: a run of reports is
        told once, at its latest line, when another event comes or the text ends (a log of
        a million steps costs one event, and no split or parser per step)."""

    def feed(self, raw: str, piece: bool = False) -> None:
        """Read the next line (``piece``: the next part of this line a ``\\r`` ended)."""
        result = self.result
        if not piece:
            result.lines += 1
            if len(raw) > self.bounds.line_chars:
                raw = raw[: self.bounds.line_chars]
                result.cut["line_chars"] += 1
            if "\r" in raw and "\r" in (raw := raw.rstrip("\r\n")):
                for part in raw.split("\r"):  # a progress bar redrawn over itself, a message
                    self.feed(part, piece=True)
                return
        gated = bool(self._blocks or self._json or self._wrapped) or worth_a_look(raw)
        if training.reports_progress(raw):
            # progress, told once per run of reports (``_tell_step``); its words (step, loss,
            # lr: any job's) are kept only where the line is kept for another reason
            self._step = (raw, result.lines)
        if not gated and not (self.every_line_words and (telling(raw) or harmless.find(raw))):
            return
        if "\x1b" in raw:
            raw = ESCAPE.sub("", raw)
        line = split(raw.rstrip("\r\n"), f"{self.origin}:{result.lines}", self.file_rank)
        if markup(line.text):
            pass  # an issue template's heading, fence or tag: no word of what failed
        elif not (self._blocks or self._json or self._wrapped) and harmless.find(
            whole := line.text or raw
        ):
            # a working job's warning: no word of it (a logging prefix alone is told whole)
            self._add([line.event(kinds.HARMLESS, text=whole.strip()[:TEXT_CHARS])])
            return
        # the text and its logger's name: a label's or a host's name is no word
        elif not add_words(
            result.words, f"{line.logger} {line.text}" if line.logger else line.text
        ):
            result.cut["words"] += 1
        if not gated:
            return
        if block := self._blocks.get(line.stream):
            if block.feed(line):
                self._add(block.take())
                if isinstance(block, Traceback):
                    self._add(traceback.events(line))
                return
            ended = block.take() + block.close()
            self._add(ended)
            del self._blocks[line.stream]
            if isinstance(block, Traceback) and block.read_exception:
                self._traceback_ended = line.where
        if self._feed_json(line):
            return
        if (joined := self._join_wrapped(line)) is not None:
            self._read(joined)

    def _join_wrapped(self, line: Line) -> Line | None:
        """``line``, or the wrapped record it continues, once whole; None while the record
        is open. A line of another writer, or one that opens a block of its own (a
        traceback, a stack dump), ends the record where it was cut."""
        held, taken = self._wrapped or (None, 0)
        self._wrapped = None
        if held is not None:
            if (line.stream and line.stream != held.stream) or _block_for(line):
                self._read(held)
            else:
                line, taken = replace(held, text=_continued(held.text, line.text)), taken + 1
        if taken < WRAPPED_LINES and _open_record(line.text):
            self._wrapped = (line, taken)
            return None
        return line

    def _tell_step(self) -> None:
        """The run of step reports read since the last event, as progress at its latest line."""
        if self._step is None:
            return
        (raw, number), self._step = self._step, None
        line = split(ESCAPE.sub("", raw).rstrip("\r\n"), f"{self.origin}:{number}", self.file_rank)
        self._add([line.event(kinds.PROGRESS, rank=None)])

    def _read(self, line: Line) -> None:
        """A line no open block or document takes: a block's first line, or a line."""
        if (kind := _block_for(line)) is not None:
            if len(self._blocks) < self.bounds.streams:
                self._blocks[line.stream] = kind(line)
                return
            self.result.cut["streams"] += 1
        if line.nccl == "INFO" and not _INFO_FAILING.search(line.text):
            self._add(nccl.events(line))  # configuration and progress: NCCL's parser alone
            return
        found = list(self._c10d.feed(line))  # a list of our own: the parser's is its state
        for parse in LINE_PARSERS:
            found += parse(line)
        if not found:  # the sources' catalogue fills in where no specific parser spoke
            found = catalogue.events(line)
        if not found and line.where != self._traceback_ended:
            found = traceback.lone_exception(line)
        self._add(found + self._bars.feed(line, found))

    def _feed_json(self, line: Line) -> bool:
        """Collect a multi-line JSON document (RAS ``-f json``); True if the line is part of one."""
        text = line.text
        open_doc = self._json.get(line.stream)
        if open_doc is None:
            if not _JSON_START.match(text):
                return False
            open_doc = _JsonDoc(line)
        elif text[:1] not in (" ", "\t", "}", "]", '"', "{", "["):
            del self._json[line.stream]  # not JSON after all: read its lines as lines
            self._reread(open_doc)
            return False
        open_doc.add(line)
        if open_doc.size > self.bounds.json_chars:
            self.result.cut["json_chars"] += 1
            self._json.pop(line.stream, None)
            return True
        if open_doc.depth > 0:
            self._json[line.stream] = open_doc
            return True
        self._json.pop(line.stream, None)
        doc = open_doc.load()
        if doc is None:
            if len(open_doc.lines) == 1:
                return False
            self._reread(open_doc)
            return True
        self._add(ras.from_json(doc, open_doc.first))
        return True

    def _reread(self, doc: _JsonDoc) -> None:
        """Text that began like JSON but is not (a pasted error message, a log line that
        starts with a brace): its lines are read as the lines they are."""
        for line in doc.lines:
            self._read(line)

    def _add(self, facts: Iterable[Fact]) -> None:
        if self._step is not None:
            facts = list(facts)  # only then: every line's facts pass here
            if facts:
                self._tell_step()  # in the order the lines came
        result, bounds = self.result, self.bounds
        for fact in facts:
            if isinstance(fact, StackDump):
                if len(result.stacks) < bounds.stacks:
                    result.stacks.append(fact)
                else:
                    result.cut["stacks"] += 1
                continue
            if fact.kind == kinds.BOOTSTRAP and _retried(fact.text):
                fact = replace(fact, kind=kinds.CONNECT_RETRY)
            key = (fact.rank, fact.kind, fact.host, fact.pid, fact.process_group, fact.op)
            same = (*key, fact.seq, fact.text)
            last = self._seen.get(same)
            if last is not None and (
                fact.kind not in kinds.BENIGN or last == len(result.events) - 1
            ):  # said again: only how far the job got is told by its latest time
                continue
            if self._per_key[key] >= bounds.events_per_key:
                result.cut["events_per_key"] += 1
                continue
            if len(result.events) >= bounds.events:
                result.cut["events"] += 1
                continue
            self._seen[same] = len(result.events)
            self._per_key[key] += 1
            result.events.append(fact)

    def finish(self) -> Parsed:
        if self._wrapped is not None:
            self._read(self._wrapped[0])
            self._wrapped = None
        for block in self._blocks.values():
            self._add(block.take() + block.close())
        self._blocks.clear()
        for doc in self._json.values():
            self._add(ras.from_json(doc.load(), doc.first))
        self._json.clear()
        self._tell_step()
        return self.result


def parse_text(
    lines: Iterable[str],
    origin: str = "",
    *,
    file_rank: int | None = None,
    bounds: Bounds = Bounds(),
) -> Parsed:
    """Everything ``lines`` (one text, in order) hold; never raises on any text."""
    parser = Parser(origin, file_rank, bounds)
    for raw in lines:
        parser.feed(raw)
    return parser.finish()


def parse_lines(
    lines: Iterable[str], origin: str = "", *, file_rank: int | None = None
) -> list[LogEvent]:
    """The events of one text: the simple entry point for live sources."""
    return parse_text(lines, origin, file_rank=file_rank).events
