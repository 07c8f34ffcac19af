"""What an incident report says, built once from ``(evidence, analysis)`` for every renderer.

The triage JSON (``doctor.verdict.render.to_json``) is the base: the renderers read
the verdict, evidence lines, what could not be read, hosts, groups and stack tree from
it, so a report and ``analyze --json`` never disagree. Added here: the playbook's next
steps, the rank table folded into ranges (2,048 ranks in the same state on one host are
one row), the Flight Recorder grid of each diverging group, and the versions and
environment the evidence knows. Pure: no I/O but the installed playbook's text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from doctor import __version__
from doctor.evidence import Evidence
from doctor.flight.align import FlightAnalysis, RankOp
from doctor.ranks import rank_list, rank_ranges
from doctor.verdict.classify import Analysis
from doctor.verdict.render import to_json

GRID_SEQS = 12
"""Sequence numbers a Flight Recorder grid shows: the last ones any rank recorded."""
MAX_GRIDS = 8
"""Diverging groups drawn as a grid (the divergence table lists them all)."""
MAX_LOG_LINES = 500
"""Log lines the report quotes (the verdict's evidence lines quote those that decided)."""
UNKNOWN = "unknown"


@dataclass(frozen=True)
class RankRow:
    """Ranks that read alike (host, state, where they are), folded into one row."""

    ranks: str
    """``0-1023,1025``: ``doctor.ranks.rank_ranges``."""
    count: int
    host: str
    state: str
    where: str
    """The frame that decided the state, else the last Flight Recorder op."""
    pid: str
    """The pid for a row of one rank; empty for several."""


@dataclass(frozen=True)
class GridRow:
    ranks: str
    cells: tuple[str, ...]
    """Per sequence number of the grid: ``op state`` (``all_reduce scheduled``) or ''."""
    odd: tuple[bool, ...]
    """Per cell: whether it differs from what most of the group's ranks recorded there."""


@dataclass(frozen=True)
class Grid:
    """One diverging process group: ranks (folded by equal rows) by sequence number."""

    group: str
    desc: str
    seqs: tuple[int, ...]
    rows: tuple[GridRow, ...]


@dataclass(frozen=True)
class Table:
    """One table of the report, as both renderers draw it (raw text: they escape it)."""

    anchor: str
    title: str
    summary: str
    """What the folded table holds (``7 lines``), or what stands instead of no rows."""
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    flagged: tuple[bool, ...] = ()
    """Per row: a culprit's row, an unreached host."""
    odd: tuple[tuple[bool, ...], ...] = ()
    """Per row and cell (a Flight Recorder grid): what differs from the group."""
    note: str = ""


@dataclass(frozen=True)
class Report:
    doc: dict[str, Any]
    """``to_json(evidence, analysis)``: the triage JSON, raw text (renderers escape it)."""
    playbook_title: str
    next_steps: str
    """The playbook's "What to do" section, Markdown (ours, not the job's)."""
    versions: tuple[tuple[str, str], ...]
    """torch, NCCL, CUDA, driver, Python: the issue templates' block; ``unknown`` where
    no evidence says."""
    environment: tuple[tuple[str, str], ...]
    evidence: Table | None
    tables: tuple[Table, ...]
    """After the stack tree: groups, grids, ranks, hosts, what could not be read, logs."""


def build(evidence: Evidence, analysis: Analysis) -> Report:
    """The report of one verdict."""
    from doctor import playbooks

    doc = to_json(evidence, analysis)
    playbook = analysis.verdict.playbook
    text = playbooks.load(playbook)
    culprits = set(analysis.verdict.culprit_ranks)
    ranks = fold_ranks(doc["ranks"])
    found = [
        _groups(doc),
        *(_grid_table(g) for g in grids(analysis.flight)),
        _ranks(ranks, culprits),
        _hosts(doc),
        _skipped(doc),
        _logs(evidence),
    ]
    return Report(
        doc=doc,
        playbook_title=playbooks.title(playbook),
        next_steps=section(text, "What to do"),
        versions=versions(evidence, analysis.flight),
        environment=environment(evidence, analysis.flight, doc),
        evidence=_evidence(doc),
        tables=tuple(t for t in found if t is not None),
    )


def _cells(*values: object) -> tuple[str, ...]:
    return tuple("" if v is None else str(v) for v in values)


def _evidence(doc: dict[str, Any]) -> Table | None:
    rows = tuple(_cells(e["source"], e["rank"], e["text"]) for e in doc["evidence"])
    if not rows:
        return None
    return Table(
        "evidence", "Evidence", f"{len(rows)} lines", ("source", "rank", "what it shows"), rows
    )


def _groups(doc: dict[str, Any]) -> Table | None:
    rows = tuple(
        _cells(
            g["process_group"],
            g["desc"],
            g["members"],
            g["kind"],
            g["seq"],
            rank_list(g["culprits"]),
            g["text"],
        )
        for g in doc["groups"]
    )
    if not rows:
        return None
    headers = ("group", "role", "size", "kind", "seq", "culprits", "what diverges")
    title = "Flight Recorder: process groups that diverge"
    return Table("groups", title, f"{len(rows)} groups", headers, rows)


def _grid_table(grid: Grid) -> Table:
    label = f"{grid.group} ({grid.desc})" if grid.desc else grid.group
    return Table(
        f"grid-{grid.group}",
        f"Flight Recorder grid: group {label}",
        f"{len(grid.rows)} rows of ranks alike, by sequence number",
        ("ranks", *(f"seq {s}" for s in grid.seqs)),
        tuple((r.ranks, *r.cells) for r in grid.rows),
        odd=tuple((False, *r.odd) for r in grid.rows),
    )


def _ranks(rows: Sequence[RankRow], culprits: set[int]) -> Table | None:
    if not rows:
        return None
    total = sum(r.count for r in rows)
    return Table(
        "ranks",
        "Ranks",
        f"{total} ranks in {len(rows)} rows (ranks alike folded)",
        ("ranks", "count", "host", "state", "where", "pid"),
        tuple(_cells(r.ranks, r.count, r.host, r.state, r.where, r.pid) for r in rows),
        flagged=tuple(bool(culprits & expand(r.ranks)) for r in rows),
    )


def _hosts(doc: dict[str, Any]) -> Table | None:
    hosts = doc.get("hosts") or []
    if not hosts:
        return None
    down = sum(not h["reached"] for h in hosts)
    return Table(
        "hosts",
        "Hosts",
        f"{len(hosts)} hosts, {down} not reached",
        ("host", "reached", "ranks", "seconds", "note"),
        tuple(
            _cells(
                h["host"],
                "yes" if h["reached"] else "NO",
                rank_ranges(h["ranks"]),
                None if h["seconds"] is None else f"{h['seconds']:.1f}",
                h["reason"],
            )
            for h in hosts
        ),
        flagged=tuple(not h["reached"] for h in hosts),
    )


def _skipped(doc: dict[str, Any]) -> Table:
    rows = tuple(_cells(s["rank"], s["probe"], s["reason"]) for s in doc["skipped"])
    summary = f"{len(rows)} probes or files" if rows else "Every probe was read."
    return Table("skipped", "Could not read", summary, ("rank", "probe", "reason"), rows)


def _logs(evidence: Evidence) -> Table | None:
    if not evidence.logs:
        return None
    rows = tuple(
        _cells(e.origin or e.host, e.rank, e.kind, e.text) for e in evidence.logs[:MAX_LOG_LINES]
    )
    left = len(evidence.logs) - len(rows)
    return Table(
        "logs",
        "Log lines read",
        f"{len(evidence.logs)} lines",
        ("source", "rank", "kind", "line"),
        rows,
        note=f"{left} more lines left out (analyze --json judges them all)" if left else "",
    )


def section(markdown: str, heading: str) -> str:
    """The body of ``## heading`` in a playbook, without the heading."""
    out: list[str] = []
    inside = False
    for line in markdown.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == heading
            continue
        if inside:
            out.append(line)
    return "\n".join(out).strip()


def fold_ranks(rows: Sequence[dict[str, Any]]) -> tuple[RankRow, ...]:
    """The JSON's ``ranks`` rows, those alike folded into one row of rank ranges, in rank
    order of each row's first rank."""
    alike: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        where = row.get("top_frame") or row.get("last_op") or ""
        alike.setdefault((row.get("host") or "", row["state"], where), []).append(row)
    out = []
    for (host, state, where), members in alike.items():
        pid = members[0].get("pid") if len(members) == 1 else None
        out.append(
            RankRow(
                rank_ranges(r["rank"] for r in members),
                len(members),
                host,
                state,
                where,
                "" if pid is None else str(pid),
            )
        )
    return tuple(sorted(out, key=lambda r: _first(r.ranks)))


def _first(ranks: str) -> int:
    head = ranks.split(",", 1)[0].split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def grids(fa: FlightAnalysis | None) -> tuple[Grid, ...]:
    """The Flight Recorder grid of each diverging group (at most ``MAX_GRIDS``)."""
    if fa is None:
        return ()
    out = []
    for g in fa.divergent[:MAX_GRIDS]:
        assert g.divergence is not None
        ops = [o for o in fa.ops if o.group == g.name]
        ops += [o for o in fa.last_ops if o.group == g.name]
        marked = (g.divergence.seq, set(g.divergence.culprits))
        out.append(_grid(g.name, g.desc, g.members, ops, marked))
    return tuple(out)


def _grid(
    name: str,
    desc: str,
    members: Iterable[int],
    ops: Iterable[RankOp],
    culprits: tuple[int | None, set[int]],
) -> Grid:
    """Ranks by sequence number; a cell is odd where it differs from what more than half
    of the ranks recorded, or where the divergence names its rank a culprit (a 1:1 tie
    has no majority)."""
    cell: dict[int, dict[int, str]] = {}
    for o in ops:
        cell.setdefault(o.rank, {})[o.seq] = f"{o.op} {o.state}"
    seqs = sorted({s for row in cell.values() for s in row})[-GRID_SEQS:]
    rows: dict[tuple[str, ...], list[int]] = {}
    for rank in sorted(set(members) | set(cell)):
        mine = cell.get(rank, {})
        rows.setdefault(tuple(mine.get(s, "") for s in seqs), []).append(rank)
    total = sum(len(r) for r in rows.values())
    majority: list[str | None] = []
    for i in range(len(seqs)):
        votes = Counter[str]()
        for cells, ranks in rows.items():
            votes[cells[i]] += len(ranks)
        value, count = votes.most_common(1)[0]
        majority.append(value if 2 * count > total else None)
    seq, named = culprits
    folded = [
        GridRow(
            rank_ranges(ranks),
            cells,
            tuple(
                (usual is not None and c != usual) or (s == seq and bool(named & set(ranks)))
                for c, usual, s in zip(cells, majority, seqs, strict=True)
            ),
        )
        for cells, ranks in rows.items()
    ]
    return Grid(name, desc, tuple(seqs), tuple(sorted(folded, key=lambda r: _first(r.ranks))))


_NCCL = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+\.\d+))?")
_CUDA = re.compile(r"CUDA (?:runtime )?version:? (\d+\.\d+)|\+cuda(\d+\.\d+)")
_DRIVER = re.compile(r"[Dd]river [Vv]ersion:? (\d+\.\d+(?:\.\d+)?)|Kernel Module\s+(\d+\.\d+\.\d+)")
_TORCH = re.compile(r"PyTorch version:? (\d+\.\d+\.\S+)|torch==(\d+\.\d+\.\S+)")
_PYTHON = re.compile(r"/python(3\.\d+)/")


def _found(pattern: re.Pattern[str], texts: Iterable[str]) -> str:
    seen: dict[str, None] = {}
    for text in texts:
        for m in pattern.finditer(text):
            value = next((g for g in m.groups() if g), "")
            if value:
                seen[value] = None
    return ", ".join(seen) or UNKNOWN


def versions(evidence: Evidence, fa: FlightAnalysis | None) -> tuple[tuple[str, str], ...]:
    """The versions NCCL's and PyTorch's issue templates ask for, as far as the evidence
    states them: log lines (``NCCL version 2.21.5+cuda12.4``), and Python from the stack
    frames' file paths (``.../python3.11/...``); ``unknown`` for the rest."""
    logs = [e.text for e in evidence.logs]
    main = (s.main for s in evidence.stacks)
    frames = [f for t in main if t is not None for f in t.frames]
    frames += [f for o in (fa.last_ops if fa else ()) for f in o.frames]
    files = (f.filename for f in frames if not f.native)
    return (
        ("PyTorch", _found(_TORCH, logs)),
        ("NCCL", _found(_NCCL, logs)),
        ("CUDA", _found(_CUDA, logs)),
        ("GPU driver", _found(_DRIVER, logs)),
        ("Python (from stack paths)", _found(_PYTHON, files)),
        ("Flight Recorder format", ", ".join(fa.versions) if fa and fa.versions else UNKNOWN),
        ("nccl-doctor (report)", __version__),
    )


def environment(
    evidence: Evidence, fa: FlightAnalysis | None, doc: dict[str, Any]
) -> tuple[tuple[str, str], ...]:
    """The job's facts a reader of an incident asks first; only those the evidence has."""
    collected = doc["collected"]
    rows = [
        ("job", evidence.job),
        ("world size", str(evidence.world_size or collected["ranks_expected"] or UNKNOWN)),
        ("ranks expected here", str(collected["ranks_expected"] or UNKNOWN)),
        ("ranks found", str(collected["ranks_found"])),
        ("backend", fa.backend if fa and fa.backend else UNKNOWN),
        ("launcher", evidence.launcher or UNKNOWN),
        ("hosts", str(len(evidence.hosts) or 1)),
        ("collection", f"{evidence.seconds:.1f} s"),
        ("Flight Recorder dumps", str(len(evidence.dumps))),
        ("logs read", _few(evidence.log_files)),
    ]
    return tuple(rows)


def _few(items: Sequence[str], shown: int = 6) -> str:
    """``a, b, c and 12 more``: a list of file names that stays one line."""
    if not items:
        return "none"
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def expand(ranges: str) -> set[int]:
    """``"0-2,5"`` -> ``{0, 1, 2, 5}``: a rank label back to ranks, to mark culprits' rows."""
    out: set[int] = set()
    for part in ranges.split(","):
        a, _, b = part.partition("-")
        if a.isdigit():
            out.update(range(int(a), int(b or a) + 1))
    return out


SHOWN_FRAMES = 4
"""Frames a box of the stack tree shows: a longer run keeps its first and last two."""


@dataclass(frozen=True)
class TreeBox:
    """One node of the merged stack tree as a person reads it (SVG box, Markdown line)."""

    depth: int
    label: str
    """``ranks 0-1,3 (3)``."""
    frames: tuple[str, ...]
    """The run's frames, outermost first, the middle of a long run elided."""
    all_frames: tuple[str, ...]
    hot: bool
    """Whether only culprits reach it: where their stacks leave the others'."""
    more: int
    """Children the JSON left out (its 200-node cap)."""


def outline(tree: dict[str, Any], culprits: set[int]) -> Iterator[TreeBox]:
    """``stacktree.to_json``'s tree depth-first, parents before their children, the
    branch with the most ranks first (the JSON's order)."""
    stack: list[tuple[dict[str, Any], int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        frames = tuple(node["frames"]) or ("(every rank)",)
        shown = frames
        if len(frames) > SHOWN_FRAMES:
            shown = (frames[0], f"… {len(frames) - 3} frames …", *frames[-2:])
        noun = "rank" if node["count"] == 1 else "ranks"
        yield TreeBox(
            depth,
            f"{noun} {node['ranks']} ({node['count']})",
            shown,
            frames,
            bool(culprits) and expand(node["ranks"]) <= culprits,
            node.get("more_children", 0),
        )
        stack.extend((kid, depth + 1) for kid in reversed(node.get("children", [])))
