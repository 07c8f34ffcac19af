"""Unpickle Flight Recorder dumps without ever running code from them.

An FR pickle holds only dicts, lists, tuples, strings, numbers, booleans and
None, none of which needs a global. A pickle that asks for any global (the only
way a pickle runs code: ``os.system``, ``builtins.eval``, a class's
``__reduce__``) is refused before the global is even looked up, so a dump
copied from a shared filesystem cannot run anything here.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

_BLOCK = 1 << 20


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asked for a global: it is not a Flight Recorder dump."""


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(f"it asks for the global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("it uses persistent ids")


def loads(data: bytes) -> Any:
    """``pickle.loads`` restricted to plain containers; raises ``UnsafePickleError``.

    Read through a buffered reader: torch writes protocol 2, which has no frames, and from a
    bare ``BytesIO`` the unpickler calls ``read`` once per opcode (2.4x slower; with
    ``peek`` it takes the bytes in large blocks)."""
    return _NoGlobals(io.BufferedReader(io.BytesIO(data), _BLOCK)).load()
