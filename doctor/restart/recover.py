"""``recover``: ask every rank's wrapper for a graceful in-process restart through its store.

The ranks publish their store address and iteration in the job registry; a
fault record with cause ``recover`` in the current iteration wakes every
rank's monitor thread exactly like a real fault. The answer is the restart
event, which the new rank 0 writes once every rank has re-entered.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from doctor.errors import NoSuchJobError
from doctor.jobdir.registry import read_states
from doctor.ranks import bounded_rank_count
from doctor.restart.auth import Sealer, read_key_file
from doctor.restart.store import RestartStore
from doctor.trust.process_identity import ProcessId, is_alive
from doctor.trust.safeio import UnsafePath


class RecoverTimeout(Exception):
    """The restart was requested but not every rank re-entered in time."""


@dataclass(frozen=True)
class StoreAddress:
    """Where a running wrapper's store is, as its published state says (checked)."""

    host: str
    port: int
    prefix: str
    world_size: int
    iteration: int

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> StoreAddress | None:
        """None for a state that is malformed, or whose process is gone (a stale file)."""
        host, _, port = str(state.get("store", "")).rpartition(":")
        world = bounded_rank_count(state.get("initial_world_size"))
        iteration, prefix = state.get("iteration"), state.get("store_prefix")
        pid, start = state.get("pid"), state.get("pid_start")
        if not (host and port.isdigit() and 0 < int(port) < 65536 and world):
            return None
        if not (isinstance(prefix, str) and len(prefix) <= 256 and isinstance(iteration, int)):
            return None
        if not (isinstance(pid, int) and isinstance(start, int) and 0 <= iteration < 1 << 31):
            return None
        if not is_alive(ProcessId(pid, start)):
            return None
        return cls(host, int(port), prefix, world, iteration)


def job_store(directory: Path, job: str, timeout: float) -> tuple[RestartStore, int]:
    """A client of the job's store (the newest live state's; its key read from the job
    directory) and the job's current iteration; raises NoSuchJobError when no wrapped rank
    runs or the store does not answer within ``timeout``."""
    import torch.distributed as dist

    deadline = time.monotonic() + timeout
    owner = _owner(directory, job)
    states = [s for s in read_states(directory, owner).values() if s.get("phase") != "exiting"]
    live = [a for a in map(StoreAddress.from_state, states) if a is not None]
    if not live:
        raise NoSuchJobError(
            f"no wrapped rank of job {job!r} is running (nothing live in {directory})"
        )
    address = max(live, key=lambda a: a.iteration)
    try:
        sealer = Sealer(read_key_file(directory, owner).encode())
    except (OSError, UnsafePath) as exc:
        raise NoSuchJobError(f"job {job!r}: cannot read its store key: {exc}") from None
    where = f"{address.host}:{address.port}"
    try:  # a plain connect first: TCPStore retries (and logs C++ stacks) for its whole timeout
        socket.create_connection((address.host, address.port), _left(deadline)).close()
        base = dist.TCPStore(
            address.host,
            address.port,
            None,
            False,
            timedelta(seconds=_left(deadline)),
            wait_for_workers=False,
        )
    except Exception:  # OSError, DistNetworkError and friends: the store is gone
        raise NoSuchJobError(f"job {job!r}: its store {where} does not answer") from None
    return RestartStore(base, address.prefix, address.world_size, sealer), address.iteration


def await_restart(store: RestartStore, job: str, iteration: int, timeout: float) -> dict[str, Any]:
    """The restart event of the iteration after ``iteration``, once every rank re-entered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = store.get_json("event", iteration + 1)
        if isinstance(event, dict):
            return event
        time.sleep(0.05)
    raise RecoverTimeout(
        f"job {job!r}: restart requested in iteration {iteration}, but not "
        f"every rank re-entered within {timeout:g}s"
    )


def request_restart(directory: Path, job: str, reason: str, timeout: float) -> dict[str, Any]:
    """Request the restart and wait for its event; raises NoSuchJobError or RecoverTimeout.
    Every wait (connecting included) ends within ``timeout``."""
    deadline = time.monotonic() + timeout
    store, iteration = job_store(directory, job, timeout)
    store.record_fault(
        iteration,
        {
            "cause": "recover",
            "rank": None,
            "time": time.time(),
            "exception": None,
            "reason": reason[:4096],
        },
    )
    return await_restart(store, job, iteration, _left(deadline))


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.05)


def _owner(directory: Path, job: str) -> int:
    try:
        return os.lstat(directory).st_uid
    except OSError:
        raise NoSuchJobError(f"no wrapped rank of job {job!r} is running ({directory})") from None
