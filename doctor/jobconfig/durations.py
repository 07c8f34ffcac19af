"""Durations as people write them in a config file or a flag: ``"90s"``, ``"10m"``, ``"1h30m"``.

Its own module, below the config file and the ``[watch]`` settings that both read durations,
so that neither imports the other for it.
"""

from __future__ import annotations

import math
import re

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)", re.ASCII)
_NUMBER = re.compile(r"\d+(?:\.\d+)?", re.ASCII)
MAX_DURATION_TEXT = 64
"""The longest duration spelling read (``"1h30m15s"`` is 8 characters): a bound, so a
hostile 128 KB value costs nothing to refuse."""
MAX_DURATION = 366 * 86400.0
"""The longest duration accepted (a year): longer is a typo, and overflows timedelta
arithmetic further down."""


def parse_duration(value: object) -> float:
    """Seconds from ``"90s"``, ``"10m"``, ``"1h30m"``, ``"500ms"`` or a plain number;
    finite, not negative and at most ``MAX_DURATION``."""
    if isinstance(value, bool):
        raise ValueError("a duration, not a boolean")
    if isinstance(value, int | float):
        seconds = float(value) if not isinstance(value, int) or value < 1 << 64 else math.inf
    elif isinstance(value, str):
        seconds = _parse_text(value)
    else:
        raise ValueError(f'a duration such as "90s" or "10m", not {type(value).__name__}')
    if math.isnan(seconds):
        raise ValueError("a duration, not nan")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    if seconds > MAX_DURATION:
        raise ValueError(f"a duration of at most {format_duration(MAX_DURATION)}")
    return seconds


def _parse_text(value: str) -> float:
    text = value.strip().lower()
    if len(text) > MAX_DURATION_TEXT:
        raise ValueError(f"a duration is at most {MAX_DURATION_TEXT} characters")
    if _NUMBER.fullmatch(text):
        return float(text)
    parts = _DURATION_PART.findall(text)
    if not parts or _DURATION_PART.sub("", text).strip():
        raise ValueError(f'{value!r} is not a duration such as "90s", "10m" or "2h"')
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def format_duration(seconds: float) -> str:
    """The shortest exact spelling, so the timeout chain reads like the config."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
