"""SVG snapshots of the TUI, wide and narrow (``pytest --snapshot-update`` re-records them)."""

from __future__ import annotations

import pytest
from tui_fakes import FakeProvider, collective_mismatch_snapshot, cpu_stuck_snapshot

from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.app import TriageApp
from doctor.triage.tui.widgets import verdict_panel

pytestmark = pytest.mark.usefixtures("frozen_clock", "pinned_versions", "fixed_playbook")


@pytest.fixture
def fixed_playbook(monkeypatch: pytest.MonkeyPatch) -> None:
    """Playbooks are edited as prose; the screenshots should change only with the TUI."""
    monkeypatch.setattr(
        verdict_panel,
        "playbook_steps",
        lambda playbook: "1. Read the culprit's stack.\n2. Fix that code.",
    )


async def _collected(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def _app(snapshot: TriageSnapshot) -> TriageApp:
    return TriageApp(
        FakeProvider([snapshot]), 3600, "llm-pretrain-0412", on_bundle=lambda s, p: None
    )


def test_wide_terminal_shows_every_pane_side_by_side(snap_compare):
    snapshot = cpu_stuck_snapshot(ranks=8, culprit=3)
    assert snap_compare(_app(snapshot), terminal_size=(160, 48), run_before=_collected)


def test_narrow_terminal_stacks_the_panes(snap_compare):
    snapshot = cpu_stuck_snapshot(ranks=8, culprit=3)
    assert snap_compare(_app(snapshot), terminal_size=(100, 40), run_before=_collected)


def test_thirty_two_ranks_with_the_culprit_scrolled_into_view(snap_compare):
    snapshot = cpu_stuck_snapshot(ranks=32, culprit=29)
    assert snap_compare(_app(snapshot), terminal_size=(160, 48), run_before=_collected)


def test_a_collective_mismatch_breaks_a_column_of_the_grid(snap_compare):
    snapshot = collective_mismatch_snapshot(ranks=4, culprit=2)
    assert snap_compare(_app(snapshot), terminal_size=(160, 40), run_before=_collected)
