"""Host documents as short tagged lines, so many hosts can share one stream.

One ``srun`` step runs ``collect`` on every node, and srun writes all their
outputs to one stdout: a long line from one node may be split and interleaved
with another's. So each document travels as lines of at most ``CHUNK``
characters, each tagged with its host and position::

    NCDOC1 <host> <index> <count> <slice of the compact JSON>

``Reassembler`` puts them back together per host, whatever the interleaving,
and ignores any other line (srun's own messages, a rank's stray output).
"""

from __future__ import annotations

from collections.abc import Iterator

TAG = "NCDOC1"
CHUNK = 800
MAX_CHUNKS = 8192
"""Bounds one host's document at ~6.5 MB of frames, whatever a host sends."""


def encode(host: str, text: str) -> Iterator[str]:
    """The lines (without newline) that carry ``text`` from ``host``."""
    host = host.replace(" ", "_") or "?"
    count = max(1, -(-len(text) // CHUNK))
    for i in range(count):
        yield f"{TAG} {host} {i} {count} {text[i * CHUNK : (i + 1) * CHUNK]}"


class Reassembler:
    """Feed lines; complete documents come out per host."""

    def __init__(self) -> None:
        self._parts: dict[str, dict[int, str]] = {}
        self._counts: dict[str, int] = {}
        self.done: dict[str, str] = {}

    def feed_as(self, host: str, line: str) -> str | None:
        """``feed`` with the line filed under ``host``, whatever host it names: the
        transport knows which host sent it (ssh's connection, srun's task label), the
        line is only what that host claims."""
        parts = line.split(" ", 2)
        return self.feed(f"{parts[0]} {host} {parts[2]}") if len(parts) == 3 else None

    def feed(self, line: str) -> str | None:
        """The host whose document this line completed, if any."""
        fields = line.rstrip("\n").split(" ", 4)
        if len(fields) < 4 or fields[0] != TAG:
            return None
        host, index, count = fields[1], fields[2], fields[3]
        if not (index.isdigit() and count.isdigit()) or host in self.done:
            return None
        i, n = int(index), int(count)
        if not 0 <= i < n <= MAX_CHUNKS or self._counts.setdefault(host, n) != n:
            return None
        parts = self._parts.setdefault(host, {})
        parts[i] = fields[4] if len(fields) == 5 else ""
        if len(parts) < n:
            return None
        self.done[host] = "".join(parts[k] for k in range(n))
        del self._parts[host]
        return host
