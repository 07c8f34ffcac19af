"""The in-rank half of a stop: a thread that ends the rank when the watcher stopped the job.

Inside the wrapper a stop arrives through the store and unwinds the function
(``StoppedByDoctor``); this thread is the fallback for a rank the wrapper could not
unwind within ``grace`` and the only path for a rank running without the wrapper. It
polls ``<jobdir>/watch/stop.json`` (a stat every ``POLL`` seconds) and exits the
process with the stop's code. It runs whenever the main thread leaves the GIL free,
so a rank blocked in a collective ends too; one spinning in C with the GIL held does
not, and the watcher signals it after its grace time.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

from doctor.safeio import UnsafePath, read_text
from doctor.watch.actions import stop_path

POLL = 0.2


class Stopper:
    """Start with ``with Stopper(...):``; ``close()`` stops the thread."""

    def __init__(self, directory: Path, rank: int, grace: float) -> None:
        self.path = stop_path(directory)
        self.rank = rank
        self.grace = grace
        self.since = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nccl-doctor-stopper", daemon=True)

    def _order(self) -> dict[str, object] | None:
        try:
            order = json.loads(read_text(self.path, 64 * 1024))
        except (OSError, ValueError, UnsafePath):
            return None
        if not isinstance(order, dict) or float(order.get("time") or 0) < self.since:
            return None  # a stop of an earlier run of the same job id
        return order

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            order = self._order()
            if order is None:
                continue
            if self._stop.wait(self.grace):
                return  # the wrapper unwound the rank and launch is exiting by itself
            code = order.get("exit_code")
            print(
                f"nccl-doctor launch[{self.rank}]: ended by the watcher's stop (exit {code})",
                file=sys.stderr,
                flush=True,
            )
            sys.stdout.flush()
            os._exit(int(code) if isinstance(code, int) else 1)

    def __enter__(self) -> Stopper:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=POLL + 1)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
