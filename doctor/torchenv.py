"""How PyTorch reads its own environment variables (booleans and integers).

Preflight's checks and the timeout chain both need to know what a variable
means to PyTorch, so this sits below both (``doctor.checks.values`` adds the
catalogue-driven value checks on top).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TORCH_TRUE = frozenset({"y", "yes", "t", "true", "1"})
TORCH_FALSE = frozenset({"n", "no", "f", "false", "0"})


def torch_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    """What PyTorch reads for a boolean variable; unset or unparsable gives ``default``."""
    value = env.get(name, "").strip().lower()
    return True if value in TORCH_TRUE else False if value in TORCH_FALSE else default


def torch_int(env: Mapping[str, str], name: str) -> int | None:
    """A decimal integer variable as PyTorch reads it; None when unset or not an integer."""
    value = env.get(name, "").strip()
    return int(value) if re.fullmatch(r"[+-]?\d+", value) else None
