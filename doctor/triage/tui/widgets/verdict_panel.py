"""The verdict: hang class, culprits, the evidence behind it and the playbook to follow."""

from __future__ import annotations

from functools import lru_cache

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

import playbooks
from doctor.model import Verdict
from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.view import playbook_section, rank_ranges
from doctor.triage.tui.widgets.palette import CULPRIT


@lru_cache(maxsize=32)
def playbook_steps(playbook_id: str) -> str:
    """The playbook's "What to do" section; read once per hang class, not on every repaint."""
    return playbook_section(playbooks.load(playbook_id)) if playbooks.resolve(playbook_id) else ""


def render_verdict(verdict: Verdict) -> RenderableType:
    head = Text()
    head.append(f" {verdict.hang_class.value} ",
                style="bold white on red" if verdict.hang_class.is_hang else "bold black on green")
    if verdict.culprit_ranks:
        head.append(f"  culprit rank {rank_ranges(verdict.culprit_ranks)}", style=CULPRIT)
    head.append(f"  confidence {verdict.confidence.value}", style="dim")
    lines: list[RenderableType] = [head, Text(verdict.summary)]
    if verdict.collective is not None:
        ref = verdict.collective
        seq = "?" if ref.seq is None else ref.seq
        lines.append(Text(f"collective: {ref.op} #{seq} in process group {ref.process_group}",
                          style="cyan"))
    if verdict.evidence:
        lines.append(Text("evidence", style="bold"))
        for line in verdict.evidence:
            who = "" if line.rank is None else f" rank {line.rank}"
            lines.append(Text.assemble(("  " + line.source + who + ": ", "dim"), line.text))
    for missing in verdict.missing_evidence:
        lines.append(Text(f"missing: {missing}", style="yellow"))
    lines.append(Text.assemble(("playbook ", "bold"), f"nccl-doctor playbook {verdict.playbook}"))
    steps = playbook_steps(verdict.playbook)
    if steps:
        lines.append(Markdown(steps))
    return Group(*lines)


class VerdictPanel(Widget):
    """Draws the verdict of the snapshot on screen."""

    DEFAULT_CSS = "VerdictPanel { height: auto; }"

    snapshot: reactive[TriageSnapshot | None] = reactive(None, layout=True)

    def render(self) -> RenderableType:
        if self.snapshot is None:
            return Text("collecting evidence…", style="dim")
        return render_verdict(self.snapshot.verdict)
