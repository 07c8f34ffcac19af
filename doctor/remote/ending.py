"""When a round of multi-host collection may end before its deadline, and why it ended.

A round asks every host for its document by a deadline. A host that is only slow
answers before it, so the round waits for it; a host cut off from the network never
will, and waiting for it only delays the verdict. So every host gets a connect probe
(``doctor.remote.probe``, ``PROBE_S``) as the round starts, beside the transport: a
host that takes the connection is waited for until the deadline, as always; one that
does not is probed again every ``PROBE_S`` while it stays silent, so a blip that
passes makes it a host to wait for again. Once some host has answered, the round
ends as soon as every host has answered or failed its latest probe, and otherwise
at its deadline. A host proven unreachable that answers after all is an answer: its
document is merged like any other.

The probe used to start only once answers had stopped coming for 0.3 s, and then took
its second; started with the transport, that second has passed by the time the
reachable hosts answer (about 2 s in): docs/largest-jobs.md, "The lost host within 5 s".

The rules are pure functions (``probe_due``, ``to_probe``, ``over``, ``ending``);
``Watch`` applies them as answers and probe results arrive, on the transport's thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from enum import StrEnum

from doctor.remote import probe

PROBE_S = 1.0
"""One connect probe's timeout; the least time between two probes of a host; and, of
the deadline, what is kept for the last one."""

PROBE_BATCH = 256
"""The most hosts one probe connects to at once (a thread and a socket each): a
16,384-host job must not exhaust the login node's threads or file descriptors."""

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


def probe_due(now: float, last_probe: float | None) -> bool:
    """Whether to probe now: never yet, or ``PROBE_S`` after the last probe started."""
    return last_probe is None or now - last_probe >= PROBE_S


def to_probe(hosts: Sequence[str], answered: Collection[str], why: Mapping[str, str]) -> list[str]:
    """The hosts a probe is about, at most ``PROBE_BATCH``: silent and not yet probed,
    then silent and not connected to by their last probe. A host that took a connection
    is waited for, not probed again."""
    silent = [h for h in hosts if h not in answered]
    unknown = [h for h in silent if h not in why]
    failed = [h for h in silent if why.get(h)]
    return (unknown + failed)[:PROBE_BATCH]


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
    transport's ``on_answer``, ``done`` its stop test (which starts each probe when due).

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
        """The latest probe result of each host probed: why it cannot be connected to,
        '' when it can."""
        self._lock = threading.Lock()
        self._probe: threading.Thread | None = None
        """The probe under way, if any: one at a time."""
        self._last_probe: float | None = None
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

    def unreachable(self) -> set[str]:
        """The hosts whose latest probe failed."""
        with self._lock:
            return self._unreachable()

    def _unreachable(self) -> set[str]:
        """``unreachable`` for a caller that holds the lock."""
        return {h for h, why in self.why.items() if why}

    def done(self) -> bool:
        """Whether the round may end now: every host answered, or some did and each of
        the others failed its latest probe. Starts a probe when one is due; called every
        few tens of milliseconds."""
        with self._lock:
            if len(self.answered) == len(self._expected):
                return True
            if self._probe is None and probe_due(self.clock(), self._last_probe):
                self._start_probe()
            return bool(self.answered) and over(self.hosts, self.answered, self._unreachable())

    def _start_probe(self) -> threading.Thread | None:
        """Probe ``to_probe``'s hosts on a thread, in the time left (lock held); the thread,
        or None when there is nothing to probe or no time for it."""
        now = self.clock()
        hosts = to_probe(self.hosts, self.answered, self.why)
        timeout = min(PROBE_S, self.deadline - now - 0.1)
        if not hosts or timeout < 0.1:
            return None

        def run() -> None:
            found = self.prober(hosts, timeout)
            with self._lock:
                self.why.update(found)
                self._probe = None

        self._last_probe = now
        self._probe = threading.Thread(target=run, daemon=True, name="nccl-doctor-probe-round")
        self._probe.start()
        return self._probe

    def finish(self) -> dict[str, str]:
        """After the transport returned: the latest probe result of each host still
        silent. A silent host without one yet is waited for (a probe under way, or one
        started now), until the deadline at the latest."""
        with self._lock:
            silent = [h for h in self.hosts if h not in self.answered]
            waiting = None
            if any(h not in self.why for h in silent):
                waiting = self._probe or self._start_probe()
        if waiting is not None:
            waiting.join(max(0.0, self.deadline - self.clock()))
        with self._lock:
            return {h: self.why[h] for h in silent if h in self.why}
