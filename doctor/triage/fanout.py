"""Run calls in parallel and take what finished by a deadline; never wait longer.

Daemon threads, not an executor: a probe stuck in the kernel (reading
``/proc`` of a process in uninterruptible sleep) must not keep nccl-doctor
from exiting, and ``concurrent.futures`` joins its workers at exit.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class Failed:
    """A call that raised; the exception is kept for the message."""

    error: BaseException


@dataclass(frozen=True)
class Done(Generic[V]):
    value: V


def fanout(
    calls: Mapping[K, Callable[[], V]],
    deadline: float,
    on_done: Callable[[K, Done[V] | Failed], None] | None = None,
) -> dict[K, Done[V] | Failed]:
    """Each call's outcome by key; keys missing from the result did not finish in time.

    ``on_done`` is called on the caller's thread as each outcome arrives.
    """
    results: queue.Queue[tuple[K, Done[V] | Failed]] = queue.Queue()

    def run(key: K, call: Callable[[], V]) -> None:
        try:
            results.put((key, Done(call())))
        except Exception as exc:  # a probe's failure is data, not a crash of the collection
            results.put((key, Failed(exc)))

    for key, call in calls.items():
        threading.Thread(
            target=run, args=(key, call), daemon=True, name=f"nccl-doctor-probe-{key}"
        ).start()
    outcomes: dict[K, Done[V] | Failed] = {}
    while len(outcomes) < len(calls):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            key, outcome = results.get(timeout=remaining)
        except queue.Empty:
            break
        outcomes[key] = outcome
        if on_done is not None:
            on_done(key, outcome)
    return outcomes
