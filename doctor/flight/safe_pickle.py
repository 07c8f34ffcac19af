"""Unpickle Flight Recorder dumps without ever running code from them.

An FR pickle holds only dicts, lists, tuples, strings, numbers, booleans and
None, none of which needs a global. A pickle that asks for any global (the only
way a pickle runs code: ``os.system``, ``builtins.eval``, a class's
``__reduce__``) is refused before the global is even looked up, so a dump
copied from a shared filesystem cannot run anything here.

A pickle needs no global to exhaust memory, though: the C unpickler grows its memo
to twice the largest index a memo put names, and zeroes it, so one altered byte of
a 4-byte index asks for gigabytes. ``memory_cap`` bounds what decoding may take.
"""

from __future__ import annotations

import contextlib
import pickle
import threading
from collections.abc import Iterator, Sequence
from typing import Any

try:
    import resource
except ImportError:  # not a POSIX system: no cap
    resource = None  # type: ignore[assignment]


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asked for a global: it is not a Flight Recorder dump."""


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(f"it asks for the global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("it uses persistent ids")


Buffer = bytes | bytearray | memoryview


def loads(data: Buffer) -> Any:
    """``pickle.loads`` restricted to plain containers; raises ``UnsafePickleError``."""
    return loads_with_memo((data,), None)[0]


class MissingMemo(pickle.UnpicklingError):
    """A memo reference to an object pickled in bytes that were not decoded."""


def loads_with_memo(parts: Sequence[Buffer], memo: Any) -> tuple[Any, Any]:
    """``loads`` of a piece of a pickle laid out in ``parts`` (read in place, end to end),
    starting from the memo the piece before it left (None for the first); returns the
    object and the memo it leaves, for the next piece.

    The memo passes as the unpickler's own proxy: assigned a plain dict, the C unpickler
    of Python 3.11 drops every index past the dict's length."""
    # _Parts reads views, not bytes: the C unpickler takes any buffer
    unpickler = _NoGlobals(_Parts(parts))  # type: ignore[arg-type]
    if memo is not None:
        unpickler.memo = memo
    try:
        got = unpickler.load()
    except pickle.UnpicklingError as exc:
        if str(exc).startswith("Memo value not found"):
            raise MissingMemo(str(exc)) from None
        raise
    return got, unpickler.memo


class _Parts:
    """Buffers read as one file, without copies: the C unpickler decodes from whatever
    buffer ``peek`` or ``read`` returns, so each gives a view of the part it is in. Torch
    writes protocol 2, which has no frames: from a ``BytesIO`` the unpickler would call
    ``read`` once per opcode, and a ``BufferedReader`` over it copies every block twice."""

    def __init__(self, parts: Sequence[Buffer]) -> None:
        self._parts = [memoryview(p).cast("B") for p in parts if len(p)]
        self._part = 0
        self._at = 0

    def _current(self) -> memoryview:
        while self._part < len(self._parts) and self._at == len(self._parts[self._part]):
            self._part, self._at = self._part + 1, 0
        return self._parts[self._part][self._at :] if self._part < len(self._parts) else _EMPTY

    def peek(self, _n: int = 0) -> memoryview:
        return self._current()

    def read(self, n: int) -> Buffer:
        left = self._current()
        if n <= len(left):  # within one part (the unpickler's every read here): a view
            self._at += n
            return left[:n]
        got = bytearray()
        while len(got) < n and len(left):
            take = min(len(left), n - len(got))
            got += left[:take]
            self._at += take
            left = self._current()
        return bytes(got)

    def readinto(self, into: memoryview) -> int:
        """Bytes objects (protocol 3's ``BINBYTES``): copied, as ``read`` copies across parts."""
        got = self.read(len(into))
        into[: len(got)] = got
        return len(got)

    def readline(self) -> bytes:
        """Protocol 0's lines: the unpickler asks only for a line its buffer does not end."""
        line = bytearray()
        while len(left := self._current()):
            window = bytes(left[: max(_LINE, len(line))])  # doubling: linear in the line
            end = window.find(b"\n")
            line += self.read(len(window) if end < 0 else end + 1)
            if end >= 0:
                break
        return bytes(line)


_EMPTY = memoryview(b"")
_LINE = 4096


PER_BYTE = 32
"""Memory decoding may take per byte of pickle: a Flight Recorder dump's objects take
about 10 (7 to 9 for NVRx's 16-rank NCCL dumps)."""
FLOOR = 64 << 20
"""Memory decoding may always take, whatever the pickle's size."""
_CAP = threading.RLock()
Limits = tuple[int, int]
"""A soft and a hard limit, as ``resource.getrlimit`` gives them."""


@contextlib.contextmanager
def memory_cap(pickle_bytes: int) -> Iterator[None]:
    """Let the process's private memory grow by at most ``FLOOR + PER_BYTE * pickle_bytes``
    while decoding: past it an allocation fails, and the unpickler raises ``MemoryError``.

    The limit (``RLIMIT_DATA``, Linux 4.7 or later) is the process's, so caps do not
    overlap: one thread at a time decodes under one, and each restores the limit before
    it. Where there is no ``/proc`` the cap is not set."""
    with _CAP:
        limits = _limits(FLOOR + PER_BYTE * pickle_bytes)
        if limits is None:
            yield
            return
        before, capped = limits
        resource.setrlimit(resource.RLIMIT_DATA, capped)
        try:
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, before)


def _limits(growth: int) -> tuple[Limits, Limits] | None:
    """The data limit now, and one ``growth`` bytes past what the process uses (never
    looser than now)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            used = int(statm.read().split()[5]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    except (OSError, AttributeError, IndexError, ValueError):
        return None
    tighter = [limit for limit in (soft, hard) if limit != resource.RLIM_INFINITY]
    return (soft, hard), (min([used + growth, *tighter]), hard)
