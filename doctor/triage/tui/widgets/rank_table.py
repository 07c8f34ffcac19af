"""The rank table: one row per rank; its cursor selects the rank the other panes follow."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.view import RankRow, rank_rows
from doctor.triage.tui.widgets.palette import CULPRIT, ODD, state_style
from doctor.trust.safe_text import safe_text

COLUMNS = (
    ("rank", "rank"),
    ("host", "host"),
    ("pid", "pid"),
    ("state", "state"),
    ("fr", "FR enq/done"),
    ("gpu", "GPU"),
    ("top", "top frame"),
)


def _cells(row: RankRow) -> tuple[Text, ...]:
    mark = CULPRIT if row.culprit else ODD if row.odd else ""
    return (
        Text(f"{'▶' if row.culprit else ' '}{row.rank}", style=mark, justify="right"),
        safe_text(row.host),
        Text(row.pid, justify="right"),
        safe_text(row.state, style=state_style(row.state)),
        Text(row.fr_position, justify="right"),
        Text(row.gpu, justify="right"),
        safe_text(row.top_frame, style=mark),
    )


class RankTable(DataTable[Text]):
    """Every rank of the job; culprits in red, ranks with an odd stack in yellow.

    Rows are updated in place while the set of ranks stays the same, so the
    cursor and the scroll position survive a refresh.
    """

    class Selected(Message):
        """The person moved the cursor to another rank."""

        def __init__(self, rank: int) -> None:
            super().__init__()
            self.rank = rank

    snapshot: reactive[TriageSnapshot | None] = reactive(None)
    selected_rank: reactive[int | None] = reactive(None)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.rows_shown: list[RankRow] = []

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def watch_snapshot(self, snapshot: TriageSnapshot | None) -> None:
        if snapshot is None:
            return
        rows = rank_rows(snapshot)
        before = {row.rank: row for row in self.rows_shown}
        same_ranks = [r.rank for r in rows] == [r.rank for r in self.rows_shown]
        self.rows_shown = rows
        if same_ranks:
            self._update_changed(row for row in rows if row != before[row.rank])
            return
        with self.prevent(DataTable.RowHighlighted):
            self.clear()
            for row in rows:
                self.add_row(*_cells(row), key=str(row.rank))
            self._move_to(self.selected_rank)

    def _update_changed(self, rows: Iterable[RankRow]) -> None:
        """Rewrite only the rows that changed, and re-measure a column once, only if it grew:
        measuring a column per cell would make a refresh of 1000 ranks quadratic."""
        grown: dict[str, tuple[str, Text]] = {}
        for row in rows:
            for (column, _), cell in zip(COLUMNS, _cells(row), strict=True):
                self.update_cell(str(row.rank), column, cell)
                if cell.cell_len > self.columns[ColumnKey(column)].content_width:
                    grown[column] = (str(row.rank), cell)
        for column, (row_key, cell) in grown.items():
            self.update_cell(row_key, column, cell, update_width=True)

    def watch_selected_rank(self, rank: int | None) -> None:
        with self.prevent(DataTable.RowHighlighted):
            self._move_to(rank)

    def _move_to(self, rank: int | None) -> None:
        index = next((i for i, r in enumerate(self.rows_shown) if r.rank == rank), None)
        if index is not None and index != self.cursor_row:
            self.move_cursor(row=index)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.Selected(int(event.row_key.value)))
