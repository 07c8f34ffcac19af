"""Show a verdict: rich renderables for people, the ``nccl-doctor/triage/v1`` JSON for tools.

Both take ``(evidence, analysis)`` (``doctor.verdict.classify.analyse``: the
verdict and the Flight Recorder alignment it came from) so ``analyze`` and
``triage`` print the same thing, and the TUI can put any renderable in a
``Static``. Order on screen: the verdict first, then the per-group divergence
table, the culprit's stack, and the ranks that could not be read.

Nearly every string here came from outside (dump, stack, log, host document, file
name): each enters a renderable through ``safe_text`` (control characters escaped,
never read as markup); the JSON keeps the raw text.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from doctor.evidence import UNREACHED, Evidence, HostReach
from doctor.flight.align import FlightAnalysis
from doctor.gcpause import collector_paused
from doctor.model import CollectiveRef, Confidence, Frame, HangClass, Verdict
from doctor.ranks import rank_list, rank_ranges
from doctor.trust.safe_text import safe_text
from doctor.verdict import stacktree
from doctor.verdict.classify import Analysis
from doctor.verdict.stacks import row_state, top_frame

SCHEMA = "nccl-doctor/triage/v1"
MAX_GROUP_ROWS = 20
MAX_FRAMES = 12
_STYLE = {HangClass.HEALTHY: "green", HangClass.STRAGGLER: "yellow", HangClass.UNKNOWN: "magenta"}
_CONF_STYLE = {Confidence.HIGH: "bold", Confidence.MEDIUM: "", Confidence.LOW: "dim"}


def verdict_panel(verdict: Verdict) -> Panel:
    """The verdict itself: what a person reads first."""
    style = _STYLE.get(verdict.hang_class, "red")
    body = Text()
    body.append(safe_text(verdict.summary)).append("\n\n")
    culprits = rank_list(verdict.culprit_ranks) or "none"
    body.append("culprit ranks: ", style="bold").append(culprits + "\n")
    body.append("confidence:    ", style="bold").append(
        verdict.confidence.value + "\n", style=_CONF_STYLE[verdict.confidence]
    )
    if verdict.collective is not None:
        body.append("collective:    ", style="bold").append(
            safe_text(collective_text(verdict.collective))
        )
        body.append("\n")
    body.append("playbook:      ", style="bold").append(
        safe_text(f"nccl-doctor playbook {verdict.playbook}")
    )
    body.append("\n")
    for m in verdict.missing_evidence:
        body.append("would decide:  ", style="bold").append(safe_text(m)).append("\n")
    return Panel(
        body, title=f"verdict: {verdict.hang_class.value}", title_align="left", border_style=style
    )


def evidence_table(analysis: Analysis) -> Table | None:
    """Evidence lines, less the per-group ones the divergence table already shows."""
    fa = analysis.flight
    shown = {g.divergence.text for g in fa.divergent if g.divergence} if fa else set()
    lines = [e for e in analysis.verdict.evidence if e.text not in shown]
    if not lines:
        return None
    t = Table(title="evidence", title_justify="left", show_edge=False)
    t.add_column("source")
    t.add_column("rank", justify="right")
    t.add_column("what it shows")
    for line in lines:
        t.add_row(safe_text(line.source), _rank(line.rank), safe_text(line.text))
    return t


def divergence_table(fa: FlightAnalysis | None) -> Table | None:
    """One row per process group whose members diverge."""
    if fa is None or not fa.divergent:
        return None
    t = Table(
        title="process groups that diverge (Flight Recorder)", title_justify="left", show_edge=False
    )
    for col in ("group", "role", "size", "kind", "seq", "op", "culprits", "waiting"):
        t.add_column(col, justify="right" if col in ("size", "seq") else "left")
    for g in fa.divergent[:MAX_GROUP_ROWS]:
        d = g.divergence
        assert d is not None
        t.add_row(
            safe_text(g.name),
            safe_text(g.desc),
            str(len(g.members)),
            safe_text(d.kind),
            "" if d.seq is None else str(d.seq),
            safe_text(d.op),
            rank_list(d.culprits),
            rank_list(d.waiting),
        )
    if len(fa.divergent) > MAX_GROUP_ROWS:
        t.caption = f"{len(fa.divergent) - MAX_GROUP_ROWS} more groups diverge (--json lists all)"
    return t


def culprit_frames(
    evidence: Evidence, flight: FlightAnalysis | None, rank: int
) -> tuple[str, tuple[Frame, ...]]:
    """The best stack of ``rank``: a live main-thread stack, else its last FR entry's."""
    stack = next((s for s in evidence.stacks if s.rank == rank), None)
    if stack is not None and stack.main is not None:
        return f"{stack.source}, main thread", stack.main.frames
    op = flight.last_op(rank) if flight else None
    if op is not None and op.frames:
        return f"Flight Recorder, call site of {op.op} (pg {op.group} seq {op.seq})", op.frames
    return "", ()


def culprit_stack(evidence: Evidence, analysis: Analysis) -> Panel | None:
    """Where the first culprit is: the stack a person opens first."""
    if not analysis.verdict.culprit_ranks:
        return None
    rank = analysis.verdict.culprit_ranks[0]
    source, frames = culprit_frames(evidence, analysis.flight, rank)
    if not frames:
        return None
    text = Text("\n").join(safe_text(f"  {f}") for f in frames[:MAX_FRAMES])
    return Panel(text, title=safe_text(f"rank {rank} stack ({source})"), title_align="left")


def divergence_text(evidence: Evidence) -> Text | None:
    """Where the ranks' stacks part (the STAT-like prefix tree), when they do."""
    lines = stacktree.branch_lines(stacktree.build(evidence.stacks)) if evidence.stacks else []
    return Text("\n").join(safe_text(line) for line in [*lines, ""]) if lines else None


def hosts_table(evidence: Evidence) -> Table | None:
    """Multi-host triage: every host, whether it answered, its ranks."""
    if not evidence.hosts:
        return None
    t = Table(title="hosts", title_justify="left", show_edge=False)
    for col in ("host", "reached", "ranks", "seconds", "note"):
        t.add_column(col, justify="right" if col == "seconds" else "left")
    for h in evidence.hosts:
        t.add_row(
            safe_text(h.host),
            "yes" if h.reached else "NO",
            rank_ranges(h.ranks),
            "" if h.seconds is None else f"{h.seconds:.1f}",
            safe_text(h.reason),
            style="" if h.reached else "red",
        )
    return t


def skipped(evidence: Evidence, flight: FlightAnalysis | None) -> list[tuple[int | None, str, str]]:
    """(rank, probe, reason) of everything that could not be read: probes, dump files, and
    ranks of the job that left no dump."""
    rows = [(s.rank, s.probe, s.reason) for s in dict.fromkeys(evidence.skipped)]
    rows += [(s.rank, s.probe, s.reason) for s in evidence.unreadable_dumps]
    if flight is not None:
        rows += [(r, "flight-recorder", "no dump for this rank") for r in flight.missing_dumps]
    return rows


def skipped_table(evidence: Evidence, flight: FlightAnalysis | None) -> Table | None:
    """What could not be read: a verdict is only as good as what it saw."""
    rows = skipped(evidence, flight)
    if not rows:
        return None
    t = Table(title="could not read", title_justify="left", show_edge=False)
    t.add_column("rank", justify="right")
    t.add_column("probe")
    t.add_column("reason")
    for rank, probe, reason in rows:
        t.add_row(_rank(rank), safe_text(probe), safe_text(reason))
    return t


def _rank(rank: int | None) -> str:
    return "" if rank is None else str(rank)


def render(evidence: Evidence, analysis: Analysis) -> RenderableType:
    """Everything, verdict first."""
    parts = [
        verdict_panel(analysis.verdict),
        evidence_table(analysis),
        divergence_table(analysis.flight),
        culprit_stack(evidence, analysis),
        divergence_text(evidence),
        hosts_table(evidence) if len(evidence.hosts) <= MAX_GROUP_ROWS else None,
        skipped_table(evidence, analysis.flight),
    ]
    return Group(*(p for p in parts if p is not None))


def _ranks(evidence: Evidence, fa: FlightAnalysis | None) -> list[dict[str, Any]]:
    stacks = {s.rank: s for s in evidence.stacks}
    if evidence.processes:
        out = []
        for p in evidence.processes:
            out.append(
                {
                    "rank": p.rank,
                    "host": p.host,
                    "pid": p.pid,
                    "alive": p.alive,
                    "state": UNREACHED
                    if p.status == UNREACHED
                    else row_state(p.alive, p.status, stacks.get(p.rank)),
                    "top_frame": top_frame(stacks.get(p.rank)) or None,
                }
            )
        return out
    if fa is None:
        return []
    out = []
    for r in sorted(set(fa.ranks_read) | set(fa.missing_dumps)):
        op = fa.last_op(r)
        out.append(
            {
                "rank": r,
                "host": None,
                "pid": None,
                "alive": None,
                "state": (
                    "no_dump"
                    if op is None
                    else "idle"
                    if op.state == "completed"
                    else "in_collective"
                ),
                "last_op": f"{op.op} pg {op.group} seq {op.seq}" if op else None,
                "top_frame": str(op.frames[0]) if op and op.frames else None,
            }
        )
    return out


@collector_paused()
def to_json(evidence: Evidence, analysis: Analysis) -> dict[str, Any]:
    """The ``nccl-doctor/triage/v1`` document of DESIGN.md (plus ``skipped`` and ``groups``)."""
    fa = analysis.flight
    found = (
        sum(p.alive and p.status != UNREACHED for p in evidence.processes)
        if evidence.processes
        else (len(fa.ranks_read) if fa else 0)
    )
    expected = evidence.ranks_expected or (fa.world_size if fa else None)
    return {
        "schema": SCHEMA,
        "job": evidence.job,
        "collected": {
            "ranks_expected": expected,
            "ranks_found": found,
            "seconds": round(evidence.seconds, 3),
            **({"ended": evidence.ended} if evidence.ended else {}),
        },
        "verdict": analysis.verdict.to_json(),
        "ranks": _ranks(evidence, fa),
        "evidence": [e.to_json() for e in analysis.verdict.evidence],
        "skipped": [
            {"rank": rank, "probe": probe, "reason": reason}
            for rank, probe, reason in skipped(evidence, fa)
        ],
        **({"hosts": [_host_json(h) for h in evidence.hosts]} if evidence.hosts else {}),
        **(
            {"stack_tree": stacktree.to_json(stacktree.build(evidence.stacks))}
            if evidence.stacks
            else {}
        ),
        "groups": [
            {
                "process_group": g.name,
                "desc": g.desc,
                "members": len(g.members),
                "kind": g.divergence.kind,
                "seq": g.divergence.seq,
                "culprits": list(g.divergence.culprits),
                "text": g.divergence.text,
            }
            for g in (fa.divergent if fa else ())
            if g.divergence is not None
        ],
    }


def _host_json(h: HostReach) -> dict[str, Any]:
    return {
        "host": h.host,
        "reached": h.reached,
        "reason": h.reason,
        "ranks": list(h.ranks),
        "seconds": h.seconds,
    }


def collective_text(ref: CollectiveRef) -> str:
    """``all_reduce in pg 0 at seq 12``, leaving out what no evidence gave (stacks carry no seq)."""
    where = [f"in pg {ref.process_group}"] if ref.process_group != "unknown" else []
    where += [f"at seq {ref.seq}"] if ref.seq is not None else []
    if not where:
        return f"{ref.op} (position unknown: no Flight Recorder)"
    return " ".join([ref.op, *where])
