"""The next iteration's store connection, opened while the current one runs.

Each iteration hands ``init_process_group`` a store connection of its own, so an
abort can shut it down (what unblocks a rendezvous stuck in ``store.get``). A
TCPStore connect reverse-resolves both socket addresses (torch formats them for
its logs with ``getnameinfo``); where the DNS server drops a query, glibc waits
its full 5 s timeout. Measured here: 1 connect in 30 stalled 5.0 s, so opening
the connection at re-entry put a 5 s wait on about a third of all restarts.
The spare is opened in the background during the iteration before, off the
restart path, and kept out of that iteration's abort. A fault can come before
the spare is ready (a short iteration whose spare stalled in DNS: one fresh-clone
suite run in 5 re-entered 5.4 s late): then the restart does not wait for it but
connects afresh, which stalls only if that lookup is dropped too; the late spare
is dropped when it arrives.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from doctor.restart.abort import open_sockets, socket_ids
from doctor.restart.monitor_thread import Interruptible, IterationContext

Opened = tuple[Any, set[int]]
"""A store connection and the sockets it opened (inodes)."""
READY_WAIT = 0.05
"""Seconds a restart waits for a spare still connecting: a connect takes about 0.5 ms,
so one not done by then waits for a DNS answer (5 s when the query was dropped)."""


def open_tracked(connect: Callable[[], Any], port: int) -> Opened:
    """Open a store connection; its sockets are those that appeared meanwhile connected to
    the store's ``port`` (the function's own gloo sockets, opened at the same time, go to
    its peers' ports; a duplicate the release took meanwhile is of an older socket)."""
    before = socket_ids()
    connection = connect()
    return connection, {
        ino for fd, ino in open_sockets().items() if ino not in before and _peer_port(fd) == port
    }


def _peer_port(fd: int) -> int | None:
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None
    try:
        return int(sock.getpeername()[1])
    except (OSError, IndexError, TypeError, ValueError):
        return None
    finally:
        sock.detach()


class SpareConnection:
    """At most one connection being prepared for the next iteration."""

    def __init__(self, connect: Callable[[], Any], port: int) -> None:
        self._connect = connect
        self._port = port
        self._thread: threading.Thread | None = None
        self._late: list[threading.Thread] = []
        """Spares given up on while still connecting; ``close`` waits for them."""
        self._ready: Opened | None = None

    def prepare(self, ctx: IterationContext, shared: Interruptible) -> None:
        """Open the next connection in the background, excluded from ``ctx``'s abort; if
        the abort came first, the connection may have been shut down: it is dropped."""

        def run() -> None:
            try:
                opened = open_tracked(self._connect, self._port)
            except Exception:  # no spare: the next iteration connects itself
                return
            with shared.lock:
                if "abort" in ctx.phases or self._thread is not threading.current_thread():
                    return  # aborted, or given up on: this connection is dropped
                ctx.socket_baseline |= opened[1]
                self._ready = opened

        self._thread = threading.Thread(target=run, name="nccl-doctor-spare", daemon=True)
        self._thread.start()

    def take(self, timeout: float = READY_WAIT) -> Opened | None:
        """The prepared connection (waiting up to ``timeout`` for it), or None: then the
        caller connects itself, and a spare still connecting is dropped once it is done
        (its iteration was aborted)."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._late.append(self._thread)
                self._thread = None
                return None
        ready, self._ready, self._thread = self._ready, None, None
        return ready

    def close(self, timeout: float) -> None:
        """Drop the spares before the process exits: a TCPStore client still connecting, or
        left for interpreter shutdown to destroy, hung the exit of every rank."""
        self.take(timeout)
        for late in self._late:
            late.join(timeout)
        self._late = [late for late in self._late if late.is_alive()]
