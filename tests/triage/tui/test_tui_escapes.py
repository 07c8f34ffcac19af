"""Item 7 of issue 14 for the TUI: hostile text in a snapshot is drawn as escapes.

textual, like rich, passes ``ESC`` through: a frame name with an OSC 52 sequence
in a cell reaches the terminal inside textual's own update. What textual writes
is the compositor's update rendered to segments (``App._display``); the test reads
exactly that, and the SVG screenshot, for every pane, the status line and the
notifications.
"""

from __future__ import annotations

import re
from pathlib import Path

from hostile_text import HOSTILE, assert_inert, hostile_evidence
from rich.console import Console
from tui_fakes import TAKEN_AT, FakeProvider

from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.app import TriageApp
from doctor.triage.tui.messages import ActionFailed, CollectionFailed
from doctor.triage.tui.widgets.flight_grid import FlightGrid
from doctor.triage.tui.widgets.rank_table import RankTable
from doctor.triage.tui.widgets.stack_groups import StackGroups
from doctor.triage.tui.widgets.stack_view import StackView
from doctor.triage.tui.widgets.status_line import StatusLine

WIDE = (4000, 80)
"""Wide enough that no hostile string wraps: a line starting ``FORGED`` is a raw newline."""


_CURSOR = re.compile(r"\x1b\[\d+;\d+H")
"""textual's own cursor moves, one per line of a repaint (HOSTILE holds none)."""


def terminal_bytes(app: TriageApp) -> str:
    """What textual would write to the terminal for a full repaint of the screen, less its
    cursor moves (``assert_inert`` allows rich's colour codes, nothing else)."""
    update = app.screen._compositor.render_update(full=True)  # noqa: SLF001 - what _display writes
    console = Console(force_terminal=True, color_system="truecolor")
    return _CURSOR.sub("", update.render_segments(console))


async def test_hostile_snapshot_is_drawn_inert(tmp_path: Path) -> None:
    # GIVEN a snapshot whose dumps, stacks, hosts, processes, skips and verdict all carry
    # OSC 52, a clear-screen, a CR, a newline forging a verdict line, markup and bidi
    evidence, analysis = hostile_evidence(tmp_path)
    snapshot = TriageSnapshot(evidence, analysis, TAKEN_AT)
    app = TriageApp(FakeProvider([snapshot]), 3600.0, HOSTILE)
    async with app.run_test(size=WIDE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        app.query_one(StackView).rank = 2
        # WHEN collection fails and an action fails with hostile text, as notifications
        app.post_message(CollectionFailed(HOSTILE))
        app.post_message(ActionFailed(HOSTILE, HOSTILE))
        await pilot.pause()
        await pilot.pause()
        # THEN nothing hostile reaches the terminal raw, in the bytes textual writes and in
        # the screenshot; each pane showed it (status, table, grid, groups, stack, verdict)
        assert_inert(terminal_bytes(app), shown_at_least=10)
        assert_inert(app.export_screenshot(), shown_at_least=10)
        for pane in (StatusLine, FlightGrid, StackGroups, StackView):
            assert_inert(app.query_one(pane).render().plain)  # type: ignore[union-attr]
        assert_inert(" ".join(cell.plain for cell in app.query_one(RankTable).get_row_at(0)))
