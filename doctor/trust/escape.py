"""Untrusted text made safe to print: control characters shown, never obeyed.

Strings from dumps (process group names, frame names), file names and values
from another user's environment reach the terminal, a shell snippet or a log
line. Raw, an ``ESC ]52`` sequence writes the reader's clipboard, ``ESC [2J``
clears the screen, a newline forges a line of output and a bidi override makes
text read backwards. ``escape_control`` shows every such character as a
Python-style escape (``\\x1b``, ``\\n``, ``\\u202e``), so what is printed is
what is there. Every renderer of untrusted text calls it.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _show(match: re.Match[str]) -> str:
    char = match.group(0)
    shown = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if shown:
        return shown
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_control(text: str, keep: str = "") -> str:
    """``text`` with C0/C1 controls, DEL, line separators and bidi overrides escaped;
    characters in ``keep`` (e.g. ``"\\n"`` for a multi-line stack) stay as they are."""
    if keep:
        return _CONTROL.sub(lambda m: m.group(0) if m.group(0) in keep else _show(m), text)
    return _CONTROL.sub(_show, text)


def has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None
