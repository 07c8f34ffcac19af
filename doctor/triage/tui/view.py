"""What each TUI widget shows, computed from a snapshot by pure functions.

Widgets only draw these rows, so everything a person reads on screen (a rank's
state, which stacks are odd, which ranks are grouped) is decided here, without
textual, and unit tested on plain evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from doctor.evidence import (
    UNREACHED,
    Evidence,
    Frame,
    GpuSample,
    ProgressSample,
    RankProcess,
    RankStack,
    ThreadStack,
)
from doctor.triage.snapshot import TriageSnapshot
from doctor.verdict import stacks

_NO_VALUE = "–"


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
    hosts: str = ""
    """Multi-host triage: the hosts of the group's ranks, folded (``h[1-3]``)."""


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


@dataclass(frozen=True)
class RankIndex:
    """A snapshot's evidence by rank, built in one pass so 1000 ranks cost O(n), not O(n²)."""

    ranks: tuple[int, ...]
    """Every rank the job should have: expected, found, or mentioned by any source."""
    processes: dict[int, RankProcess]
    stacks: dict[int, RankStack]
    gpus: dict[int, GpuSample]
    progress: dict[int, ProgressSample]
    """The latest sample of each rank."""
    missing: dict[int, tuple[str, ...]]
    """Probes that could not read a rank, with their reasons."""

    @classmethod
    def of(cls, evidence: Evidence) -> RankIndex:
        ranks = set(range(evidence.ranks_expected or 0))
        ranks.update(p.rank for p in evidence.processes)
        ranks.update(s.rank for s in evidence.stacks)
        progress: dict[int, ProgressSample] = {}
        for sample in sorted(evidence.progress, key=lambda p: p.time_s):
            progress[sample.rank] = sample
        missing: dict[int, list[str]] = {}
        for host in evidence.hosts:
            for rank in host.ranks if not host.reached else ():
                missing.setdefault(rank, []).append(f"host {host.host} not reached: {host.reason}")
        for skipped in evidence.skipped:
            if skipped.rank is not None:
                missing.setdefault(skipped.rank, []).append(f"{skipped.probe}: {skipped.reason}")
        return cls(
            ranks=tuple(sorted(ranks)),
            processes={p.rank: p for p in evidence.processes},
            stacks={s.rank: s for s in evidence.stacks},
            gpus={g.rank: g for g in evidence.gpus if g.rank is not None},
            progress=progress,
            missing={rank: tuple(lines) for rank, lines in missing.items()},
        )

    def alive(self, rank: int) -> bool:
        """Alive as far as we know: a rank with a stack but no process record counts."""
        process = self.processes.get(rank)
        return rank in self.stacks if process is None else process.alive

    def state(self, rank: int) -> str:
        """The ``state`` of the triage JSON: the stack's state while alive, else the fate."""
        process, stack = self.processes.get(rank), self.stacks.get(rank)
        if process is None and stack is None:
            return "missing"
        if process is not None and process.status == UNREACHED:
            return UNREACHED
        return stacks.row_state(self.alive(rank), process.status if process else "", stack)


def call_frames(stack: RankStack | None) -> tuple[Frame, ...]:
    """The main thread from the frame a person reads first outwards: the collective call,
    or where user code entered the data loader or the compiler.

    Frames below it (inside c10d, a queue wait) are where the sampler caught the
    rank, not where it is, so they are left to the full stack pane.
    """
    main = stack.main if stack else None
    if main is None:
        return ()
    return main.frames[stacks.decisive_index(stack) or 0 :]


def stack_groups(snapshot: TriageSnapshot, index: RankIndex | None = None) -> list[StackGroup]:
    """Ranks grouped by call-path signature (``doctor.verdict.stacks``), largest group first.

    Ranks that are not alive or have no stack form groups by state and by the
    reason the stack probe gave, so a skipped probe never merges with a real
    stack. The odd ones out are decided over all groups by ``odd_ones_out``:
    a 1:1 or 2:2 split is a tie and marks nobody.
    """
    ix = index or RankIndex.of(snapshot.evidence)
    live = [ix.stacks[r] for r in ix.ranks if r in ix.stacks and ix.alive(r)]
    rows = [
        (g.ranks, g.state.value, call_frames(ix.stacks[g.ranks[0]]), "")
        for g in stacks.group_by_signature(live)
    ]
    grouped = {r for ranks, *_ in rows for r in ranks}
    others: dict[tuple[str, str], list[int]] = {}
    for rank in ix.ranks:
        if rank not in grouped:
            note = "; ".join(ix.missing.get(rank, ())) or "no stack collected"
            others.setdefault((ix.state(rank), note), []).append(rank)
    rows += [(tuple(ranks), state, (), note) for (state, note), ranks in others.items()]
    rows.sort(key=lambda row: (-len(row[0]), row[0]))
    outliers = stacks.odd_ones_out(
        [
            stacks.SignatureGroup(str(i), stacks.RankState.UNKNOWN, row[0], "")
            for i, row in enumerate(rows)
        ]
    )
    odd = set() if outliers.tie else set(outliers.ranks)
    culprits = set(snapshot.verdict.culprit_ranks)
    hosts = _group_hosts(snapshot.evidence, ix)
    return [
        StackGroup(
            ranks=ranks,
            state=state,
            frames=frames,
            odd=bool(odd & set(ranks)),
            culprit=bool(culprits & set(ranks)),
            note=note,
            hosts=hosts(ranks),
        )
        for ranks, state, frames, note in rows
    ]


def _group_hosts(evidence: Evidence, ix: RankIndex) -> Callable[[Sequence[int]], str]:
    """Ranks -> their hosts, folded; '' for single-host triage (the host column says it)."""
    if not evidence.hosts:
        return lambda ranks: ""
    from doctor.remote.hosts import fold

    def hosts(ranks: Sequence[int]) -> str:
        return fold({ix.processes[r].host for r in ranks if r in ix.processes})

    return hosts


def _fr_position(sample: ProgressSample | None) -> str:
    if sample is None or (sample.last_enqueued_seq is None and sample.last_completed_seq is None):
        return _NO_VALUE
    return f"{_seq(sample.last_enqueued_seq)}/{_seq(sample.last_completed_seq)}"


def _seq(value: int | None) -> str:
    return _NO_VALUE if value is None else str(value)


def _gpu(sample: GpuSample | None) -> str:
    if sample is None:
        return _NO_VALUE
    util = _NO_VALUE if sample.utilization_pct is None else f"{sample.utilization_pct:.0f}%"
    power = _NO_VALUE if sample.power_w is None else f"{sample.power_w:.0f}W"
    return f"{util} {power}"


def rank_rows(snapshot: TriageSnapshot) -> list[RankRow]:
    """The rank table, one row per rank in rank order, including ranks expected but absent."""
    ix = RankIndex.of(snapshot.evidence)
    culprits = set(snapshot.verdict.culprit_ranks)
    odd = {r for g in stack_groups(snapshot, ix) if g.odd for r in g.ranks}
    rows = []
    for rank in ix.ranks:
        process = ix.processes.get(rank)
        frames = call_frames(ix.stacks.get(rank))
        rows.append(
            RankRow(
                rank=rank,
                host=process.host if process else _NO_VALUE,
                pid=str(process.pid) if process and process.pid is not None else _NO_VALUE,
                state=ix.state(rank),
                top_frame=frame_text(frames[0], brief=True) if frames else _NO_VALUE,
                fr_position=_fr_position(ix.progress.get(rank)),
                gpu=_gpu(ix.gpus.get(rank)),
                culprit=rank in culprits,
                odd=rank in odd,
            )
        )
    return rows


def rank_detail(snapshot: TriageSnapshot, rank: int) -> RankDetail:
    """Everything the stack pane shows for one rank: main thread first, then the others."""
    ix = RankIndex.of(snapshot.evidence)
    process, stack = ix.processes.get(rank), ix.stacks.get(rank)
    parts = [f"rank {rank}", ix.state(rank)]
    if process is not None:
        parts.append(
            f"pid {process.pid} on {process.host}"
            if process.pid is not None
            else f"on {process.host}"
        )
        if process.exit_code is not None:
            parts.append(f"exit code {process.exit_code}")
        if process.cpu_seconds_delta is not None:
            parts.append(f"cpu {process.cpu_seconds_delta:.2f} s during collection")
        if process.error:
            parts.append(process.error)
    threads: tuple[ThreadStack, ...] = ()
    if stack is not None:
        parts.append(f"stack from {stack.source}")
        main = stack.main
        threads = tuple(sorted(stack.threads, key=lambda t: t is not main))
    return RankDetail(
        rank=rank, summary=" · ".join(parts), threads=threads, missing=ix.missing.get(rank, ())
    )


def playbook_section(markdown: str, heading: str = "What to do") -> str:
    """The body under one ``## heading`` of a playbook, for the verdict pane ('' if absent)."""
    lines = markdown.splitlines()
    try:
        start = next(
            i
            for i, line in enumerate(lines)
            if line.lstrip("#").strip() == heading and line.startswith("#")
        )
    except StopIteration:
        return ""
    body = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        body.append(line)
    return "\n".join(body).strip()
