"""Fixtures of the TUI tests: fake providers, a frozen clock, and the versions snapshots need."""

from __future__ import annotations

import time
from importlib.metadata import version

import pytest
from tui_fakes import FakeProvider, cpu_stuck_snapshot

SNAPSHOT_VERSIONS = {"textual": "8.2.8", "pytest-textual-snapshot": "1.1.0"}
"""The SVG snapshots were recorded with these; another textual draws other bytes."""


@pytest.fixture
def provider() -> FakeProvider:
    return FakeProvider([cpu_stuck_snapshot()])


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch):
    """Times on screen in UTC, whatever the machine's zone, so screenshots are stable."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def pinned_versions() -> None:
    found = {name: version(name) for name in SNAPSHOT_VERSIONS}
    if found != SNAPSHOT_VERSIONS:
        pytest.skip(f"SVG snapshots were recorded with {SNAPSHOT_VERSIONS}, found {found}")
