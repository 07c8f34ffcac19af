"""The in-rank agent: stacks and Flight Recorder dumps on request, without stopping the rank.

``nccl-doctor launch`` starts one agent in every rank; triage (and the restart
wrapper's monitor process) call the client functions below from outside. A
daemon thread polls ``<jobdir>/requests/`` and serves two requests:

* **stacks** — every thread's traceback, appended to ``<jobdir>/stack-<rank>.txt``
  by ``faulthandler.dump_traceback`` while the agent holds the GIL, so no other
  thread moves its frames during the walk. The signal path is only the fallback
  for a rank whose GIL is held (a hang in C that holds it): ``faulthandler`` is
  registered on SIGUSR2 and walks the threads from the C handler. That walk is
  not safe while another thread runs Python: it read frames as they were freed
  and crashed ranks (SIGSEGV: 12 of 20 ranks whose helper threads run Python,
  within 11,844 signals; ``benchmarks/bench_stacks.py``). A held GIL means no
  thread runs Python, so the fallback is used exactly where the walk is safe.
* **Flight Recorder** — the pickled trace (``_dump_fr_trace``, which works for
  gloo and NCCL) is written to ``<jobdir>/fr/rank_<rank>``. This needs the GIL,
  so a GIL-holding hang yields no dump (the client times out).

Whoever removes a request owns it: the agent takes one by unlinking it, and a
client that gets no answer unlinks it before signalling, so a request is served
once, by the agent or by the signal, never both.

``<jobdir>/agent-<rank>.pid`` holds the pid and start time of the process whose
SIGUSR2 is safe to send: without the agent, SIGUSR2 would terminate the process,
so the signal goes only to that very process (``process_identity.send_signal``).
Every file here is created in the job's private directory without following
links (``safeio``), and the pid file is removed when the agent closes.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from doctor.trust.process_identity import ProcessId, send_signal, this_process
from doctor.trust.safeio import TrustedDir, UnsafePath, open_append, private_dir, write_atomic

STACK_SIGNAL = signal.SIGUSR2
POLL_INTERVAL = 0.1
HANDOFF = 0.5
"""Seconds a stack request waits for the agent before the signal: the agent looks every
``POLL_INTERVAL`` and then needs the GIL, which a running main thread yields every 5 ms."""
MAIN_THREAD_LINE = "nccl-doctor agent: main thread "
"""Heads an answer dumped by the agent, whose own thread is faulthandler's current one."""
STACK_BYTES = 4 << 20
"""The most of one stack answer read back (faulthandler writes a few KB per thread)."""
_running: Agent | None = None


def stack_path(directory: Path, rank: int) -> Path:
    return directory / f"stack-{rank}.txt"


def fr_path(directory: Path, rank: int) -> Path:
    return directory / "fr" / f"rank_{rank}"


def _request_path(directory: Path, rank: int, what: str = "fr") -> Path:
    return directory / "requests" / f"{what}-{rank}"


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
    private_dir(path.parent)
    write_atomic(path, data)
    return path


class Agent:
    """Serves stack and FR requests for one rank until ``close()``."""

    def __init__(self, directory: Path, rank: int) -> None:
        self.directory = directory
        self.rank = rank
        for sub in ("requests", "fr"):
            private_dir(directory / sub)
        # kept open: faulthandler writes to its fd from the signal handler
        self._stack_fd = open_append(stack_path(directory, rank))
        faulthandler.register(STACK_SIGNAL, file=self._stack_fd, all_threads=True, chain=False)
        self.identity = this_process()
        write_atomic(_pid_path(directory, rank), self.identity.to_text())
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, name=f"nccl-doctor-agent-{rank}", daemon=True
        )
        self._thread.start()
        global _running
        _running = self

    def _serve(self) -> None:
        fr_request = _request_path(self.directory, self.rank)
        stack_request = _request_path(self.directory, self.rank, "stack")
        while not self._stop.wait(POLL_INTERVAL):
            if _take(stack_request):
                try:
                    self._dump_stacks()
                except OSError:  # no memory for the scratch file, a full disk: no answer
                    pass
            if not fr_request.exists():
                continue
            if dump_flight_recorder(fr_path(self.directory, self.rank)) is None:
                error = self.directory / "fr" / f"rank_{self.rank}.error"
                write_atomic(error, "no Flight Recorder\n")
            fr_request.unlink(missing_ok=True)

    def _dump_stacks(self) -> None:
        """Every thread's stack, walked under the GIL, appended in one write (a reader
        takes an answer that stopped growing as complete)."""
        main = threading.main_thread().ident or 0
        scratch = os.memfd_create("nccl-doctor-stacks", os.MFD_CLOEXEC)
        try:
            faulthandler.dump_traceback(file=scratch, all_threads=True)
            size = os.lseek(scratch, 0, os.SEEK_CUR)
            text = os.pread(scratch, min(size, STACK_BYTES), 0)
        finally:
            os.close(scratch)
        os.write(self._stack_fd, f"{MAIN_THREAD_LINE}0x{main:016x}\n".encode() + text)

    def close(self) -> None:
        global _running
        _running = None
        self._stop.set()
        self._thread.join(timeout=2 * POLL_INTERVAL + 1)
        faulthandler.unregister(STACK_SIGNAL)
        if agent_pid(self.directory, self.rank) == self.identity:
            _pid_path(self.directory, self.rank).unlink(missing_ok=True)
        os.close(self._stack_fd)

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


def _owner(directory: Path) -> int:
    """Whose job directory this is: the only user whose processes and files count here."""
    return os.lstat(directory).st_uid


def agent_pid(directory: Path, rank: int, owner: int | None = None) -> ProcessId | None:
    """The rank's running agent (pid and start time), or None (then SIGUSR2 would kill it)."""
    try:
        owner = _owner(directory) if owner is None else owner
        with TrustedDir.open(directory, owner) as folder:
            text = folder.read(_pid_path(directory, rank).name, 64).decode(errors="replace")
        return ProcessId.from_text(text)
    except (OSError, UnsafePath):
        return None


def _take(request: Path) -> bool:
    """Remove ``request``; True when this call removed it (and so serves it)."""
    try:
        request.unlink()
    except OSError:  # taken already, or its folder is gone with the job
        return False
    return True


def _folders(directory: Path, owner: int | None, *subs: str) -> tuple[TrustedDir, ...] | None:
    """The job directory and its ``subs``, each walked and checked as ``owner``'s
    (``safeio.TrustedDir``): root writes requests and removes answers only there. None
    when one is missing or fails a check (no agent serves a rank there)."""
    opened: list[TrustedDir] = []
    try:
        owner = _owner(directory) if owner is None else owner
        opened.append(TrustedDir.open(directory, owner))
        opened += [opened[0].sub(sub) for sub in subs]
    except (OSError, UnsafePath):
        for folder in opened:
            folder.close()
        return None
    return tuple(opened)


def request_stack(
    directory: Path, rank: int, pid: int, timeout: float, owner: int | None = None
) -> str | None:
    """All thread stacks of ``pid`` as faulthandler text; None without an agent or answer."""
    try:
        owner = _owner(directory) if owner is None else owner
    except OSError:  # the job's folder is gone with it
        return None
    agent = agent_pid(directory, rank, owner)
    if agent is None or agent.pid != pid:
        return None
    return ask_for_stacks(
        directory, rank, lambda: send_signal(agent, STACK_SIGNAL, owner), timeout, owner
    )


def ask_for_stacks(
    directory: Path,
    rank: int,
    send_stack_signal: Callable[[], bool],
    timeout: float,
    owner: int | None = None,
) -> str | None:
    """Ask the rank's agent for its stacks; signal only when the agent cannot take the
    request (its GIL is held). The text appended, or None without an answer."""
    folders = _folders(directory, owner, "requests")
    if folders is None:  # no requests folder: no agent serves this rank
        return None
    job, requests = folders
    with job, requests:
        answer = stack_path(directory, rank).name
        request = _request_path(directory, rank, "stack").name
        start = job.size(answer)
        deadline = time.monotonic() + timeout
        try:
            requests.write(request, str(time.time()))
        except OSError:
            return None
        handoff = time.monotonic() + min(HANDOFF, timeout / 2)
        while requests.lstat(request) is not None and time.monotonic() < handoff:
            time.sleep(0.01)
        if requests.unlink(request) and not send_stack_signal():
            return None
        return _await_growth(job, answer, start, max(0.0, deadline - time.monotonic()))


def _await_growth(folder: TrustedDir, name: str, start: int, timeout: float) -> str | None:
    """What faulthandler appended to ``name`` past ``start`` once it stops growing."""
    deadline = time.monotonic() + timeout
    size = start
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = folder.size(name)
        if now > start and now == size:  # grown, then stable for one poll: the dump is complete
            try:
                return folder.read(name, STACK_BYTES, start).decode("utf-8", errors="replace")
            except (OSError, UnsafePath):
                return None
        size = now
    return None


def request_fr_dump(
    directory: Path, rank: int, timeout: float, owner: int | None = None
) -> Path | None:
    """Ask the rank's agent for a fresh Flight Recorder dump; its path, or None on timeout
    (or when the job's folders fail the owner's checks)."""
    folders = _folders(directory, owner, "requests", "fr")
    if folders is None:  # no requests folder: no agent serves this rank
        return None
    job, requests, fr = folders
    with job, requests, fr:
        request = _request_path(directory, rank).name
        target = fr_path(directory, rank)
        error = f"rank_{rank}.error"
        fr.unlink(error)
        asked = time.time()
        try:
            requests.write(request, str(asked))
        except OSError:
            return None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if requests.lstat(request) is None:
                info = fr.lstat(target.name)
                fresh = (
                    info is not None
                    and stat.S_ISREG(info.st_mode)
                    and info.st_uid == fr.owner
                    and info.st_mtime >= asked - 0.01
                )
                return target if fresh and fr.lstat(error) is None else None
            time.sleep(0.02)
        requests.unlink(request)
        return None


def forget_rank(directory: Path, rank: int, identity: ProcessId | None) -> None:
    """Remove the rank's pid file and launch record when they still name ``identity``
    (the rank's process, now gone): a stale pid must never be signalled later."""
    from doctor.jobdir.registry import unregister_rank

    if identity is None:
        return
    if agent_pid(directory, rank) == identity:
        _pid_path(directory, rank).unlink(missing_ok=True)
    unregister_rank(directory, rank, identity)
