"""Messages the app's worker threads post back to the UI thread."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from doctor.triage.snapshot import TriageSnapshot


@dataclass
class SnapshotReady(Message):
    """A collection finished; only the newest waiting one matters."""

    snapshot: TriageSnapshot

    def can_replace(self, message: Message) -> bool:
        """A newer snapshot replaces one still waiting: only the newest is drawn."""
        return isinstance(message, SnapshotReady)


@dataclass
class CollectionFailed(Message):
    """The provider raised; the display keeps the last snapshot and the next poll retries."""

    error: str


@dataclass
class BundleWritten(Message):
    """The bundle of the snapshot on screen was written to ``path``."""

    path: Path


@dataclass
class RecoveryRequested(Message):
    """The recover action came back; its answer is shown to the person."""

    answer: str
    """What the recover callback said, shown to the person as is."""


@dataclass
class ActionFailed(Message):
    """A key's action failed; the message names it and why."""

    action: str
    error: str
