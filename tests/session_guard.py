"""The suite runs in a private temporary root and must leave nothing behind.

At the start of the run (``start``): a fresh root directory holds the run's
``TMPDIR`` (every ``tempfile`` of the suite and of the processes it starts), the
launch registry (``NCCL_DOCTOR_HOME``), torch's compile caches and pytest's own
``basetemp``, so the suite
reads no state others left in ``/tmp`` and shares none with runs beside it. The
pytest process becomes a child subreaper, so every process the suite starts stays
its descendant even when orphaned. Orphans that exit become pytest's zombies; after
each test ``reap_orphans`` reaps those that no ``subprocess.Popen`` of the suite
owns, so a test that reads the process table (a launcher's zombie children are
evidence of lost ranks) never sees another test's dead.

At the end (``finish``): a process still alive below pytest, or a file left in the
run's ``TMPDIR``, is a leak: each is listed, the processes are killed, and the run
fails. A passing run removes its root; a failing one keeps it, and says where.
"""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import signal
import subprocess
import tempfile
import weakref
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
TORCH_CACHES = ("torchinductor_", "triton")
"""torch's compile caches, which it keeps in TMPDIR by design (a process whose environment
was built without TORCHINDUCTOR_CACHE_DIR still finds TMPDIR): caches, not leaks.
torchrun's ``torchelastic_*`` log folder is a leak: give torchrun ``--log-dir``."""
HELPERS = ("from multiprocessing.resource_tracker import main",)
"""Processes that live as long as pytest by design (multiprocessing's resource tracker,
started by a process pool, exits with its parent)."""
_POPENS: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()
"""Every ``Popen`` the suite created and still holds: its children, zombie or not."""


def _track_popens() -> None:
    original = subprocess.Popen.__init__

    def init(self: subprocess.Popen[bytes], *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        _POPENS.add(self)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]


def start() -> Path:
    root = Path(tempfile.mkdtemp(prefix="nccl-doctor-tests-"))
    for name in ("tmp", "registry"):
        (root / name).mkdir(mode=0o700)
    os.environ["TMPDIR"] = str(root / "tmp")
    os.environ["NCCL_DOCTOR_HOME"] = str(root / "registry")
    # torch's compile caches: the run's own, beside TMPDIR (caches by design, not leaks)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "cache" / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(root / "cache" / "triton")
    tempfile.tempdir = None  # recomputed from TMPDIR
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _track_popens()
    return root


def reap_orphans() -> None:
    """Reap the zombies among this process's children that no ``Popen`` owns: orphans
    of finished tests, reparented here by the subreaper."""
    owned = {p.pid for p in list(_POPENS)}
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in owned:
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[:2] == ["Z", me]:
            try:
                os.waitpid(int(entry.name), os.WNOHANG)
            except ChildProcessError:
                pass


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z":
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def leftover_processes() -> list[str]:
    """Every live descendant of this process, as ``pid: command line``."""
    _reap()
    tree, found, todo = _children(), [], [os.getpid()]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    out = []
    for pid in found:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if not any(helper in cmd for helper in HELPERS):
            out.append(f"{pid}: {cmd.strip()[:200]}")
    return out


def _removed_at_exit() -> set[str]:
    """Paths a ``weakref.finalize`` of this process removes at exit (a library's
    ``TemporaryDirectory`` held for the life of the process): cleaned, not leaked."""
    return {
        arg
        for info in list(weakref.finalize._registry.values())  # type: ignore[attr-defined]
        for arg in info.args
        if isinstance(arg, str)
    }


def _stop_resource_tracker() -> None:
    """multiprocessing's resource tracker (started by a process pool a test ran in this
    process) lives as long as pytest: this process's own helper, stopped, not a leak."""
    from multiprocessing import resource_tracker

    stop = getattr(resource_tracker._resource_tracker, "_stop", None)
    if stop is not None:
        stop()


def finish(root: Path, passed: bool) -> list[str]:
    """The leaks of the run (processes are killed); the root goes when all is clean."""
    _stop_resource_tracker()
    processes = leftover_processes()
    for line in processes:
        try:
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
        except OSError:
            pass
    _reap()
    gc.collect()  # runs the finalizers of temporary directories nothing refers to any more
    tmp, pending = root / "tmp", _removed_at_exit()
    files = sorted(
        str(p.relative_to(tmp))
        for p in (tmp.iterdir() if tmp.is_dir() else ())
        if str(p) not in pending and not p.name.startswith(TORCH_CACHES)
    )
    leaks = [f"process left running: {p}" for p in processes]
    leaks += [f"file left in TMPDIR: {f}" for f in files]
    if passed and not leaks:
        shutil.rmtree(root, ignore_errors=True)
    return leaks
