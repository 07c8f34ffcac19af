"""Unblocking the main thread: close the iteration's connections, abort, raise asynchronously.

Measured on torch 2.13 CPU: ``ProcessGroupGloo.abort()`` and ``shutdown()``
return at once but do not release a peer blocked in a collective, so
``destroy_process_group`` alone leaves the other ranks waiting for the whole
gloo timeout. Shutting down the reading side of the rank's own gloo TCP
connections does: gloo's event loop reads end-of-file and fails every operation
pending on the connection with "Connection closed by peer" (about 5 ms on 4 ranks
when every rank does it). Gloo's asynchronous mode has a hole that shapes the rest:
a send that meets EPIPE or ECONNRESET is queued without failing, and nothing fails
it later, so it waits out the whole group timeout. Such a send was posted between
the moment its connection broke and the moment the loop read the end-of-file: when
the writing side was shut too, or when the peer's gloo closed its end (gloo closes a
socket as soon as it read its end-of-file). Found by py-spy and gdb in hundreds of
restarts back to back (``benchmarks/bench_restart.py --burst``: a rank's gloo worker
in ``UnboundBuffer::waitSend``; 12 restarts in 1,800 under load). So only the
reading side is shut, and the rank keeps a duplicate of every shut socket until the
next entry barrier closes (every peer has released by then): gloo's own close then
sends nothing, and a peer's late send is accepted instead of queued forever. The
connections are told apart as the connected TCP sockets opened since the
iteration began; listening sockets are left alone (shutting gloo's listener
down makes its accept thread terminate the process). NCCL communicators are
aborted with ``ProcessGroup.abort()``. Backends that are neither can only be
left by their own timeout, which ``timeouts.py`` checks.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

INTERRUPTIBLE_BACKENDS = frozenset({"gloo", "nccl"})
ABORT_WAIT = 10.0
"""Seconds the restart waits for the process groups' aborts (about 1 s each on an H200,
all at once)."""
WAKE_SIGNAL = signal.SIGRTMIN + 2
"""Delivers the restart to the main thread. A Python signal handler runs in the main
thread between bytecodes (like an asynchronous exception) but also interrupts
``time.sleep``, ``select`` and C code that checks signals (torch's waits do), and an
exception raised by a handler propagates like KeyboardInterrupt. An asynchronous
exception landing inside a signal handler makes CPython 3.11 raise SystemError, so
the two are never mixed: the signal when the wrapper runs on the main thread,
``PyThreadState_SetAsyncExc`` otherwise."""


def open_sockets() -> dict[int, int]:
    """The sockets of this process: descriptor -> the socket's inode. The inode names the
    socket itself: a descriptor number is reused as soon as it is closed (gloo closes its
    sockets on its own, the release duplicates them), and a duplicate has its socket's inode."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out[int(name)] = int(link[8:-1])
    return out


def socket_ids() -> set[int]:
    """The inodes of this process's sockets (a baseline that descriptor reuse cannot fool)."""
    return set(open_sockets().values())


def close_connections(baseline: set[int]) -> list[int]:
    """Shut the connected TCP sockets opened since ``baseline`` (inodes); the duplicates
    held."""
    return shutdown_sockets({fd: ino for fd, ino in open_sockets().items() if ino not in baseline})


def shutdown_sockets(sockets: dict[int, int]) -> list[int]:
    """Shut the reading side of the connected TCP sockets among ``sockets`` (descriptor ->
    the inode it had when listed), through a duplicate of each kept for ``close_held`` once
    every peer has released (the module's docstring says why). The duplicate is checked to
    be the listed socket: a descriptor closed and reused since the listing (gloo and the
    store open and close their own) names another socket, which is left alone. The
    descriptors themselves stay open (gloo's)."""
    held = []
    for fd, inode in sockets.items():
        try:
            dup = os.dup(fd)
        except OSError:
            continue
        if _shut_for_reading(dup, inode):
            held.append(dup)
        else:
            os.close(dup)
    return held


def _shut_for_reading(fd: int, inode: int) -> bool:
    """Shut the reading side of ``fd`` if it is the socket ``inode``, TCP and connected."""
    try:
        if os.fstat(fd).st_ino != inode:
            return False
        sock = socket.socket(fileno=fd)
    except OSError:
        return False
    try:
        if (
            sock.family in (socket.AF_INET, socket.AF_INET6)
            and sock.type == socket.SOCK_STREAM
            and not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        ):
            sock.shutdown(socket.SHUT_RD)
            return True
        return False
    except OSError:
        return False
    finally:
        sock.detach()


def close_held(held: list[int]) -> None:
    """Close the duplicates ``shutdown_sockets`` kept, emptying ``held``."""
    while held:
        with contextlib.suppress(OSError):
            os.close(held.pop())


def abort_process_groups(wait: float = ABORT_WAIT) -> list[str]:
    """``abort()`` every process group (what releases NCCL), each in its own thread; the
    backend names seen. Measured on an H200 (tests/gpu_capture/abort_time.sh): one NCCL
    communicator's abort takes about 1 s, and one after another 1, 4 and 8 groups took
    1.0, 2.5 and 4.5 s; in parallel 1.0 s each time (a Megatron rank has a group per
    parallelism). An abort still running after ``wait`` seconds is left to finish on its
    own: the restart goes on, or the rank would sit until its hard timeout ends it."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return []
    groups = list(dist.distributed_c10d._world.pg_map)
    names = [str(dist.get_backend(group)) for group in groups]
    threads = [
        threading.Thread(target=_abort, args=(group,), name="nccl-doctor-abort", daemon=True)
        for group in groups
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + wait
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    if stuck := sum(thread.is_alive() for thread in threads):
        print(
            f"nccl-doctor wrapper: the abort of {stuck} of {len(threads)} process groups "
            f"had not returned after {wait:g}s; the restart goes on without it",
            file=sys.stderr,
            flush=True,
        )
    return names


def _abort(group: Any) -> None:
    try:
        group.abort()
    except Exception:  # an already broken group: nothing more to release
        pass


def destroy_process_groups() -> None:
    """Forget every process group (main thread, after the exception has unwound the function)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # aborted groups may refuse a clean destroy; they are gone either way
            pass


def _set_async_exc(thread_id: int, exc: type[BaseException]) -> int:
    setter = ctypes.pythonapi.PyThreadState_SetAsyncExc
    setter.argtypes = (ctypes.c_ulong, ctypes.py_object)
    setter.restype = ctypes.c_int
    return int(setter(thread_id, exc))


def raise_in_thread(thread_id: int, exc: type[BaseException], by_signal: bool) -> None:
    """Make ``exc`` raise in ``thread_id``: through the wake handler, or asynchronously."""
    if by_signal:
        signal.pthread_kill(thread_id, WAKE_SIGNAL)
    else:
        _set_async_exc(thread_id, exc)


def clear_pending(thread_id: int) -> None:
    """Drop an asynchronous exception set but not yet raised."""
    setter = ctypes.pythonapi.PyThreadState_SetAsyncExc
    setter.argtypes = (ctypes.c_ulong, ctypes.c_void_p)
    setter.restype = ctypes.c_int
    setter(thread_id, None)


@contextmanager
def wake_deferred() -> Iterator[None]:
    """Hold ``WAKE_SIGNAL`` back on this thread for the block: delivered inside a C++ call
    that checks signals (TCPStore's client waits do), a handler that raises came out as
    ``SystemError: error return without exception set`` (1 fresh-clone suite run in 3
    lost a rank to it). Held back, the signal is delivered when the call has returned,
    and its handler raises between bytecodes."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {WAKE_SIGNAL})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def install_wake_handler(handler: Callable[[], None]) -> Any:
    """Route ``WAKE_SIGNAL`` to ``handler`` (which raises); the previous handler, or None
    off the main thread (then asynchronous exceptions are used instead)."""
    try:
        return signal.signal(WAKE_SIGNAL, lambda signum, frame: handler())
    except ValueError:
        return None


def restore_wake_handler(previous: Any) -> None:
    if previous is not None:
        signal.signal(WAKE_SIGNAL, previous)
