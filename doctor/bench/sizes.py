"""Message sizes with nccl-tests' ``-b/-e/-f`` semantics.

``-b`` is the first size, ``-e`` the last, ``-f`` the multiplication factor;
sizes take ``K``/``M``/``G`` suffixes in powers of 1024, as nccl-tests'
``parsesize`` does. The sweep runs ``b, b*f, b*f^2, ...`` while the size is
at most ``e``; each size is rounded down to whole elements, as nccl-tests
does when it computes the element count.
"""

from __future__ import annotations

import re

from doctor.errors import UsageError

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)B?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"64M"`` -> 67108864; a size nccl-tests would accept."""
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"{text!r} is not a size (use a number with an optional K, M or G)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def sweep(begin: int, end: int, factor: int, type_size: int = 4) -> list[int]:
    """The sizes nccl-tests would run for ``-b begin -e end -f factor``."""
    if begin <= 0 or end < begin:
        raise UsageError(f"the sweep needs 0 < begin <= end, got begin={begin} end={end}")
    if factor < 2:
        raise UsageError(f"the step factor must be at least 2, got {factor}")
    sizes: list[int] = []
    size = begin
    while size <= end:
        whole = size // type_size * type_size
        if whole and whole not in sizes:
            sizes.append(whole)
        size *= factor
    if not sizes:
        raise UsageError(f"no size in [{begin}, {end}] holds a whole {type_size}-byte element")
    return sizes


def parse_sweep(spec: str, type_size: int = 4) -> list[int]:
    """``"1K:64M:2"`` (begin:end:factor, like ``-b 1K -e 64M -f 2``) or ``"1M"`` (one size)."""
    parts = spec.split(":")
    if len(parts) == 1:
        return sweep(parse_size(parts[0]), parse_size(parts[0]), 2, type_size)
    if len(parts) == 2:
        return sweep(parse_size(parts[0]), parse_size(parts[1]), 2, type_size)
    if len(parts) == 3 and parts[2].strip().isdigit():
        return sweep(parse_size(parts[0]), parse_size(parts[1]), int(parts[2]), type_size)
    raise UsageError(f"--sizes {spec!r} is not BEGIN:END[:FACTOR], e.g. 1K:64M:2")


def human(nbytes: int) -> str:
    """``67108864`` -> ``"64M"``: the short form used in sentences and plot labels."""
    for unit in ("G", "M", "K"):
        scale = _UNITS[unit]
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)
