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
        return isinstance(message, SnapshotReady)


@dataclass
class CollectionFailed(Message):
    """The provider raised; the display keeps the last snapshot and the next poll retries."""

    error: str


@dataclass
class BundleWritten(Message):
    path: Path


@dataclass
class RecoveryRequested(Message):
    answer: str
    """What the recover callback said, shown to the person as is."""


@dataclass
class ActionFailed(Message):
    action: str
    error: str
