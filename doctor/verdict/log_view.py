"""What the log rules read: the job's log events with ranks resolved, computed once.

``LogView.of(evidence)`` ties events that only name a process (``host:pid``) or a GPU to
their rank with ``doctor.logs.who.Directory``, which learns the ties from the events.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from doctor.evidence import Evidence, LogEvent, RankStack
from doctor.logs import kinds
from doctor.logs.who import Directory, host_key
from doctor.model import EvidenceLine

_NOISE = re.compile(
    r"^.*?NCCL (?:WARN|INFO|DIAG) |^\[?[EWIF]\d{4} [\d:. ]+\S+:\d+\] |^\[\d[\d\- :,.]+\] "
)
SOURCE = "log"
MAX_LINES = 8


@dataclass(frozen=True)
class LogView:
    """The facts every log rule reads, computed once."""

    events: tuple[LogEvent, ...]
    who: Directory
    dead: tuple[int, ...] = ()
    """Ranks whose process live triage found gone (``Evidence.processes``)."""
    dumps: tuple[RankStack, ...] = ()
    """Stack dumps pasted into the logs (``py-spy dump`` text), not taken live."""

    @classmethod
    def of(cls, evidence: Evidence) -> LogView:
        who = Directory.of(evidence.logs)
        resolved = tuple(
            e if (r := who.rank_of(e)) == e.rank else _with_rank(e, r) for e in evidence.logs
        )
        dumps = tuple(s for s in evidence.stacks if s.source == "file")
        return cls(resolved, who, tuple(p.rank for p in evidence.processes if not p.alive), dumps)

    def of_kind(self, *wanted: str) -> list[LogEvent]:
        return [e for e in self.events if e.kind in wanted]

    @property
    def world(self) -> int | None:
        seen = [e.rank for e in self.events if e.rank is not None and e.kind not in kinds.RAS_KINDS]
        return self.who.world or (max(seen) + 1 if seen else None)

    def ran_collectives(self) -> bool:
        """Whether any collective had run (a timed-out or fingerprinted one past the first)."""
        return any(
            (e.seq or 0) > 1
            for e in self.of_kind(kinds.WATCHDOG_TIMEOUT, kinds.WORK_PROGRESS, kinds.COLLECTIVE_AT)
        ) or bool(self.of_kind(kinds.PROGRESS))

    def past_connecting(self, since: LogEvent) -> bool:
        """Whether anything after ``since`` says the ranks got past connecting to each other:
        a collective that ran, a process group or communicator that exists (a watchdog timing
        one out, NCCL's line for a communicator's rank, not its first ``Bootstrap : Using``, a
        rendezvous completed, RAS reporting on it), ranks at a barrier or in a dumped stack.
        What comes before ``since`` in its own file was before it."""
        told = [
            e
            for e in self.of_kind(
                kinds.WATCHDOG_TIMEOUT,
                kinds.WORK_PROGRESS,
                kinds.COLLECTIVE_AT,
                kinds.PROGRESS,
                kinds.RANK_INFO,
                kinds.JOINED,
                kinds.WAITS_FOR_MAIN,
                kinds.NCCL_CALL,
                *kinds.RAS_KINDS,
            )
            if later(e, since)
        ]
        return bool(self.dumps) or any(
            e.kind != kinds.RANK_INFO or e.rank is not None or e.nranks for e in told
        )

    def after_own_timeout(self, found: Iterable[LogEvent]) -> list[LogEvent]:
        """The events of ``found`` that follow, in their file, their own rank's watchdog
        timeout: once a rank's watchdog aborted its communicator, its peers' closes and NCCL's
        remote error on it are that timeout's aftermath, not a peer's death."""
        first: dict[tuple[str, int], int] = {}
        for e in self.of_kind(kinds.WATCHDOG_TIMEOUT):
            if e.rank is not None and (at := line_of(e)) is not None:
                key = (at[0], e.rank)
                first[key] = min(first.get(key, at[1]), at[1])
        return [
            e
            for e in found
            if e.rank is not None
            and (at := line_of(e)) is not None
            and at[1] > first.get((at[0], e.rank), at[1])
        ]

    def raised_in_set_up(self) -> list[LogEvent]:
        """Exceptions and cut tracebacks whose frames ran through the job's set-up (their
        ``op`` names the set-up function, ``doctor.logs.traceback``), while no collective had
        run yet: empty once one had."""
        found = [e for e in self.of_kind(kinds.EXCEPTION, kinds.TRACEBACK_CUT) if e.op]
        return found if found and not self.ran_collectives() else []


def line_of(e: LogEvent) -> tuple[str, int] | None:
    """The file and line number of ``e`` (its ``origin``, ``file:N``), if it has them."""
    file, colon, line = e.origin.rpartition(":")
    return (file, int(line)) if colon and line.isdigit() else None


def later(e: LogEvent, than: LogEvent) -> bool:
    """Whether ``e`` may come after ``than``: later in its file; in another file, or from
    another rank (files, and the ranks' lines a combined log interleaves, have no order
    between them); or where either's place is unknown."""
    at, ref = line_of(e), line_of(than)
    if at is None or ref is None or at[0] != ref[0] or e.rank != than.rank:
        return True
    return at[1] > ref[1]


def _with_rank(e: LogEvent, rank: int | None) -> LogEvent:
    return replace(e, rank=rank)


def ranks_of(events: Iterable[LogEvent]) -> tuple[int, ...]:
    return tuple(sorted({e.rank for e in events if e.rank is not None}))


def lines_of(events: Sequence[LogEvent]) -> tuple[EvidenceLine, ...]:
    """The evidence lines of ``events``: one per distinct text (one line can hold several)."""
    texts = dict.fromkeys((e.text, e.rank) for e in events)
    unique = dict.fromkeys(text for text, _ in texts)
    ranks = {text: rank for text, rank in reversed(list(texts))}
    return tuple(EvidenceLine(SOURCE, ranks[t], t) for t in list(unique)[:MAX_LINES])


def where(events: Sequence[LogEvent]) -> str:
    hosts = sorted({host_key(e.host) for e in events if e.host})
    return f" on {', '.join(hosts[:4])}" if hosts else ""


def quote(e: LogEvent, chars: int = 120) -> str:
    """The telling part of an event's line: without NCCL's or a logger's prefix, cut at a word."""
    return quote_text(e.text, chars)


def quote_text(text: str, chars: int = 120) -> str:
    """``quote`` for a line's text."""
    text = _NOISE.sub("", text, count=1).strip()
    if len(text) <= chars:
        return text
    return text[:chars].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
