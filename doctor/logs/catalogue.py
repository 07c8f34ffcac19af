"""Messages NCCL and torchelastic print, known from their sources (``data/messages.json``).

The specific parsers know a few dozen messages well; the sources print hundreds more.
``tools/gen_message_catalogue.py`` reads every failure message's format string from NCCL's
and torchelastic's sources and records the hang class of the place that raises it (a
transport file: ``network``; communicator set-up: ``bootstrap``; the elastic agent:
``rank_loss``). This module recognises those messages in a line, tolerant of what a paste
does to it (runs of spaces, a line cut where a terminal wrapped it), and is asked only about
lines no specific parser read.

Cost: a line's words are looked up in an index of each message's rarest word, and only the
few messages found are checked, each by ordered ``str.find`` of its literal fragments, so
the work is linear in the line and independent of the catalogue's size.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib import resources

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.lines import Line

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
WRAPPED_MIN = 20
"""A line cut inside a message still matches when this many literal characters matched."""
_CUT_MIN = 4
"""...and the line ends with at least this much of the missing fragment,"""
_CUT_REST = 24
"""...or at most this much text (a value cut short) follows the last fragment found."""


@dataclass(frozen=True, slots=True)
class Message:
    """One catalogued message: its literal fragments in order, class and place in source."""

    fragments: tuple[str, ...]
    hang_class: str
    at: str
    """``nccl src/transport/net_ib/connect.cc:818`` or ``torch torch/distributed/...py:N``."""


@dataclass(frozen=True)
class Catalogue:
    messages: tuple[Message, ...]
    index: dict[str, tuple[int, ...]]
    """A word -> the messages whose rarest word it is."""
    versions: str

    def match(self, text: str) -> Message | None:
        """The catalogued message ``text`` holds (the longest where several do), else None."""
        found = {i for word in _WORD.findall(text) for i in self.index.get(word, ())}
        if not found:
            return None
        flat = " ".join(text.split())
        best: tuple[int, Message] | None = None
        for i in found:
            message = self.messages[i]
            size = _matched(message.fragments, flat)
            if size and (best is None or size > best[0]):
                best = (size, message)
        return best[1] if best else None


def _matched(fragments: tuple[str, ...], text: str) -> int:
    """Literal characters of ``fragments`` found in order in ``text``; 0 if they are not."""
    pos = size = 0
    for fragment in fragments:
        at = text.find(fragment, pos)
        if at < 0:
            cut = len(text) - pos <= _CUT_REST or _cut_inside(fragment, text)
            return size if size >= WRAPPED_MIN and cut else 0
        pos, size = at + len(fragment), size + len(fragment)
    return size


def _cut_inside(fragment: str, text: str) -> bool:
    """Whether ``text`` ends partway through ``fragment`` (the rest went to the next line):
    with at least ``_CUT_MIN`` of its characters and not all of them. Only the places in the
    text's last ``len(fragment)`` characters where the fragment's first characters occur are
    tried, so a line costs what its tail costs, not its length times the fragment's."""
    if len(fragment) <= _CUT_MIN:
        return False
    tail = text.rstrip()
    head = fragment[:_CUT_MIN]
    at = tail.find(head, max(0, len(tail) - len(fragment) + 1))
    while at >= 0:
        if fragment.startswith(tail[at:]):
            return True
        at = tail.find(head, at + 1)
    return False


def build(doc: dict[str, object]) -> Catalogue:
    """The catalogue of a ``messages.json`` document, with its word index."""
    raw = doc["messages"]
    assert isinstance(raw, list)
    messages = tuple(
        Message(
            tuple(" ".join(f.split()) for f in m["fragments"]),  # as a line is matched
            m["class"],
            f"{m['source']} {m['at']}",
        )
        for m in raw
    )
    words = [set(_WORD.findall(" ".join(m.fragments))) for m in messages]
    counts = Counter(w for ws in words for w in ws)
    index: dict[str, list[int]] = {}
    for i, ws in enumerate(words):
        if ws:  # the rarest word narrows the candidates most (ties: the longest)
            key = min(ws, key=lambda w: (counts[w], -len(w), w))
            index.setdefault(key, []).append(i)
    nccl, torch = doc.get("nccl", {}), doc.get("torch", {})
    assert isinstance(nccl, dict) and isinstance(torch, dict)
    versions = f"NCCL {nccl.get('version', '?')}, PyTorch {torch.get('version', '?')}"
    return Catalogue(messages, {w: tuple(v) for w, v in index.items()}, versions)


@cache
def catalogue() -> Catalogue:
    """The catalogue shipped in the package (read once)."""
    text = resources.files("doctor").joinpath("data").joinpath("messages.json").read_text()
    return build(json.loads(text))


def events(line: Line) -> list[LogEvent]:
    """A catalogued message in ``line``, as evidence of the class its source place gives."""
    if line.nccl == "INFO":  # a catalogued message is a WARN; NCCL prints some of its
        return []  # words at INFO where it copes (``[Service thread] Accept failed`` is both)
    message = catalogue().match(line.text)
    if message is None:
        return []
    return [line.event(kinds.CATALOGUED, hint_class=message.hang_class, hint_at=message.at)]
