"""The triage TUI driven by textual's Pilot, with fake snapshot providers."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

from textual.widgets import HelpPanel
from tui_fakes import (
    TAKEN_AT,
    FakeProvider,
    cpu_stuck_snapshot,
    healthy_snapshot,
    rank_lost_snapshot,
    recorder,
)

from doctor.flight.align import RankOp
from doctor.triage.tui.app import TriageApp
from doctor.triage.tui.confirm import Confirm
from doctor.triage.tui.widgets.flight_grid import FlightGrid
from doctor.triage.tui.widgets.rank_table import RankTable
from doctor.triage.tui.widgets.stack_groups import StackGroups
from doctor.triage.tui.widgets.stack_view import StackView
from doctor.triage.tui.widgets.status_line import StatusLine
from doctor.triage.tui.widgets.verdict_panel import VerdictPanel

WIDE = (160, 48)
NEVER = 3600.0
"""A poll interval no test waits for: collections happen on mount and on F5."""


def _app(provider, interval: float = NEVER, **kwargs) -> TriageApp:
    return TriageApp(provider, interval, "llm-pretrain-0412", **kwargs)


async def _settle(app: TriageApp, pilot) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


async def _until(pilot, condition, timeout: float = 15.0) -> None:
    """Let the app run until ``condition()`` holds; every wait here is bounded."""
    async with asyncio.timeout(timeout):
        while not condition():
            await pilot.pause(0.02)


def _status(app: TriageApp) -> str:
    return app.query_one(StatusLine).render().plain


async def test_first_snapshot_fills_every_pane_and_selects_the_culprit(provider):
    app = _app(provider)
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        table = app.query_one(RankTable)
        # THEN one row per rank, the culprit selected, and every pane shows rank 3's story
        assert table.row_count == 8
        assert app.selected_rank == 3 and table.cursor_row == 3
        assert app.query_one(StackView).detail.rank == 3
        assert app.query_one(VerdictPanel).render().renderables[0].title == "verdict: cpu_stuck"
        groups = app.query_one(StackGroups).groups
        assert [(g.ranks, g.odd) for g in groups] == [((0, 1, 2, 4, 5, 6, 7), False), ((3,), True)]
        status = _status(app)
        assert "8/8 ranks alive" in status and "cpu_stuck rank 3" in status
        assert provider.calls == 1


async def test_thirty_two_ranks_scroll_in_the_table_and_collapse_into_two_groups():
    app = _app(FakeProvider([cpu_stuck_snapshot(ranks=32, culprit=29)]))
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        table = app.query_one(RankTable)
        assert table.row_count == 32
        assert table.virtual_size.height > table.scrollable_content_region.height
        # the culprit, selected by default, is scrolled into view
        assert table.cursor_row == 29
        await _until(pilot, lambda: table.scroll_y > 0)
        assert [len(g.ranks) for g in app.query_one(StackGroups).groups] == [31, 1]


async def test_moving_the_cursor_selects_the_rank_in_every_pane(provider):
    app = _app(provider)
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        await pilot.press("down")
        assert app.selected_rank == 4
        assert app.query_one(StackView).detail.rank == 4
        assert app.query_one(FlightGrid).selected_rank == 4
        assert app.query_one(StackGroups).selected_rank == 4
        # a refresh keeps the person's selection
        await pilot.press("f5")
        await _settle(app, pilot)
        assert provider.calls == 2
        assert (app.selected_rank, app.query_one(RankTable).cursor_row) == (4, 4)


async def test_pause_freezes_the_display_while_collection_goes_on():
    provider = FakeProvider([cpu_stuck_snapshot()])
    app = _app(provider, interval=0.05)
    async with app.run_test(size=WIDE) as pilot:
        await _until(pilot, lambda: app.shown is not None)
        await pilot.press("p")
        frozen = app.shown
        calls = provider.calls
        # WHEN the poll keeps collecting
        await _until(pilot, lambda: provider.calls >= calls + 3 and app.pending)
        # THEN the screen still shows the snapshot it showed when paused, and says so
        assert app.shown is frozen
        assert app.latest is not None and app.latest.taken_at > frozen.taken_at
        assert "PAUSED (newer data waiting)" in _status(app)
        # WHEN resumed, the newest snapshot appears at once
        await pilot.press("p")
        assert app.shown is app.latest and not app.paused
        assert "PAUSED" not in _status(app)


async def test_refresh_never_starts_a_second_collection_while_one_runs():
    gate = threading.Event()
    provider = FakeProvider([cpu_stuck_snapshot()], gate=gate)
    app = _app(provider, interval=0.02)
    async with app.run_test(size=WIDE) as pilot:
        # WHEN the poll timer fires and the person presses F5 while a collection hangs
        await pilot.pause(0.2)
        assert app.collecting and "collecting…" in _status(app)
        await pilot.press("f5", "f5")
        await pilot.pause(0.1)
        # THEN only the first collection ever started
        assert provider.started == 1
        gate.set()
        await _until(pilot, lambda: app.shown is not None)


async def test_a_failed_collection_is_shown_and_the_next_one_recovers():
    provider = FakeProvider(
        [cpu_stuck_snapshot(), RuntimeError("py-spy not found"), healthy_snapshot()]
    )
    app = _app(provider)
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        await pilot.press("f5")
        await _settle(app, pilot)
        # THEN the last good snapshot stays on screen with the error beside it
        assert "collection failed: py-spy not found" in _status(app)
        assert app.shown.verdict.hang_class == "cpu_stuck"
        await pilot.press("f5")
        await _settle(app, pilot)
        assert "failed" not in _status(app)
        assert app.shown.verdict.hang_class == "healthy"


async def test_a_new_set_of_ranks_rebuilds_the_table_and_keeps_the_selection():
    provider = FakeProvider(
        [cpu_stuck_snapshot(ranks=4, culprit=1), cpu_stuck_snapshot(ranks=6, culprit=1)]
    )
    app = _app(provider)
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        await pilot.press("down", "down")
        assert app.selected_rank == 3
        await pilot.press("f5")
        await _settle(app, pilot)
        table = app.query_one(RankTable)
        assert table.row_count == 6
        assert (app.selected_rank, table.cursor_row) == (3, 3)


async def test_a_dead_rank_shows_in_the_table_groups_and_stack_pane():
    app = _app(FakeProvider([rank_lost_snapshot(ranks=4, lost=2)]))
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        assert app.selected_rank == 2
        row = app.query_one(RankTable).rows_shown[2]
        assert (row.state, row.culprit) == ("dead", True)
        assert "no stack for this rank" in app.query_one(StackView).render().plain
        assert "py-spy: process is gone" in app.query_one(StackGroups).render().plain
        assert "rank_loss" in _status(app)


async def test_bundle_writes_the_snapshot_on_screen(tmp_path: Path, provider):
    calls, record = recorder()
    app = _app(provider, on_bundle=record, bundle_dir=tmp_path)
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        await pilot.press("b")
        await _settle(app, pilot)
        ((snapshot, path),) = calls
        assert snapshot is app.shown
        assert path == tmp_path / "nccl-doctor-llm-pretrain-0412-20261118-110640.tar.gz"
        assert any(f"bundle written: {path}" in n.message for n in app._notifications)


async def test_a_failed_bundle_is_reported_and_the_app_keeps_running(provider):
    def broken(snapshot, path):
        raise OSError("No space left on device")

    app = _app(provider, on_bundle=broken)
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        await pilot.press("b")
        await _settle(app, pilot)
        (note,) = [n for n in app._notifications if n.severity == "error"]
        assert (note.title, note.message) == ("bundle failed", "No space left on device")
        assert app.is_running


async def test_recover_asks_first_and_calls_back_only_on_yes(provider):
    calls, record = recorder()
    app = _app(provider, on_recover=record)
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        await pilot.press("r")
        assert isinstance(app.screen, Confirm)
        await pilot.press("n")
        await _settle(app, pilot)
        assert calls == [] and not isinstance(app.screen, Confirm)
        await pilot.press("r", "y")
        await _settle(app, pilot)
        assert calls == [()]
        assert any(n.message == "restart requested for 8 ranks" for n in app._notifications)


async def test_keys_without_a_callback_are_hidden(provider):
    app = _app(provider)
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        shown = {
            b.binding.action for b in app.active_bindings.values() if b.enabled and b.binding.show
        }
        assert {"refresh_now", "pause", "quit", "help"} <= shown
        assert not {"bundle", "recover", "resume"} & shown
        await pilot.press("r", "b")
        assert not isinstance(app.screen, Confirm)


async def test_help_key_toggles_the_key_panel(provider):
    app = _app(provider)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("question_mark")
        assert app.screen.query(HelpPanel)
        await pilot.press("question_mark")
        assert not app.screen.query(HelpPanel)


async def test_narrow_class_follows_the_terminal_width(provider):
    app = _app(provider)
    async with app.run_test(size=(100, 40)) as pilot:
        assert app.has_class("narrow")
        await pilot.resize_terminal(*WIDE)
        await pilot.pause()
        assert not app.has_class("narrow")


async def test_quit_returns_the_exit_code_of_the_verdict_on_screen():
    for snapshot, key, code in (
        (cpu_stuck_snapshot(), "q", 1),
        (healthy_snapshot(), "q", 0),
        (cpu_stuck_snapshot(), "ctrl+c", 1),
    ):
        app = _app(FakeProvider([snapshot]))
        async with app.run_test(size=WIDE) as pilot:
            await _settle(app, pilot)
            assert app.shown.taken_at == TAKEN_AT
            await pilot.press(key)
        assert app.return_value == code


async def test_the_grid_scrolls_to_the_selected_ranks_row():
    # GIVEN 12 process groups of one rank each: more rows than the grid pane has
    snap = cpu_stuck_snapshot(ranks=12, culprit=11)
    ops = tuple(
        RankOp(r, str(r), seq, "all_reduce", "completed", ()) for r in range(12) for seq in (1, 2)
    )
    flight = replace(snap.flight, groups=(), kept_ops=ops)
    app = _app(FakeProvider([replace(snap, analysis=replace(snap.analysis, flight=flight))]))
    async with app.run_test(size=WIDE) as pilot:
        await _settle(app, pilot)
        pane = app.query_one("#grid-pane")
        # THEN the culprit's group, the last one, is scrolled into view
        await _until(pilot, lambda: pane.scroll_y > 0)
        # WHEN the person goes back to rank 0, so does the grid
        await pilot.press(*["up"] * 11)
        await _until(pilot, lambda: pane.scroll_y == 0)
