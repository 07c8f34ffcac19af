"""How PyTorch reads its own environment variables (booleans and integers).

Preflight's checks, the timeout chain and the lane all need to know what a
variable means to PyTorch, so this sits below them (``doctor.checks.values`` adds the
catalogue-driven value checks on top).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TORCH_TRUE = frozenset({"y", "yes", "t", "true", "1"})
TORCH_FALSE = frozenset({"n", "no", "f", "false", "0"})
MAX_DIGITS = 40
"""Digits past which an integer is judged without being converted: any value this long is
outside int64, and Python refuses to convert more than 4,300 decimal digits."""
_DECIMAL = re.compile(rf"\s*([+-]?)0*([0-9]{{1,{MAX_DIGITS}}})\s*", re.ASCII)


def decimal(text: str) -> int | None:
    """A plain ASCII decimal integer (surrounding blanks allowed), or None, in linear time
    and bounded: too many digits is None, never a ValueError."""
    match = _DECIMAL.fullmatch(text)
    return int(match.group(1) + match.group(2)) if match else None


def torch_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    """What PyTorch reads for a boolean variable; unset or unparsable gives ``default``."""
    value = env.get(name, "").strip().lower()
    return True if value in TORCH_TRUE else False if value in TORCH_FALSE else default


def torch_int(env: Mapping[str, str], name: str) -> int | None:
    """A decimal integer variable as PyTorch reads it; None when unset or not an integer."""
    return decimal(env.get(name, ""))
