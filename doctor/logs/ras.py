"""NCCL RAS reports (``ncclras``, or ``STATUS`` on RAS's client port), in text or JSON, and
its monitor mode's events.

Read from the formats NCCL's ``src/ras/client_support.cc`` writes (2.24 to 2.30):

* ``DEAD`` / ``Process P on node H managing GPU G``: a process RAS considers dead;
* ``INCOMPLETE`` then ``Process ...`` (processes that sent nothing), and per communicator
  ``#g-c (hash) INCOMPLETE`` with ``The missing rank(s): R`` (2.24-2.25) or
  ``Rank R -- GPU G managed by process P on node H`` (2.26+);
* ``#g-c (hash) MISMATCH`` with ``Communicator ranks have different [OP ]operation counts``,
  ``N ranks have launched up to operation C`` and the outliers' ``Rank R ...`` lines;
* ``#g-c (hash) ERROR`` with ``Rank R reported ERROR`` (initialization or asynchronous);
* JSON (``-f json``, 2.28.7+): per communicator ``ranks`` (with ``collective_counts`` and
  ``status``) and ``missing_ranks`` (``unresponsive``, ``considered_dead``);
* monitor mode (2.29+): ``PEER_DEAD: Process P on node H managing GPU G`` or its JSON.

Ranks here are ranks *of the communicator* (``process_group`` is its hash); in the job's
world communicator they are global ranks.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.block import Collecting, Fact
from doctor.logs.lines import Line

_START = re.compile(
    r"^NCCL version \S+ compiled with CUDA|^(?:Job summary|Errors|Warnings)\s*$|"
    r"^Communicators\.\.\.|^Group\s+Comms\s+Nodes|"
    r"^#\d+-\d+ \([0-9a-fA-F]+\) (?:INCOMPLETE|ERROR|MISMATCH)"
)
_ROW = re.compile(
    r"^\s+\d+\s+(\d+)\s+(\d+)\s+(\d+)(?:-(\d+))?\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$"
)
"""A communicators table row: group, comms in group, nodes per comm, ranks per node (a
range when nodes differ), ranks per comm, ranks in group, status, errors."""
_SUMMARY_ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
"""A job summary row: nodes, processes per node, GPUs per process, processes, GPUs."""
TRANSITIONS = frozenset({"INIT", "FINALIZE", "UNKNOWN", "NOCOMM"})
"""Statuses of a communicator being created or torn down."""
_HEADER = re.compile(
    r"^(?:NCCL version|CUDA runtime version|Job summary|Communicators|Group |Errors|Warnings|"
    r"INCOMPLETE|DEAD|TIMEOUT|#\d+-\d+ |Gathering data|The outlier node|No communicator|=+|"
    r"\(total\)|\s*#\s+in group|\s+\d)"
)
_COMM = re.compile(r"^#\d+-\d+ \(([0-9a-fA-F]+)\) (INCOMPLETE|ERROR|MISMATCH)")
_PROCESS = re.compile(r"Process (\d{1,18}) on node ([\w.:-]+) managing GPUs? ([\w, ]+)")
_MISSING_LIST = re.compile(r"The missing ranks?: ([\d, \-]+)")
_RANK_LINE = re.compile(
    r"^\s*Rank (\d{1,18})(?: has launched up to operation (\d{1,18})|"
    r" has not launched any operations|"
    r" reported (.+?)| has status (\w+))?"
    r" -- (?:GPU (\S+) managed by process (\d{1,18}) on node ([\w.:-]+)|\[process information)"
)
_COUNT_OP = re.compile(r"Communicator ranks have different (?:(\w+) )?operation counts")
_GROUP_COUNT = re.compile(
    r"^\s*(\d{1,18}) ranks have (?:launched up to operation (\d{1,18})|not launched any operations)"
)
_STATUS = re.compile(r"ranks? (?:have|has) status (\w+)")
_GROUP_ERROR = re.compile(r"^\s*(\d{1,18}) ranks reported (.+)$")
_MONITOR_DEAD = re.compile(
    r"PEER_DEAD: Process (\d{1,18}) on node ([\w.:-]+) managing GPUs? ([\w, ]+)"
)


def _rank_list(text: str) -> list[int]:
    out: list[int] = []
    for lo, hi in re.findall(r"(\d{1,18})(?:-(\d{1,18}))?", text):
        out.extend(range(int(lo), min(int(hi or lo), int(lo) + 4096) + 1))
    return out[:4096]


def _row_adds_up(row: re.Match[str]) -> bool:
    """Whether a running group's counts agree: every node with the same number of ranks,
    nodes times ranks per node is the communicator's size, and communicators times size is
    the group's ranks. (An uneven layout also fails this; it then goes unjudged, never
    healthy, which is the safe side.)"""
    comms, nodes, per_node, size, total = (int(row.group(i)) for i in (1, 2, 3, 5, 6))
    if row.group(4) and int(row.group(4)) != per_node:
        return False
    return nodes * per_node == size and comms * size == total


def monitor_events(line: Line) -> list[LogEvent]:
    """Monitor mode's ``PEER_DEAD`` line (text format)."""
    if "PEER_DEAD" in line.text and (m := _MONITOR_DEAD.search(line.text)):
        return [
            line.event(
                kinds.RAS_DEAD, rank=None, pid=int(m.group(1)), host=m.group(2), device=m.group(3)
            )
        ]
    return []


class RasText(Collecting):
    """One RAS text report, header to last section."""

    @staticmethod
    def start(line: Line) -> bool:
        return bool(_START.match(line.text))

    def __init__(self, line: Line) -> None:
        super().__init__()
        self._first = line
        self._rows: list[tuple[str, str]] = []
        """(status, errors) of each row of the communicators table."""
        self._summary_rows = 0
        self._disagrees = False
        """Counts that do not add up (a row's nodes, ranks and communicators, or the job
        summary's nodes and processes), or data RAS could not gather: never healthy."""
        self._statuses: set[str] = set()
        self._problem = False
        """Anything but a status difference: a dead or missing process, an error, counts."""
        self._item = ""
        """The current ``Errors``/``Warnings`` item: DEAD, INCOMPLETE, or a comm's kind."""
        self._comm = ""
        self._op = "collective"
        self._value: int | None = None
        self._error = ""

    def feed(self, line: Line) -> bool:
        text = line.text.rstrip()
        if text and not text[0].isspace() and not _HEADER.match(text):
            return False
        if m := _ROW.match(text):
            self._rows.append((m.group(7), m.group(8)))
            self._disagrees |= m.group(7) == "RUNNING" and not _row_adds_up(m)
        elif m := _SUMMARY_ROW.match(text):
            nodes, per_node, gpus, processes, total = (int(g) for g in m.groups())
            self._summary_rows += 1
            self._disagrees |= (
                self._summary_rows > 1 or nodes * per_node != processes or processes * gpus != total
            )
        elif m := _COMM.match(text):
            self._comm, self._item, self._value, self._error = m.group(1), m.group(2), None, ""
            self._problem |= m.group(2) != "MISMATCH"
        elif text in ("DEAD", "INCOMPLETE", "TIMEOUT"):
            self._comm, self._item = "", text
            self._problem |= text != "TIMEOUT"
            self._disagrees |= text == "TIMEOUT"
        elif m := _COUNT_OP.search(text):
            self._op, self._value = m.group(1) or "collective", None
            self._problem = True
        elif "Communicator ranks have different status" in text:
            self._op, self._value = "", None
        elif m := _STATUS.search(text):
            self._statuses.add(m.group(1))
        elif m := _GROUP_COUNT.match(text):
            self._value = int(m.group(2) or 0)
            if self._op:
                self._emit(
                    line, kinds.RAS_COUNT, rank=None, seq=self._value, nranks=int(m.group(1))
                )
        elif m := _GROUP_ERROR.match(text):
            self._error = m.group(2).strip()
        elif m := _PROCESS.search(text):
            kind = kinds.RAS_DEAD if self._item == "DEAD" else kinds.RAS_MISSING
            if self._item in ("DEAD", "INCOMPLETE") and not self._comm:
                self._emit(
                    line, kind, rank=None, pid=int(m.group(1)), host=m.group(2), device=m.group(3)
                )
        elif m := _MISSING_LIST.search(text):
            for rank in _rank_list(m.group(1)):
                self._emit(line, kinds.RAS_MISSING, rank=rank)
        elif m := _RANK_LINE.match(text):
            self._rank_line(line, m)
        return True

    def _rank_line(self, line: Line, m: re.Match[str]) -> None:
        rank = int(m.group(1))
        where: dict[str, Any] = {}
        if m.group(5):
            where = {"device": m.group(5), "pid": int(m.group(6)), "host": m.group(7)}
        if self._item == "INCOMPLETE":
            self._emit(line, kinds.RAS_MISSING, rank=rank, **where)
        elif self._item == "ERROR":
            self._emit(line, kinds.RAS_ERROR, rank=rank, op=m.group(3) or self._error, **where)
        elif self._item == "MISMATCH" and self._op:
            value = int(m.group(2)) if m.group(2) else self._value
            if "has not launched any" in m.string:
                value = 0
            self._emit(line, kinds.RAS_COUNT, rank=rank, seq=value, **where)

    def _emit(self, line: Line, kind: str, **fields: Any) -> None:
        if kind == kinds.RAS_COUNT:
            fields.setdefault("op", self._op)
        self._out.append(
            line.event(kind, process_group=self._comm or None, **{"host": "", **fields})
        )

    def close(self) -> list[Fact]:
        """A report with nothing wrong says the job runs: every communicator OK, or ranks
        differing only in status while communicators are created or torn down. Counts that
        disagree (fewer ranks or processes than the rows say) or a gathering timeout leave the
        report unjudged: something is missing, so it is not evidence of health."""
        statuses = self._statuses | {s for s, e in self._rows if e != "OK"}
        if not self._problem and not self._disagrees and (self._rows or self._statuses):
            if all(e == "OK" for _s, e in self._rows) and not self._statuses:
                text = "RAS: every communicator is running with no errors"
            elif statuses <= TRANSITIONS | {"RUNNING"}:
                text = "RAS: communicators differ only in status (being created or torn down)"
            else:
                return self.take()
            self._out.append(self._first.event(kinds.PROGRESS, text=text, host=""))
        return self.take()


def from_json(doc: Any, line: Line) -> list[LogEvent]:
    """A RAS JSON report (``communicators``) or a monitor event (``event``: ``PEER_DEAD``)."""
    if not isinstance(doc, dict):
        return []
    if doc.get("event") == "PEER_DEAD" and isinstance(doc.get("peer"), dict):
        peer = doc["peer"]
        return [
            line.event(
                kinds.RAS_DEAD,
                rank=None,
                text="RAS monitor: PEER_DEAD",
                host=str(peer.get("host", ""))[:200],
                pid=_int(peer.get("pid")),
            )
        ]
    comms = doc.get("communicators")
    if not isinstance(comms, list):
        return []
    out: list[LogEvent] = []
    for comm in comms[:1024]:
        if isinstance(comm, dict):
            out.extend(_comm_events(comm, line))
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _comm_events(comm: dict[str, Any], line: Line) -> list[LogEvent]:
    group = str(comm.get("hash", ""))[:40] or None
    size = _int(comm.get("size"))
    ranks = [r for r in comm.get("ranks") or [] if isinstance(r, dict)][:100_000]
    out: list[LogEvent] = []

    def event(kind: str, rank: dict[str, Any], text: str, **fields: Any) -> None:
        out.append(
            line.event(
                kind,
                rank=_int(rank.get("rank")),
                text=text,
                host=str(rank.get("host", ""))[:200],
                pid=_int(rank.get("pid")),
                device=str(rank.get("nvml_dev", rank.get("cuda_dev", ""))),
                process_group=group,
                nranks=size,
                **fields,
            )
        )

    for missing in [r for r in comm.get("missing_ranks") or [] if isinstance(r, dict)][:4096]:
        status = _dict(missing.get("status"))
        dead = bool(status.get("considered_dead"))
        event(
            kinds.RAS_DEAD if dead else kinds.RAS_MISSING,
            missing,
            f"RAS: rank {missing.get('rank')} of communicator {group} "
            + ("is considered dead" if dead else "sent no data (unresponsive)"),
        )
    for rank in ranks:
        status = _dict(rank.get("status"))
        for key in ("init_state", "async_error"):
            code = _int(status.get(key))
            if code not in (None, 0, 7):
                event(
                    kinds.RAS_ERROR, rank, f"RAS: rank {rank.get('rank')} {key} {code}", code=code
                )
    ops = sorted(
        {
            op
            for r in ranks
            if isinstance(r.get("collective_counts"), dict)
            for op in r["collective_counts"]
        }
    )[:32]
    for op in ops:
        counts = {id(r): _int((r.get("collective_counts") or {}).get(op)) for r in ranks}
        usual = Counter(v for v in counts.values() if v is not None).most_common(1)
        if not usual:
            continue
        value, n = usual[0]
        if n == len(ranks):
            continue  # every rank agrees: nothing to single out
        out.append(
            line.event(
                kinds.RAS_COUNT,
                rank=None,
                text=f"RAS: {n} ranks have launched up to {op} operation {value}",
                host="",
                seq=value,
                op=op,
                process_group=group,
                nranks=n,
            )
        )
        for r in ranks:
            if counts[id(r)] is not None and counts[id(r)] != value:
                event(
                    kinds.RAS_COUNT,
                    r,
                    f"RAS: rank {r.get('rank')} has launched up to {op} operation {counts[id(r)]}",
                    seq=counts[id(r)],
                    op=op,
                )
    return out
