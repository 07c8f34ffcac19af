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


def loads(data: bytes | bytearray) -> Any:
    """``pickle.loads`` restricted to plain containers; raises ``UnsafePickleError``.

    Read through a buffered reader: torch writes protocol 2, which has no frames, and from a
    bare ``BytesIO`` the unpickler calls ``read`` once per opcode (2.4x slower; with
    ``peek`` it takes the bytes in large blocks)."""
    return loads_with_memo(data, None)[0]


class MissingMemo(pickle.UnpicklingError):
    """A memo reference to an object pickled in bytes that were not decoded."""


def loads_with_memo(data: bytes | bytearray, memo: Any) -> tuple[Any, Any]:
    """``loads`` of a piece of a pickle, starting from the memo the piece before it left
    (None for the first); returns the object and the memo it leaves, for the next piece.

    The memo passes as the unpickler's own proxy: assigned a plain dict, the C unpickler
    of Python 3.11 drops every index past the dict's length."""
    unpickler = _NoGlobals(io.BufferedReader(io.BytesIO(data), _BLOCK))
    if memo is not None:
        unpickler.memo = memo
    try:
        got = unpickler.load()
    except pickle.UnpicklingError as exc:
        if str(exc).startswith("Memo value not found"):
            raise MissingMemo(str(exc)) from None
        raise
    return got, unpickler.memo
