"""The contract every evidence source keeps.

A source turns a ``Target`` into plain evidence before a deadline and never
raises for a rank it cannot read: that rank becomes a ``Skipped`` value,
which is evidence too (a py-spy timeout on rank 3 says something). Only a
source that cannot run at all (no py-spy binary) raises ``SourceError``,
which the collector records as one ``Skipped`` for the whole source.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from doctor.evidence import GpuSample, LogEvent, ProgressSample, RankProcess, RankStack
from doctor.flight.dump import RankDump
from doctor.model import Skipped
from doctor.triage.target import Target


class SourceError(Exception):
    """The source cannot run here at all (a missing tool, no permission anywhere)."""


@dataclass(frozen=True)
class Collected:
    """What one source found; the collector merges these into one ``Evidence``."""

    stacks: tuple[RankStack, ...] = ()
    processes: tuple[RankProcess, ...] = ()
    gpus: tuple[GpuSample, ...] = ()
    logs: tuple[LogEvent, ...] = ()
    progress: tuple[ProgressSample, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    fr_files: tuple[Path, ...] = ()
    """Flight Recorder dumps read (a bundle keeps them)."""
    log_files: tuple[Path, ...] = ()
    """Logs read (a bundle keeps their tails)."""
    dumps: tuple[RankDump, ...] = ()
    """Flight Recorder dumps, reduced (``Evidence.dumps``)."""
    unreadable_dumps: tuple[Skipped, ...] = ()


class Source(ABC):
    """One kind of evidence. ``name`` is the ``probe`` of its ``Skipped`` values."""

    name: str

    @abstractmethod
    def collect(self, target: Target, deadline: float) -> Collected:
        """Evidence about ``target``, returned before ``deadline`` (``time.monotonic()``)."""
