"""Python's cyclic garbage collector paused for a pure pass that builds many objects.

The collector runs every few hundred allocations and, every so often, walks every
object alive: merging and judging 131,072 ranks builds millions of records (all
acyclic: frozen dataclasses, tuples, dicts of them), and the walks over the ones
already built were 2.4 of its 10.7 s of CPU. Reference counting still frees them;
a cycle made meanwhile is collected when the collector runs again after the pass.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off inside (as it was after); nested passes leave it to the outer."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
