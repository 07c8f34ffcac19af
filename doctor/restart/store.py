"""The wrapper's rendezvous over one ``torch.distributed.TCPStore``, reused by every iteration.

Keys live under ``doctor/<attempt>/`` so a torchrun restart of the whole group
starts clean. Iteration ``n`` owns ``it<n>/``; the process group of the user's
function gets its own ``it<n>/pg/`` prefix, so re-running
``init_process_group`` never meets the keys of an earlier iteration.

The entry barrier of iteration ``n`` closes as soon as every participant has
either arrived or been declared terminated (by its monitor process, or by a
stale heartbeat); whoever sees that first freezes the arrived set with
``compare_set``, so every rank reads the same membership without sleeping a
fixed ``last_call_wait``.

A store ``wait`` that times out makes c10d log two warnings, so nothing here
waits with a timeout: short waits poll ``check``, and the one long wait (the
monitor thread's, on its own connection) waits for a per-rank wake key that a
fault record sets for every participant and the rank itself sets at the end.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from doctor.restart.options import RestartOptions


def _ids(raw: bytes) -> set[int]:
    return {int(p) for p in raw.decode().split(",") if p.strip()}


class RestartStore:
    """Typed access to the wrapper's keys; every method is one or two store round trips."""

    def __init__(
        self, base: dist.Store, prefix: str, initial_world_size: int, hosting: bool = False
    ) -> None:
        # Any: torch's type stubs lack Store.append and multi_set, which every backend has
        self.base: Any = base
        self.hosting = hosting
        self.prefix = prefix
        self.initial_world_size = initial_world_size

    def key(self, name: str, iteration: int | None = None) -> str:
        scope = f"it{iteration}/" if iteration is not None else ""
        return f"{self.prefix}{scope}{name}"

    def pg_store(self, iteration: int, connection: dist.Store | None = None) -> dist.Store:
        """The store handed to the user's ``init_process_group`` in this iteration."""
        return dist.PrefixStore(self.key("pg/", iteration), connection or self.base)

    def _read_set(self, key: str) -> set[int]:
        self.base.append(key, "")
        return _ids(self.base.get(key))

    # faults --------------------------------------------------------------------------
    def record_fault(self, iteration: int, record: dict[str, Any]) -> bool:
        """Store a fault of ``iteration``; True when it is the first (the one that restarts)."""
        text = json.dumps(record, sort_keys=True)
        self.base.append(self.key("faults", iteration), text + "\n")
        won = self.base.compare_set(self.key("fault", iteration), "", text)
        ranks = sorted(self.participants(iteration))
        if ranks:
            self.base.multi_set(
                [self.key(f"wake/{r}", iteration) for r in ranks], ["fault"] * len(ranks)
            )
        return won.decode() == text

    def fault(self, iteration: int) -> dict[str, Any] | None:
        key = self.key("fault", iteration)
        if not self.base.check([key]):
            return None
        return json.loads(self.base.get(key))

    def all_faults(self, iteration: int) -> list[dict[str, Any]]:
        key = self.key("faults", iteration)
        self.base.append(key, "")
        return [json.loads(line) for line in self.base.get(key).decode().splitlines() if line]

    def wait_wake(self, iteration: int, initial_rank: int) -> None:
        """Block until a fault of ``iteration`` is recorded or ``wake`` ends the iteration."""
        self.base.wait([self.key(f"wake/{initial_rank}", iteration)], timedelta(days=1))

    def wake(self, iteration: int, initial_rank: int) -> None:
        self.base.set(self.key(f"wake/{initial_rank}", iteration), "stop")

    # liveness ------------------------------------------------------------------------
    def mark_terminated(self, initial_rank: int) -> None:
        self.base.append(self.key("terminated"), f"{initial_rank},")

    def terminated(self) -> set[int]:
        return self._read_set(self.key("terminated"))

    def heartbeat(self, initial_rank: int) -> None:
        self.base.set(self.key(f"hb/{initial_rank}"), str(time.time()))

    def stale(self, ranks: set[int], timeout: float, since: float | None = None) -> set[int]:
        """Ranks whose monitor has not beaten for ``timeout`` (a lost host). One that never
        beat is still starting, unless ``since`` is given: then it counts once ``timeout``
        has passed since then (a rank that died before its first beat)."""
        now = time.time()
        out = set()
        for rank in ranks:
            key = self.key(f"hb/{rank}")
            last = float(self.base.get(key)) if self.base.check([key]) else since
            if last is not None and now - last > timeout:
                out.add(rank)
        return out

    def mark_exited(self, initial_rank: int) -> None:
        self.base.append(self.key("exited"), f"{initial_rank},")

    def exited(self) -> set[int]:
        return self._read_set(self.key("exited"))

    # the entry barrier of an iteration -------------------------------------------------
    def participants(self, iteration: int) -> set[int]:
        if iteration == 0:
            return set(range(self.initial_world_size))
        result = self.entry_result(iteration - 1)
        return set(result) if result is not None else set()

    def wait_entry(self, iteration: int, options: RestartOptions) -> list[int] | None:
        """Poll (backing off to 20 ms) until the membership is frozen; None at barrier_timeout.

        After ``last_call_wait``, every heartbeat interval, a missing rank whose monitor
        process stopped beating (a lost host) is declared dead so the barrier can close.
        """
        start = time.monotonic()
        delay, next_check = 0.0005, start + options.last_call_wait
        while (members := self.entry_result(iteration)) is None:
            now = time.monotonic()
            if now - start > options.barrier_timeout:
                return None
            if now >= next_check:
                next_check = now + options.heartbeat_interval
                missing = self.participants(iteration) - self.terminated()
                for rank in self.stale(missing, options.heartbeat_timeout):
                    self.mark_terminated(rank)
                self.try_close(iteration)
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        return members

    def entry_result(self, iteration: int) -> list[int] | None:
        key = self.key("entry/result", iteration)
        return json.loads(self.base.get(key)) if self.base.check([key]) else None

    def arrive(self, iteration: int, initial_rank: int) -> None:
        self.base.append(self.key("entry/arrived", iteration), f"{initial_rank},")
        self.try_close(iteration)

    def try_close(self, iteration: int) -> list[int] | None:
        """Freeze the membership once every participant arrived or is known dead."""
        participants = self.participants(iteration)
        arrived = self._read_set(self.key("entry/arrived", iteration)) & participants
        if not participants <= arrived | self.terminated():
            return self.entry_result(iteration)
        text = json.dumps(sorted(arrived))
        return json.loads(self.base.compare_set(self.key("entry/result", iteration), "", text))

    # completion ------------------------------------------------------------------------
    def mark_done(self, iteration: int, rank: int, active: int) -> None:
        key = self.key("done", iteration)
        self.base.append(key, f"{rank},")
        if len(self._read_set(key)) >= active:
            self.base.set(self.key("complete", iteration), "1")

    def complete(self, iteration: int) -> bool:
        return self.base.check([self.key("complete", iteration)])

    # observability ---------------------------------------------------------------------
    def put_json(self, name: str, iteration: int, data: Any) -> None:
        self.base.set(self.key(name, iteration), json.dumps(data, sort_keys=True))

    def get_json(self, name: str, iteration: int) -> Any:
        key = self.key(name, iteration)
        return json.loads(self.base.get(key)) if self.base.check([key]) else None
