"""When a round of multi-host collection may end before its deadline, and why it ended.

A round asks every host for its document by a deadline. A host that is only slow
answers before it, so the round waits for it; a host cut off from the network never
will, and waiting for it only delays the verdict. So once answers have stopped
arriving for ``QUIET_S`` (the reachable hosts have answered), the hosts still silent
get one connect probe each (``doctor.remote.probe``, ``PROBE_S``); the round ends as
soon as every host has answered or been proven unreachable, and otherwise at its
deadline. A host proven unreachable that answers after all is an answer: its
document is merged like any other. When no host answers at all, the probe starts
``PROBE_S`` before the deadline, as it always did.

The rules are pure functions (``probe_due``, ``over``, ``ending``); ``Watch`` applies
them as answers and probe results arrive, on the transport's thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from enum import StrEnum

from doctor.remote import probe

PROBE_S = 1.0
"""One connect probe's timeout; and, of the deadline, what is kept for it."""
QUIET_S = 0.3
"""No new answer for this long: the hosts that can answer have (they share one ``--until``)."""

Prober = Callable[[Sequence[str], float], Mapping[str, str]]
"""Hosts, timeout -> per host why it cannot be connected to ('' when it can)."""


class Ending(StrEnum):
    """Why a round stopped waiting (``collected.ended`` in the JSON)."""

    ANSWERED = "answered"
    """Every host answered."""
    UNREACHABLE = "unreachable"
    """Every host still silent was proven unreachable, before the deadline."""
    TRANSPORT = "transport"
    """The transport ended early (srun exited, every ssh ended); a silent host takes connections."""
    DEADLINE = "deadline"
    """The deadline passed with a host silent."""


def probe_due(now: float, last_answer: float | None, probe_from: float) -> bool:
    """Whether the silent hosts' probe should start: answers stopped arriving ``QUIET_S``
    ago, or it is ``probe_from`` (the deadline less ``PROBE_S``) and none came at all."""
    return (last_answer is not None and now - last_answer >= QUIET_S) or now >= probe_from


def over(hosts: Collection[str], answered: Collection[str], unreachable: Collection[str]) -> bool:
    """Nothing more can come: every host answered or was proven unreachable."""
    return all(h in answered or h in unreachable for h in hosts)


def ending(
    hosts: Collection[str],
    answered: Collection[str],
    unreachable: Collection[str],
    deadline_reached: bool,
) -> Ending:
    """Why the round ended, once it has: in this order, every host answered, the deadline
    passed, every silent host was proven unreachable, or the transport gave up early."""
    if all(h in answered for h in hosts):
        return Ending.ANSWERED
    if deadline_reached:
        return Ending.DEADLINE
    if over(hosts, answered, unreachable):
        return Ending.UNREACHABLE
    return Ending.TRANSPORT


class Watch:
    """One round's answers and probe results as they arrive; ``answer`` is the
    transport's ``on_answer``, ``done`` its stop test (which starts the probe when due).

    ``port``: the port to probe, looked up on a thread from the start (``scontrol show
    config`` takes a while on a loaded login node); ``prober``: the connect probe.
    """

    def __init__(
        self,
        hosts: Sequence[str],
        deadline: float,
        port: Callable[[], int],
        prober: Prober | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hosts = tuple(hosts)
        self._expected = frozenset(self.hosts)
        self.deadline = deadline
        self.clock = clock
        self.prober: Prober = prober or (lambda hs, t: probe.unreachable(hs, self._port(), t))
        self.answered: set[str] = set()
        self.why: dict[str, str] = {}
        """Probe results: host -> why it cannot be connected to, '' when it can."""
        self.last_answer: float | None = None
        self._lock = threading.Lock()
        self._probe: threading.Thread | None = None
        self._probed: tuple[str, ...] = ()
        """The hosts silent when the probe started: the only ones it can still be about."""
        self._reported = False
        self._ports: list[int] = []
        self._port_known = threading.Event()
        threading.Thread(
            target=self._look_up, args=(port,), daemon=True, name="nccl-doctor-probe-port"
        ).start()

    def _look_up(self, port: Callable[[], int]) -> None:
        try:
            self._ports.append(port())
        finally:
            self._port_known.set()

    def _port(self) -> int:
        self._port_known.wait(max(0.0, self.deadline - PROBE_S - self.clock()))
        return self._ports[0] if self._ports else probe.SLURMD_PORT

    def answer(self, host: str) -> None:
        """A host's document is complete."""
        with self._lock:
            if host in self._expected:
                self.answered.add(host)
                self.last_answer = self.clock()

    def unreachable(self) -> set[str]:
        """The hosts proven unreachable so far."""
        with self._lock:
            return self._unreachable()

    def _unreachable(self) -> set[str]:
        """``unreachable`` for a caller that holds the lock."""
        return {h for h, why in self.why.items() if why}

    def done(self) -> bool:
        """Whether the round may end now; starts the silent hosts' probe when it is due.
        Called every few tens of milliseconds: it looks at every host only once, when the
        probe starts, and then at the hosts that were silent then."""
        with self._lock:
            if len(self.answered) == len(self._expected):
                return True
            if self._probe is None and probe_due(self.clock(), self.last_answer, self.probe_from):
                silent = [h for h in self.hosts if h not in self.answered]
                self._start_probe(silent, min(PROBE_S, self.deadline - self.clock() - 0.1))
            return self._reported and over(self._probed, self.answered, self._unreachable())

    @property
    def probe_from(self) -> float:
        return self.deadline - PROBE_S

    def _start_probe(self, silent: list[str], timeout: float) -> None:
        def run() -> None:
            found = self.prober(silent, max(0.1, timeout))
            with self._lock:
                self.why.update(found)
                self._reported = True

        self._probed = tuple(silent)
        self._probe = threading.Thread(target=run, daemon=True, name="nccl-doctor-probe-round")
        self._probe.start()

    def finish(self) -> dict[str, str]:
        """After the transport returned: the probe results for the hosts still silent,
        waiting for a probe under way (or starting one, in the time left) until the
        deadline at the latest."""
        with self._lock:
            silent = [h for h in self.hosts if h not in self.answered]
            left = self.deadline - self.clock()
            if silent and self._probe is None and left >= 0.2:
                self._start_probe(silent, min(PROBE_S, left - 0.1))
            running = self._probe
        if running is not None:
            running.join(max(0.0, self.deadline - self.clock()))
        with self._lock:
            return {h: self.why[h] for h in self.hosts if h not in self.answered and h in self.why}
