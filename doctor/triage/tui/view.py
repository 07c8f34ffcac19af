"""What each TUI widget shows, computed from a snapshot by pure functions.

Widgets only draw these rows, so everything a person reads on screen (a rank's
state, which stacks are odd, which ranks are grouped) is decided here, without
textual, and unit tested on plain evidence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from doctor.evidence import Evidence, Frame, RankProcess, RankStack, ThreadStack
from doctor.triage.snapshot import TriageSnapshot
from doctor.verdict import stacks

_NO_VALUE = "–"
_Ranked = TypeVar("_Ranked", RankProcess, RankStack)


@dataclass(frozen=True)
class RankRow:
    """One line of the rank table."""

    rank: int
    host: str
    pid: str
    state: str
    top_frame: str
    fr_position: str
    gpu: str
    culprit: bool
    odd: bool
    """The rank's stack is not in the largest stack group."""


@dataclass(frozen=True)
class StackGroup:
    """Ranks whose main threads stand at the same place (an equivalence class, as STAT)."""

    ranks: tuple[int, ...]
    state: str
    frames: tuple[Frame, ...]
    """The shared main-thread stack, innermost first; empty when there is no stack."""
    odd: bool
    """Smaller than the largest group: these ranks are somewhere the majority is not."""
    culprit: bool
    note: str = ""
    """Why a group has no stack (dead rank, py-spy skipped)."""


@dataclass(frozen=True)
class RankDetail:
    """The selected rank: its process line and every thread's stack."""

    rank: int
    summary: str
    threads: tuple[ThreadStack, ...]
    missing: tuple[str, ...]
    """Probes that could not read this rank, with their reasons."""


def short_path(filename: str) -> str:
    """The part of a path a person recognises: after site-packages, else the last two parts."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in filename:
            return filename.rsplit(marker, 1)[1]
    return "/".join(filename.split("/")[-2:])


def frame_text(frame: Frame, *, brief: bool = False) -> str:
    """``name (path:line)``; ``brief`` keeps only the file name, for the narrow table column."""
    path = frame.filename.rsplit("/", 1)[-1] if brief else short_path(frame.filename)
    return f"{frame.name} ({path}:{frame.line})"


def rank_ranges(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 4]`` -> ``"0-2,4"``: 32 ranks stay one short line."""
    spans: list[list[int]] = []
    for rank in sorted(set(ranks)):
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def process_state(process: RankProcess | None) -> str | None:
    """A liveness state that overrides the stack, or None when the process looks alive."""
    if process is None:
        return None
    if process.status in ("zombie", "stopped"):
        return process.status
    if not process.alive:
        return "dead" if process.exit_code is None else f"exited ({process.exit_code})"
    return None


def _by_rank(items: Iterable[_Ranked]) -> dict[int, _Ranked]:
    return {item.rank: item for item in items}


def all_ranks(evidence: Evidence) -> list[int]:
    """Every rank the job should have: expected, found, or mentioned by any source."""
    ranks = set(range(evidence.ranks_expected or 0))
    ranks.update(p.rank for p in evidence.processes)
    ranks.update(s.rank for s in evidence.stacks)
    return sorted(ranks)


def rank_state(evidence: Evidence, rank: int) -> str:
    """Liveness first (a dead rank's last stack is history), then the stack's state."""
    process = _by_rank(evidence.processes).get(rank)
    stack = _by_rank(evidence.stacks).get(rank)
    if process is None and stack is None:
        return "missing"
    return process_state(process) or stacks.rank_state(stack).value


def call_frames(stack: RankStack | None) -> tuple[Frame, ...]:
    """The main thread from the call a person reads first (the collective call) outwards.

    Frames inside c10d below that call are where the sampler caught the rank,
    not where it is, so they are left to the full stack pane.
    """
    main = stack.main if stack else None
    if main is None:
        return ()
    return main.frames[stacks.collective_index(main) or 0:]


def _missing(evidence: Evidence, rank: int) -> tuple[str, ...]:
    return tuple(f"{s.probe}: {s.reason}" for s in evidence.skipped if s.rank == rank)


def stack_groups(snapshot: TriageSnapshot) -> list[StackGroup]:
    """Ranks grouped by call-path signature (``doctor.verdict.stacks``), largest group first.

    Ranks that are not alive or have no stack form groups by state and by the
    reason the stack probe gave, so a skipped probe never merges with a real
    stack. The odd ones out are decided over all groups by ``odd_ones_out``:
    a 1:1 or 2:2 split is a tie and marks nobody.
    """
    evidence = snapshot.evidence
    processes, by_rank = _by_rank(evidence.processes), _by_rank(evidence.stacks)
    live = [by_rank[r] for r in all_ranks(evidence)
            if r in by_rank and process_state(processes.get(r)) is None]
    rows = [(g.ranks, g.state.value, call_frames(by_rank[g.ranks[0]]), "")
            for g in stacks.group_by_signature(live)]
    grouped = {r for ranks, *_ in rows for r in ranks}
    others: dict[tuple[str, str], list[int]] = {}
    for rank in all_ranks(evidence):
        if rank not in grouped:
            note = "; ".join(_missing(evidence, rank)) or "no stack collected"
            others.setdefault((rank_state(evidence, rank), note), []).append(rank)
    rows += [(tuple(ranks), state, (), note) for (state, note), ranks in others.items()]
    rows.sort(key=lambda row: (-len(row[0]), row[0]))
    outliers = stacks.odd_ones_out(
        [stacks.SignatureGroup(str(i), stacks.RankState.UNKNOWN, row[0], "")
         for i, row in enumerate(rows)])
    odd = set() if outliers.tie else set(outliers.ranks)
    culprits = set(snapshot.verdict.culprit_ranks)
    return [StackGroup(ranks=ranks, state=state, frames=frames, odd=bool(odd & set(ranks)),
                       culprit=bool(culprits & set(ranks)), note=note)
            for ranks, state, frames, note in rows]


def _fr_position(evidence: Evidence, rank: int) -> str:
    samples = [p for p in evidence.progress if p.rank == rank]
    if not samples:
        return _NO_VALUE
    last = max(samples, key=lambda p: p.time_s)
    enqueued, completed = last.last_enqueued_seq, last.last_completed_seq
    if enqueued is None and completed is None:
        return _NO_VALUE
    return f"{_seq(enqueued)}/{_seq(completed)}"


def _seq(value: int | None) -> str:
    return _NO_VALUE if value is None else str(value)


def _gpu(evidence: Evidence, rank: int) -> str:
    sample = next((g for g in evidence.gpus if g.rank == rank), None)
    if sample is None:
        return _NO_VALUE
    util = _NO_VALUE if sample.utilization_pct is None else f"{sample.utilization_pct:.0f}%"
    power = _NO_VALUE if sample.power_w is None else f"{sample.power_w:.0f}W"
    return f"{util} {power}"


def rank_rows(snapshot: TriageSnapshot) -> list[RankRow]:
    """The rank table, one row per rank in rank order, including ranks expected but absent."""
    evidence = snapshot.evidence
    processes = _by_rank(evidence.processes)
    by_rank = _by_rank(evidence.stacks)
    culprits = set(snapshot.verdict.culprit_ranks)
    odd = {r for g in stack_groups(snapshot) if g.odd for r in g.ranks}
    rows = []
    for rank in all_ranks(evidence):
        process = processes.get(rank)
        frames = call_frames(by_rank.get(rank))
        rows.append(RankRow(
            rank=rank,
            host=process.host if process else _NO_VALUE,
            pid=str(process.pid) if process and process.pid is not None else _NO_VALUE,
            state=rank_state(evidence, rank),
            top_frame=frame_text(frames[0], brief=True) if frames else _NO_VALUE,
            fr_position=_fr_position(evidence, rank),
            gpu=_gpu(evidence, rank),
            culprit=rank in culprits,
            odd=rank in odd,
        ))
    return rows


def rank_detail(snapshot: TriageSnapshot, rank: int) -> RankDetail:
    """Everything the stack pane shows for one rank: main thread first, then the others."""
    evidence = snapshot.evidence
    process = _by_rank(evidence.processes).get(rank)
    stack = _by_rank(evidence.stacks).get(rank)
    parts = [f"rank {rank}", rank_state(evidence, rank)]
    if process is not None:
        parts.append(f"pid {process.pid} on {process.host}")
        if process.cpu_seconds_delta is not None:
            parts.append(f"cpu {process.cpu_seconds_delta:.2f} s during collection")
        if process.error:
            parts.append(process.error)
    if stack is not None:
        parts.append(f"stack from {stack.source}")
    threads: tuple[ThreadStack, ...] = ()
    if stack is not None:
        main = stack.main
        threads = tuple(sorted(stack.threads, key=lambda t: t is not main))
    return RankDetail(rank=rank, summary=" · ".join(parts), threads=threads,
                      missing=_missing(evidence, rank))


def playbook_section(markdown: str, heading: str = "What to do") -> str:
    """The body under one ``## heading`` of a playbook, for the verdict pane ('' if absent)."""
    lines = markdown.splitlines()
    try:
        start = next(i for i, line in enumerate(lines)
                     if line.lstrip("#").strip() == heading and line.startswith("#"))
    except StopIteration:
        return ""
    body = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        body.append(line)
    return "\n".join(body).strip()
