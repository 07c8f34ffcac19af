"""The in-rank agent: stacks and Flight Recorder dumps on request, without stopping the rank.

``nccl-doctor launch`` starts one agent in every rank; triage calls the two
client functions below from outside. Two mechanisms, because a hung rank may
hold the GIL:

* **stacks** — ``faulthandler`` is registered on SIGUSR2 and appends every
  thread's traceback to ``<jobdir>/stack-<rank>.txt``. faulthandler writes from
  the C signal handler, so it answers even while the main thread holds the GIL.
* **Flight Recorder** — a daemon thread polls ``<jobdir>/requests/fr-<rank>``;
  on a request it writes the pickled trace (``_dump_fr_trace``, which works for
  gloo and NCCL) to ``<jobdir>/fr/rank_<rank>`` and removes the request. This
  needs the GIL, so a GIL-holding hang yields no dump (the client times out).

``<jobdir>/agent-<rank>.pid`` holds the pid whose SIGUSR2 is safe to send:
without the agent, SIGUSR2 would terminate the process.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import threading
import time
from pathlib import Path
from types import TracebackType

STACK_SIGNAL = signal.SIGUSR2
POLL_INTERVAL = 0.1
_running: Agent | None = None


def stack_path(directory: Path, rank: int) -> Path:
    return directory / f"stack-{rank}.txt"


def fr_path(directory: Path, rank: int) -> Path:
    return directory / "fr" / f"rank_{rank}"


def _request_path(directory: Path, rank: int) -> Path:
    return directory / "requests" / f"fr-{rank}"


def _pid_path(directory: Path, rank: int) -> Path:
    return directory / f"agent-{rank}.pid"


def dump_flight_recorder(path: Path) -> Path | None:
    """Write this process's Flight Recorder trace (pickle) to ``path``; None if torch cannot.

    Without C++ stack traces: symbolising them took 4.6 s on torch 2.13 CPU, which
    would stall both a restart and a triage request; ops, sizes and sequence numbers
    (what the aligner needs) are all there.
    """
    try:
        # private c10d API (what torch's own dump on timeout calls), absent from its stubs
        from torch._C._distributed_c10d import _dump_fr_trace  # type: ignore[attr-defined]

        data = _dump_fr_trace(True, False, False)
    except Exception:  # no c10d build, or FR unavailable: nothing to dump
        return None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


class Agent:
    """Serves stack and FR requests for one rank until ``close()``."""

    def __init__(self, directory: Path, rank: int) -> None:
        self.directory = directory
        self.rank = rank
        for sub in ("requests", "fr"):
            (directory / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        # kept open: faulthandler writes to its fd from the signal handler
        self._stack_file = open(stack_path(directory, rank), "a")  # noqa: SIM115
        faulthandler.register(STACK_SIGNAL, file=self._stack_file, all_threads=True, chain=False)
        _pid_path(directory, rank).write_text(str(os.getpid()))
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, name=f"nccl-doctor-agent-{rank}", daemon=True
        )
        self._thread.start()
        global _running
        _running = self

    def _serve(self) -> None:
        request = _request_path(self.directory, self.rank)
        while not self._stop.wait(POLL_INTERVAL):
            if not request.exists():
                continue
            if dump_flight_recorder(fr_path(self.directory, self.rank)) is None:
                error = self.directory / "fr" / f"rank_{self.rank}.error"
                error.write_text("no Flight Recorder\n")
            request.unlink(missing_ok=True)

    def close(self) -> None:
        global _running
        _running = None
        self._stop.set()
        self._thread.join(timeout=2 * POLL_INTERVAL + 1)
        faulthandler.unregister(STACK_SIGNAL)
        _pid_path(self.directory, self.rank).unlink(missing_ok=True)
        self._stack_file.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def running_agent() -> Agent | None:
    """The agent of this process, if one was started (the restart wrapper reuses it)."""
    return _running


def agent_pid(directory: Path, rank: int) -> int | None:
    """The pid of the rank's running agent, or None (then SIGUSR2 would kill the rank)."""
    try:
        return int(_pid_path(directory, rank).read_text())
    except (OSError, ValueError):
        return None


def request_stack(directory: Path, rank: int, pid: int, timeout: float) -> str | None:
    """All thread stacks of ``pid`` as faulthandler text; None without an agent or answer."""
    if agent_pid(directory, rank) != pid:
        return None
    path = stack_path(directory, rank)
    start = path.stat().st_size if path.exists() else 0
    try:
        os.kill(pid, STACK_SIGNAL)
    except OSError:
        return None
    deadline = time.monotonic() + timeout
    size = start
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = path.stat().st_size if path.exists() else 0
        if now > start and now == size:  # grown, then stable for one poll: the dump is complete
            with path.open() as f:
                f.seek(start)
                return f.read()
        size = now
    return None


def request_fr_dump(directory: Path, rank: int, timeout: float) -> Path | None:
    """Ask the rank's agent for a fresh Flight Recorder dump; its path, or None on timeout."""
    request = _request_path(directory, rank)
    target = fr_path(directory, rank)
    error = target.with_name(f"rank_{rank}.error")
    error.unlink(missing_ok=True)
    request.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    asked = time.time()
    request.write_text(str(asked))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not request.exists():
            fresh = target.exists() and target.stat().st_mtime >= asked - 0.01
            return target if fresh and not error.exists() else None
        time.sleep(0.02)
    request.unlink(missing_ok=True)
    return None
