"""One line at the top: which job, how fresh the data is, and whether the display is paused."""

from __future__ import annotations

import time

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from doctor.ranks import rank_ranges
from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.widgets.palette import CULPRIT
from doctor.trust.safe_text import safe_text


def render_status(
    job: str,
    interval: float,
    snapshot: TriageSnapshot | None,
    *,
    paused: bool,
    pending: bool,
    collecting: bool,
    problem: str,
) -> Text:
    text = Text()
    text.append("nccl-doctor triage", style="bold")
    text.append(safe_text(f"  job {job}"))
    if snapshot is not None:
        evidence, verdict = snapshot.evidence, snapshot.verdict
        found = sum(1 for p in evidence.processes if p.alive)
        expected = evidence.ranks_expected if evidence.ranks_expected is not None else "?"
        clock = time.strftime("%H:%M:%S", time.localtime(snapshot.taken_at))
        text.append(
            f" · {found}/{expected} ranks alive · collected {clock} in {evidence.seconds:.1f} s"
        )
        text.append(" · ")
        text.append(
            verdict.hang_class.value, style=CULPRIT if verdict.hang_class.is_hang else "bold green"
        )
        if verdict.culprit_ranks:
            text.append(f" rank {rank_ranges(verdict.culprit_ranks)}", style=CULPRIT)
    text.append(f" · every {interval:g} s")
    if collecting:
        text.append(" · collecting…", style="dim")
    if paused:
        text.append(
            " · PAUSED" + (" (newer data waiting)" if pending else ""), style="reverse yellow"
        )
    if problem:
        text.append(safe_text(f" · {problem}", style="red"))
    return text


class StatusLine(Widget):
    """The app binds its state here; the line only draws it."""

    DEFAULT_CSS = "StatusLine { height: auto; }"

    snapshot: reactive[TriageSnapshot | None] = reactive(None)
    paused = reactive(False)
    pending = reactive(False)
    collecting = reactive(False)
    problem = reactive("")

    def __init__(self, job: str, interval: float, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.job = job
        self.interval = interval

    def render(self) -> Text:
        return render_status(
            self.job,
            self.interval,
            self.snapshot,
            paused=self.paused,
            pending=self.pending,
            collecting=self.collecting,
            problem=self.problem,
        )
