"""What a parser of several lines (a traceback, a RAS report, a failure summary) looks like
to the dispatcher in ``doctor.logs.parse``.

A block opens on a line its ``start`` recognises, then sees every following line of the
same stream (the same rank's output) until ``feed`` says the line is not its own. Blocks
emit their events as they read, so a block that never ends costs no memory beyond its
bounded state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from doctor.evidence import LogEvent, ThreadStack
from doctor.logs.lines import Line


@dataclass(frozen=True)
class StackDump:
    """One process's threads from a py-spy dump; its rank is found later (by pid) if the
    text did not say it."""

    rank: int | None
    pid: int | None
    host: str
    threads: tuple[ThreadStack, ...]
    origin: str


Fact = LogEvent | StackDump
"""What parsers produce: events, and the stacks of py-spy dumps."""


class Block(Protocol):
    def feed(self, line: Line) -> bool:
        """Take ``line`` if it belongs to the block (True), else the block is over (False)."""
        ...

    def take(self) -> list[Fact]:
        """The facts read since the last call."""
        ...

    def close(self) -> list[Fact]:
        """The facts the end of the block completes."""
        ...


class Collecting:
    """What most blocks share: the facts they read, handed out by ``take``."""

    def __init__(self) -> None:
        self._out: list[Fact] = []

    def take(self) -> list[Fact]:
        out, self._out = self._out, []
        return out

    def close(self) -> list[Fact]:
        return self.take()
