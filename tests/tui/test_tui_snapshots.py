"""SVG snapshots of the TUI, wide and narrow (``pytest --snapshot-update`` re-records them)."""

from __future__ import annotations

import pytest
from tui_fakes import FakeProvider, cpu_stuck_snapshot

from doctor.triage.tui.app import TriageApp

pytestmark = pytest.mark.usefixtures("frozen_clock", "pinned_versions")


async def _collected(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def _app(ranks: int, culprit: int) -> TriageApp:
    provider = FakeProvider([cpu_stuck_snapshot(ranks=ranks, culprit=culprit)])
    return TriageApp(provider, 3600, "llm-pretrain-0412", on_bundle=lambda s, p: None)


def test_wide_terminal_shows_every_pane_side_by_side(snap_compare):
    assert snap_compare(_app(8, 3), terminal_size=(160, 48), run_before=_collected)


def test_narrow_terminal_stacks_the_panes(snap_compare):
    assert snap_compare(_app(8, 3), terminal_size=(100, 40), run_before=_collected)


def test_thirty_two_ranks_with_the_culprit_scrolled_into_view(snap_compare):
    assert snap_compare(_app(32, 29), terminal_size=(160, 48), run_before=_collected)
