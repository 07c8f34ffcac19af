"""Ranks by collective sequence, coloured by op: a rank in another collective breaks a column."""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Region
from textual.reactive import reactive
from textual.widget import Widget

from doctor.ranks import rank_ranges
from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.grid import ABSENT, GridCell, GridGroup, flight_grid, op_label, op_name
from doctor.trust.escape import escape_control
from doctor.trust.safe_text import safe_text

OP_COLOURS = {
    "AR": "blue",
    "ARc": "blue",
    "AG": "green",
    "AGc": "green",
    "RS": "magenta",
    "RSc": "magenta",
    "BC": "cyan",
    "A2A": "yellow",
    "BAR": "white",
}
LABEL_MAX = 16
"""Widest rank label of a collapsed row (``r0-28,30-31``); longer ones are cut with …."""
HEADER_LINES = 2
"""Lines above a group's first rank row: the group title and the sequence numbers."""
STATE_STYLES = {"completed": "", "started": "bold underline", "scheduled": "italic", ABSENT: ""}


def _cell(text: Text, cell: GridCell | None, width: int) -> None:
    if cell is None:
        text.append(f"{'·':>{width}} ", style="dim")
        return
    short = escape_control(op_label(cell.op)) if cell.op else "--"
    style = "bold white on red" if cell.odd else OP_COLOURS.get(short, "white")
    text.append(" " * (width - len(short)))
    text.append(short, style=f"{style} {STATE_STYLES[cell.state]}")
    text.append(" ")


def _group(text: Text, group: GridGroup, selected_rank: int | None) -> None:
    text.append(safe_text(f"process group {group.process_group}", style="bold"))
    if group.desc:
        text.append(safe_text(f" ({group.desc})", style="dim"))
    if group.divergence:
        text.append(safe_text(f"  {group.divergence}", style="bold red"))
    width = max(3, *(len(str(s)) for s in group.seqs))
    labels = [f"r{rank_ranges(row.ranks)}" for row in group.rows]
    label_width = min(LABEL_MAX, max(5, *(len(label) for label in labels)))
    text.append("\n" + " " * (label_width + 2))
    for seq in group.seqs:
        text.append(f"{seq:>{width}} ", style="dim")
    text.append("\n")
    for row, label in zip(group.rows, labels, strict=True):
        pointer = "▶" if selected_rank in row.ranks else " "
        if len(label) > label_width:
            label = label[: label_width - 1] + "…"
        text.append(f"{pointer}{label:<{label_width}} ")
        for cell in row.cells:
            _cell(text, cell, width)
        text.append("\n")


def render_grid(groups: list[GridGroup], selected_rank: int | None, note: str) -> Text:
    """The grids as text, the selected rank's row marked; ``note`` when there is none."""
    if not groups:
        return safe_text(note, style="dim")
    text = Text()
    for group in groups:
        _group(text, group, selected_rank)
    legend = sorted({op_name(c.op) for g in groups for r in g.rows for c in r.cells if c and c.op})
    text.append(safe_text("  ".join(f"{op_label(o)}={o}" for o in legend), style="dim"))
    text.append("   underlined: started, italic: scheduled, red: differs or missing", style="dim")
    return text


def row_line(groups: list[GridGroup], rank: int | None) -> int | None:
    """The line ``render_grid`` draws ``rank``'s first row on, to scroll it into view."""
    line = 0
    for group in groups:
        line += HEADER_LINES
        for row in group.rows:
            if rank in row.ranks:
                return line
            line += 1
    return None


class FlightGrid(Widget):
    """The Flight Recorder grids of the snapshot, one per process group."""

    DEFAULT_CSS = "FlightGrid { height: auto; }"

    snapshot: reactive[TriageSnapshot | None] = reactive(None, layout=True)
    selected_rank: reactive[int | None] = reactive(None)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups: list[GridGroup] = []

    def watch_snapshot(self, snapshot: TriageSnapshot | None) -> None:
        self.groups = flight_grid(snapshot.flight) if snapshot else []
        self.call_after_refresh(self.reveal_selected)

    def watch_selected_rank(self) -> None:
        self.call_after_refresh(self.reveal_selected)

    def reveal_selected(self) -> None:
        """Scroll the pane so the selected rank's row and its group's header show."""
        line = row_line(self.groups, self.selected_rank)
        if line is not None and self.parent is not None and isinstance(self.parent, Widget):
            header = Region(0, line - HEADER_LINES, 1, HEADER_LINES + 1)
            self.parent.scroll_to_region(header, animate=False)

    def render(self) -> Text:
        return render_grid(self.groups, self.selected_rank, self._note())

    def _note(self) -> str:
        """Why there is no grid: the Flight Recorder probe's skip reasons, if any."""
        if self.snapshot is None:
            return "waiting for the first collection…"
        evidence = self.snapshot.evidence
        reasons = {s.reason for s in evidence.skipped if "flight" in s.probe}
        reasons |= {s.reason for s in evidence.unreadable_dumps}
        return "no Flight Recorder data" + (": " + "; ".join(sorted(reasons)) if reasons else "")
