"""Decode the newest entries of a pickled Flight Recorder dump before, and often instead
of, the older ones.

Alignment needs a few dozen of a dump's newest entries; the C unpickler builds all of
them (2,000 entries, about 120,000 objects, 12 ms of a 32,768-rank job's 770 kB dump)
before the reducer looks at any. Torch's pickler (and Python's) writes the dump's dict
with ``entries`` last, each entry a dict opening with the same key, so the newest
entries are the end of the bytes and their starts can be found by that key's memo
reference. A pickle has no index, though: a memo reference in the newest entries may
point at any string (or, from Python's pickler, any container) pickled before it. So
the pieces are decoded in the order the references need:

1. the head, up to the end of the first ``HEAD`` entries, closed as a dict: every
   top-level value and, in the memo, the strings those entries defined (the keys of
   every entry, the names a training loop repeats);
2. the newest entries, from an entry start near the end, with that memo;
3. only when asked (the reducer needs older entries, or a reference in the newest
   entries points into the middle), the entries in between, with the same memo.

Nothing here is trusted: every piece goes through ``safe_pickle``'s unpickler (no
globals), and any layout that is not the expected one raises ``Unexpected``; the caller
then decodes the whole dump as before. Pure; the bytes are the caller's. A caller may hand
over a buffer of the file's size with only what ``load`` reads in it: each range is asked
for before it is read (the head, the newest entries, the middle if needed), so a dump
whose newest entries are enough is read in a third of its bytes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any

from doctor.flight import safe_pickle

_ENTRIES_KEY = b"X\x07\x00\x00\x00entries"
_KEY_LENGTH = _ENTRIES_KEY[1:2]
_PROTO = b"\x80\x02"
_OPEN_PIECE = _PROTO + b"}(" + _ENTRIES_KEY + b"]("
"""A dict, its ``entries`` key, a list and its mark: entries decoded as a piece follow."""
_TAIL_CLOSE = b"eu."
"""APPENDS, SETITEMS, STOP: close the entries list, then the dump's dict."""
MAX_BYTES = 64 << 20
"""Each piece is a copy of its bytes: past this size (a 2,000-entry dump is about 1 MB) the
dump is decoded whole, as before, without copies."""
HEAD = 16
"""Entries decoded with the head: the strings (and, from Python's pickler, the frames) a
training loop's call sites repeat are pickled at their first use, so the newest entries
point at them. Sixteen is enough for torch's gloo dumps, NVRx's NCCL dumps and the
benchmark's (eight is for each of them); a dump whose newest entries point further in has
its middle decoded, as before. Each entry more costs 6 us of a dump's 3 ms."""


_STEP = 64 << 10
"""Bytes read at a time while looking for the entries from the start of a dump read in
pieces: the head of a 32,768-rank dump is 265 kB of its 770 kB."""
Bytes = bytes | bytearray
"""A dump's bytes: a buffer read in pieces is a ``bytearray``."""
Load = Callable[[int, int], None]
"""Reads bytes ``lo:hi`` of a dump into the buffer its decoder was given."""


class Unexpected(ValueError):
    """The bytes are not laid out as a torch dump; decode them whole instead."""


def _put(data: Bytes, i: int) -> int:
    """Skip a memo put at ``i``, if there is one."""
    op = data[i : i + 1]
    return i + 2 if op == b"q" else i + 5 if op == b"r" else i


def _put_index(data: Bytes, i: int) -> int:
    op = data[i : i + 1]
    if op == b"q":
        return data[i + 1]
    if op == b"r":
        return _u32(data, i + 1)
    raise Unexpected("a key without a memo put")


def _u32(data: Bytes, at: int) -> int:
    if at + 4 > len(data):
        raise Unexpected("cut short")
    return int.from_bytes(data[at : at + 4], "little")


def _get(index: int) -> bytes:
    return b"h" + bytes([index]) if index < 256 else b"j" + index.to_bytes(4, "little")


class RecentEntries:
    """One dump's pieces: ``doc`` holds every top-level value, its ``entries`` the newest
    ``keep`` or more; ``older()`` gives all entries when those are not enough."""

    def __init__(self, data: Bytes, keep: int, load: Load | None = None) -> None:
        self._data = data
        self._load = load
        self._have = 0
        """Bytes at the start known to be read (all of them without ``load``)."""
        self._prefix(len(_PROTO))
        if data[:2] != _PROTO:
            raise Unexpected("not a protocol 2 pickle")
        if len(data) > MAX_BYTES:
            raise Unexpected("larger than a dump of torch's ring buffer")
        at = self._find_entries()
        self._prefix(at + 64)  # the key, the list and the first entry's first key
        i = _put(data, at + len(_ENTRIES_KEY))
        if data[i : i + 1] != b"]":
            raise Unexpected("entries is not a list")
        i = _put(data, i + 1)
        if data[i : i + 2] != b"(}":
            raise Unexpected("entries does not open with a dict")
        key = _put(data, i + 2)
        if data[key : key + 1] != b"(" or data[key + 1 : key + 2] != b"X":
            raise Unexpected("the first entry does not open with a key")
        length = _u32(data, key + 2)
        self._prefix(key + 6 + length + 8)
        first_key = _put_index(data, key + 6 + length)
        self._needle = re.compile(re.escape(b"(" + _get(first_key)))
        early = self._head_starts(key)
        if not early:
            raise Unexpected("one entry or none")
        self._after_head = early[-1]
        self._entry_bytes = (self._after_head - i) // len(early) + 1
        self._start = self._newest(keep)
        self.whole = self._start == self._after_head
        """Whether ``doc`` holds every entry (there is no middle)."""
        self._memo = None
        self._view = memoryview(data)
        self.doc = self._decoded((self._view[: self._after_head], _TAIL_CLOSE), True)
        self._head_entries: list[Any] = self.doc["entries"]
        self._middle: list[Any] | None = None
        try:
            newest = self._newest_piece()
        except safe_pickle.MissingMemo:  # a string first pickled in the middle
            self._middle = self._middle_piece()
            newest = self._newest_piece()
        self.doc.update(newest)
        if self.whole:
            self.doc["entries"] = self._head_entries + newest["entries"]

    def _prefix(self, end: int) -> None:
        """Have the first ``end`` bytes read (the first ``_STEP`` more, to read in steps)."""
        if self._load is None:
            self._have = len(self._data)
        elif end > self._have:
            want = min(len(self._data), max(end, self._have + _STEP))
            self._load(self._have, want)
            self._have = want

    def _find_entries(self) -> int:
        """Where the ``entries`` key is: after every other top-level value (the rank lists
        of ``pg_config``: 190 kB at 32,768 ranks), read a step at a time."""
        data, at = self._data, 0
        while True:
            # by its length byte, found by memchr: the search for the whole key skips a
            # byte at a time through a rank list's digits, 20 times slower
            at = data.find(_KEY_LENGTH, at + 1, self._have)
            if at < 0:
                if self._have == len(data):
                    raise Unexpected("no entries key")
                at = max(0, self._have - len(_ENTRIES_KEY))
                self._prefix(self._have + _STEP)
            elif data[at - 1 : at - 1 + len(_ENTRIES_KEY)] == _ENTRIES_KEY:
                return at - 1

    def _head_starts(self, key: int) -> list[int]:
        """Where the first ``HEAD`` entries start, from the first entry's key on."""
        while True:
            early = list(itertools.islice(self._starts(key, self._have, forward=True), HEAD))
            if len(early) == HEAD or self._have == len(self._data):
                return early
            self._prefix(self._have + _STEP)

    def _starts(self, lo: int, hi: int, forward: bool) -> Iterator[int]:
        """Where entries start between ``lo`` and ``hi`` (oldest or newest first): an empty
        dict (with the memo put of Python's pickler) whose first key is the first entry's."""
        found = (m.start() for m in self._needle.finditer(self._data, lo, hi))
        return filter(None, map(self._opening, found if forward else reversed(list(found))))

    def _opening(self, at: int) -> int:
        """Where the dict opens whose first key is at ``at`` (0: no dict opens there)."""
        data = self._data
        if data[at - 3 : at - 1] == b"}q":
            return at - 3
        if data[at - 6 : at - 4] == b"}r":
            return at - 6
        return at - 1 if data[at - 1 : at] == b"}" else 0

    def _newest(self, keep: int) -> int:
        """Where the newest ``keep`` entries start (the first after the head if there are
        fewer): looked for in about as many bytes as ``keep`` head entries take, then in
        four times more, up to the whole."""
        size = self._entry_bytes * keep
        while True:
            lo = max(self._after_head, len(self._data) - size)
            if self._load is not None:  # and the bytes before it that ``_opening`` reads
                self._load(max(self._have, lo - 8), len(self._data))
            starts = list(itertools.islice(self._starts(lo, len(self._data), False), keep))
            if len(starts) == keep:
                return starts[-1]
            if lo == self._after_head:
                return self._after_head
            size *= 4

    def _decoded(self, stream: tuple[safe_pickle.Buffer, ...], keep_memo: bool) -> dict[str, Any]:
        """``stream``, parts of a dict with an ``entries`` list, decoded in place with the
        memo the pieces before it left (kept for the next piece when ``keep_memo``)."""
        got, memo = safe_pickle.loads_with_memo(stream, self._memo)
        if not isinstance(got, dict) or not isinstance(got.get("entries"), list):
            raise Unexpected("a piece that does not close as the dump's dict")
        if keep_memo:
            self._memo = memo
        return got

    def _piece(self, lo: int, hi: int, close: bytes, keep_memo: bool) -> dict[str, Any]:
        """Entries ``lo:hi`` (and what follows them in the dump's dict, up to ``hi``) as the
        items of an ``entries`` list in a dict."""
        return self._decoded((_OPEN_PIECE, self._view[lo:hi], close), keep_memo)

    def _newest_piece(self) -> dict[str, Any]:
        newest = self._piece(self._start, len(self._data), b"", False)
        ids = [e.get("record_id") if isinstance(e, dict) else None for e in newest["entries"]]
        numbers = [i for i in ids if type(i) is int]
        if len(numbers) < len(ids) or any(b <= a for a, b in itertools.pairwise(numbers)):
            raise Unexpected("the newest entries are not in record order")
        return newest

    def _middle_piece(self) -> list[Any]:
        if self.whole:
            return []
        if self._load is not None:
            self._load(self._after_head, self._start)
        middle: list[Any] = self._piece(self._after_head, self._start, _TAIL_CLOSE, True)["entries"]
        return middle

    def older(self) -> list[Any]:
        """Every entry, oldest first (the middle is decoded on the first call)."""
        newest = self.doc["entries"]
        if self.whole:
            return list(newest)
        if self._middle is None:
            self._middle = self._middle_piece()
        return [*self._head_entries, *self._middle, *newest]
