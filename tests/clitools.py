"""The real CLI in a subprocess, with a controlled environment: what most tests drive."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent


def load_tool(name: str) -> ModuleType:
    """A script of ``tools/`` (not a package) imported as a module, to test its functions."""
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment with no NCCL/torch variables from the developer's shell."""
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "USER",
        "SYSTEMROOT",
        "RES_OPTIONS",
        "NCCL_DOCTOR_HOME",
    )
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(extra or {})
    return env


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    stdin: str = "",
) -> subprocess.CompletedProcess[str]:
    """``nccl-doctor ARGS`` in a fresh interpreter, as a user runs it (``stdin`` piped in)."""
    return subprocess.run(
        [sys.executable, "-m", "doctor", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=dict(env) if env is not None else clean_env(),
        cwd=cwd,
        timeout=timeout,
    )


def processes_with(token: str) -> list[int]:
    """Pids whose environment carries ``token`` (ranks and their monitor processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def wait_and_reap(
    procs: Iterable[subprocess.Popen[bytes]], token: str, timeout: float, grace: float = 8.0
) -> list[int]:
    """Wait for ``procs`` until ``timeout`` (then kill them), give what they started (monitor
    processes, a watcher) ``grace`` seconds to end, and kill what is left, reporting it: never
    leave a process to the next test. Returns the pids that were left."""
    deadline = time.monotonic() + timeout
    try:
        for proc in procs:
            proc.wait(max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    leftovers = processes_with(token)
    end = time.monotonic() + grace
    while leftovers and time.monotonic() < end:
        time.sleep(0.1)
        leftovers = processes_with(token)
    for pid in leftovers:
        try:
            cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ")
            print(f"leftover {pid}: {cmdline.decode(errors='replace')}", file=sys.stderr)
            os.kill(pid, 9)
        except OSError:
            pass
    return leftovers
