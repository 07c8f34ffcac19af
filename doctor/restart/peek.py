"""A store read that never blocks, whoever else uses the store.

``Store.get`` waits (up to the store's timeout, 20 s or more) for a key that is not there, so
``check`` then ``get`` blocks when another client deletes the key in between: a rank that
should report the deletion at once sat out the timeout instead. ``compare_set`` with an
expected value no sealed value can equal is one atomic round trip on every c10d store
(TCPStore with either server, FileStore, HashStore, PrefixStore): on a missing key it returns
the expected value and writes nothing, on a present one the value, unchanged.
"""

from __future__ import annotations

from typing import Any

ABSENT = b"\x00nccl-doctor: absent\x00"
"""The expected value of the probe: NUL bytes never occur in a sealed value or a hello."""


def peek(store: Any, key: str) -> bytes | None:
    """The key's value now, or None when it is not there; never waits."""
    value = bytes(store.compare_set(key, ABSENT, ABSENT))
    return None if value == ABSENT else value
