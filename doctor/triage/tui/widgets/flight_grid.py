"""Ranks by collective sequence, coloured by op: a rank in another collective breaks a column."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.grid import GridGroup, flight_entries, grid_groups, op_label, op_name

OP_COLOURS = {
    "AR": "blue", "AG": "green", "AGc": "green", "RS": "magenta", "RSc": "magenta",
    "BC": "cyan", "A2A": "yellow", "BAR": "white", "SND": "bright_black", "RCV": "bright_black",
}
STATE_STYLES = {"completed": "", "started": "bold underline", "scheduled": "italic"}
CELL = 4


def render_grid(groups: list[GridGroup], selected_rank: int | None, note: str) -> Text:
    if not groups:
        return Text(note, style="dim")
    text = Text()
    for group in groups:
        text.append(f"process group {group.process_group}", style="bold")
        if group.mismatch_seqs:
            first = ", ".join(f"#{s}" for s in group.mismatch_seqs[:4])
            text.append(f"  mismatch at {first}", style="bold red")
        text.append("\n" + " " * 7)
        for seq in group.seqs:
            text.append(f"{seq:>{CELL - 1}} ", style="dim")
        text.append("\n")
        for row in group.rows:
            pointer = "▶" if row.rank == selected_rank else " "
            text.append(f"{pointer}r{row.rank:<4} ")
            for cell in row.cells:
                if cell is None:
                    text.append(f"{'·':>{CELL - 1}} ", style="dim")
                    continue
                label = op_label(cell.op)
                style = "bold white on red" if cell.odd else OP_COLOURS.get(label, "white")
                text.append(f"{label:>{CELL - 1}}", style=f"{style} {STATE_STYLES[cell.state]}")
                text.append(" ")
            text.append("\n")
    legend = sorted({op_name(c.op) for g in groups for r in g.rows for c in r.cells if c})
    text.append("ops: " + ", ".join(f"{op_label(o)}={o}" for o in legend), style="dim")
    text.append("   underlined: started   italic: scheduled   red: differs", style="dim")
    return text


class FlightGrid(Widget):
    """The Flight Recorder grids of the snapshot, one per process group."""

    DEFAULT_CSS = "FlightGrid { height: auto; }"

    snapshot: reactive[TriageSnapshot | None] = reactive(None, layout=True)
    selected_rank: reactive[int | None] = reactive(None)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups: list[GridGroup] = []

    def watch_snapshot(self, snapshot: TriageSnapshot | None) -> None:
        self.groups = grid_groups(flight_entries(snapshot.evidence)) if snapshot else []

    def render(self) -> Text:
        return render_grid(self.groups, self.selected_rank, self._note())

    def _note(self) -> str:
        """Why there is no grid: the Flight Recorder probe's skip reasons, if any."""
        if self.snapshot is None:
            return "waiting for the first collection…"
        reasons = {s.reason for s in self.snapshot.evidence.skipped if "flight" in s.probe}
        return "no Flight Recorder data" + (": " + "; ".join(sorted(reasons)) if reasons else "")
