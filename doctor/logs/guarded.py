"""A costly pattern tried only on text that holds one of its words.

Most lines that pass the reader's gate match none of a parser's patterns, and a pattern of
many alternatives (or a case-blind one) costs microseconds a line even where it fails; an
``in`` test of a few words costs a fraction of that. ``tests/logs/test_logs_guards.py``
generates text from every ``Guarded`` pattern of the parsers and checks that its words let
each match through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Guarded:
    pattern: re.Pattern[str]
    words: tuple[str, ...]
    """One of these is in every text ``pattern`` matches."""
    fold: bool = False
    """Look for the words in the lowercased text (for a case-blind pattern)."""

    def may_match(self, text: str) -> bool:
        if self.fold:
            text = text.lower()
        return any(word in text for word in self.words)

    def search(self, text: str) -> re.Match[str] | None:
        return self.pattern.search(text) if self.may_match(text) else None
