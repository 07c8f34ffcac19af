"""``recover``: ask every rank's wrapper for a graceful in-process restart through its store.

The ranks publish their store address and iteration in the job registry; a
fault record with cause ``recover`` in the current iteration wakes every
rank's monitor thread exactly like a real fault. The answer is the restart
event, which the new rank 0 writes once every rank has re-entered.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from doctor.errors import NoSuchJobError
from doctor.registry import read_states
from doctor.restart.store import RestartStore


class RecoverTimeout(Exception):
    """The restart was requested but not every rank re-entered in time."""


def job_store(directory: Path, job: str) -> tuple[RestartStore, int]:
    """A client of the job's restart store (from the newest published state) and the job's
    current iteration; raises NoSuchJobError when no wrapped rank runs or the store is gone."""
    import torch.distributed as dist

    states = [s for s in read_states(directory).values() if s.get("phase") != "exiting"]
    if not states:
        raise NoSuchJobError(f"no wrapped rank of job {job!r} is running (nothing in {directory})")
    newest = max(states, key=lambda s: s.get("updated_at", 0))
    host, port = newest["store"].rsplit(":", 1)
    iteration = max(int(s["iteration"]) for s in states)
    try:
        base = dist.TCPStore(
            host, int(port), None, False, timedelta(seconds=10), wait_for_workers=False
        )
    except Exception as exc:  # DistNetworkError and friends: the store is gone
        raise NoSuchJobError(f"job {job!r}: its store {newest['store']} does not answer") from exc
    return RestartStore(base, newest["store_prefix"], int(newest["initial_world_size"])), iteration


def await_restart(store: RestartStore, job: str, iteration: int, timeout: float) -> dict[str, Any]:
    """The restart event of the iteration after ``iteration``, once every rank re-entered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = store.get_json("event", iteration + 1)
        if event is not None:
            return event  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise RecoverTimeout(
        f"job {job!r}: restart requested in iteration {iteration}, but not "
        f"every rank re-entered within {timeout:g}s"
    )


def request_restart(directory: Path, job: str, reason: str, timeout: float) -> dict[str, Any]:
    """Request the restart and wait for its event; raises NoSuchJobError or RecoverTimeout."""
    store, iteration = job_store(directory, job)
    store.record_fault(
        iteration,
        {
            "cause": "recover",
            "rank": None,
            "time": time.time(),
            "exception": None,
            "reason": reason,
        },
    )
    return await_restart(store, job, iteration, timeout)
