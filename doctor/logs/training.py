"""What the training script says of its own progress: its progress bars and its straggler
detector's reports.

A tqdm bar (``75% 24/32 [01:09<00:22, 2.83s/it]``) counts work the process that draws it
finished. Read against the watchdog: a bar that counts on after a rank timed out was drawn
by a process still at work in its own code (an evaluation, a save), not waiting in the
collective. Only that advance is kept, once per bar, so a log of a million bar updates
costs nothing.

FlagScale's straggler detector prints ``=== Straggler Report at Step N ===`` from rank 0
every few steps, then ``No stragglers detected.`` or ``Detected stragglers: [3, 5]``: it
timed every rank's sections at that step, so the first says the ranks train in step and
the second names the ranks slower than its threshold.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.lines import Line

_BAR = re.compile(r"(\d{1,18})/(\d{1,18}) \[(?:\d{1,9}:)?\d{1,2}:\d{2}<")
"""tqdm's ``n/total [elapsed<remaining`` (the rest of the bar is the user's to change)."""
_NO_STRAGGLERS = re.compile(r"No stragglers detected")
_STRAGGLERS = re.compile(r"Detected [Ss]tragglers: ?\[([\d, ]{1,4000})")
"""No closing bracket needed: a line cut at its bound still names ranks."""
MAX_STRAGGLERS = 256
"""Ranks one report may name: a report naming more says the job is slow, not who is."""


def events(line: Line) -> list[LogEvent]:
    """A straggler detector's conclusion, where the line is one."""
    text = line.text
    if _NO_STRAGGLERS.search(text):
        return [line.event(kinds.PROGRESS, rank=None)]
    if m := _STRAGGLERS.search(text):
        numbers = m.group(1).replace(",", " ").split()
        ranks = sorted({int(r) for r in numbers if len(r) <= 6})  # a longer number is no rank
        return [line.event(kinds.STRAGGLER, rank=r) for r in ranks[:MAX_STRAGGLERS]]
    return []


class BarWatch:
    """The progress bars of one text, read against its watchdog timeouts."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        """A bar's total -> the count it showed last before the first timeout."""
        self._timed_out = False
        self._told: set[int] = set()

    def feed(self, line: Line, found: list[LogEvent]) -> list[LogEvent]:
        """``found``: what the other parsers read from the same line (a bar and a watchdog
        message often share one, the bar's carriage return having no newline)."""
        out: list[LogEvent] = []
        for m in _BAR.finditer(line.text):
            count, total = int(m.group(1)), int(m.group(2))
            before = self._counts.get(total)
            if not self._timed_out:
                self._counts[total] = count
            elif before is not None and count > before and total not in self._told:
                self._told.add(total)
                out.append(
                    line.event(
                        kinds.WORKING,
                        seq=count,
                        completed=before,
                        text=f"a progress bar went on from {before}/{total} to {count}/{total} "
                        "after the watchdog timeout",
                    )
                )
        self._timed_out |= any(e.kind == kinds.WATCHDOG_TIMEOUT for e in found)
        return out
