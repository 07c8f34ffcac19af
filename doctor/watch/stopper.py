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
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from doctor.trust.safeio import UnsafePath, read_text

POLL = 0.2
STOP_FILE = "stop.json"


def stop_path(directory: Path) -> Path:
    """Where the watcher writes its stop order (``doctor.watch.actions``)."""
    return directory / "watch" / STOP_FILE


@dataclass(frozen=True)
class StopOrder:
    exit_code: int
    line: str


def stop_order(directory: Path, since: float) -> StopOrder | None:
    """The watcher's stop order of this run of the job (written after ``since``), if any."""
    try:
        order = json.loads(read_text(stop_path(directory), 64 * 1024))
    except (OSError, ValueError, UnsafePath):
        return None
    if not isinstance(order, dict):
        return None
    when, code = order.get("time"), order.get("exit_code")
    if not isinstance(when, int | float) or when < since:
        return None  # a stop of an earlier run of the same job id
    valid = isinstance(code, int) and not isinstance(code, bool) and 0 <= code < 256
    return StopOrder(
        code if valid and isinstance(code, int) else 1, str(order.get("line", ""))[:4096]
    )


class Stopper:
    """Start with ``with Stopper(...):``; ``close()`` stops the thread."""

    def __init__(self, directory: Path, rank: int, grace: float) -> None:
        self.directory = directory
        self.rank = rank
        self.grace = grace
        self.since = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nccl-doctor-stopper", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            order = stop_order(self.directory, self.since)
            if order is None:
                continue
            if self._stop.wait(self.grace):
                return  # the wrapper unwound the rank and launch is exiting by itself
            print(
                f"nccl-doctor launch[{self.rank}]: ended by the watcher's stop "
                f"(exit {order.exit_code})",
                file=sys.stderr,
                flush=True,
            )
            sys.stdout.flush()
            os._exit(order.exit_code)

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
