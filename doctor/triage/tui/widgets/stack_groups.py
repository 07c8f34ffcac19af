"""Ranks grouped by main-thread stack: 32 ranks in one collective are one line, odd ones pop."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from doctor.ranks import rank_ranges
from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.view import StackGroup, frame_text, stack_groups
from doctor.triage.tui.widgets.palette import CULPRIT, ODD, state_style
from doctor.trust.safe_text import safe_text
from doctor.verdict import stacktree

FRAMES_SHOWN = 3
"""Innermost frames per group; the stack pane shows the selected rank's whole stack."""


def render_groups(groups: list[StackGroup], selected_rank: int | None) -> Text:
    text = Text()
    for group in groups:
        mark = CULPRIT if group.culprit else ODD if group.odd else "bold"
        count = len(group.ranks)
        pointer = "▶ " if selected_rank in group.ranks else "  "
        text.append(pointer)
        text.append(f"{count} rank{'s' * (count != 1)} {rank_ranges(group.ranks)}", style=mark)
        if group.hosts:
            text.append(safe_text(f" on {group.hosts}", style=mark))
        text.append("  ")
        text.append(safe_text(group.state, style=state_style(group.state)))
        if group.odd:
            text.append("  odd one out", style=ODD)
        text.append("\n")
        for frame in group.frames[:FRAMES_SHOWN]:
            text.append(safe_text(f"    {frame_text(frame)}", style="" if group.odd else "dim"))
            text.append("\n")
        if len(group.frames) > FRAMES_SHOWN:
            text.append(f"    … {len(group.frames) - FRAMES_SHOWN} more frames\n", style="dim")
        if group.note:
            text.append(safe_text(f"    {group.note}", style="dim")).append("\n")
    return text


class StackGroups(Widget):
    """The equivalence classes of the ranks' main-thread stacks, largest first."""

    DEFAULT_CSS = "StackGroups { height: auto; }"

    snapshot: reactive[TriageSnapshot | None] = reactive(None, layout=True)
    selected_rank: reactive[int | None] = reactive(None)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups: list[StackGroup] = []
        self.branches: list[str] = []
        """Where the ranks' stacks part (STAT's prefix tree), one line per branch."""

    def watch_snapshot(self, snapshot: TriageSnapshot | None) -> None:
        self.groups = stack_groups(snapshot) if snapshot else []
        stacks = snapshot.evidence.stacks if snapshot else ()
        self.branches = list(stacktree.branch_lines(stacktree.build(stacks))) if stacks else []

    def render(self) -> Text:
        if not self.groups:
            return Text("waiting for the first collection…", style="dim")
        text = render_groups(self.groups, self.selected_rank)
        for line in self.branches:
            text.append(safe_text(line, style="bold")).append("\n")
        return text
