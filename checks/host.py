"""The edge: probes of this host that the pure checks read through ``Facts``.

Each probe is bounded and cheap (preflight must start in well under a second,
half of a bare ``import torch``), and none imports torch: versions come from
package metadata, ptrace is tried with one ``ptrace(2)`` call.
"""

from __future__ import annotations

import ctypes
import importlib.metadata as metadata
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from doctor.checks.facts import PtraceFacts

LD_CACHE = "/etc/ld.so.cache"
DEFAULT_LIB_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")
PTRACE_SEIZE = 0x4206
CAP_SYS_PTRACE = 19
_WALL = 0x40000000


def interfaces() -> dict[str, bool] | None:
    """Interface -> has an IPv4 or non-loopback IPv6 address (what NCCL's socket code uses)."""
    import socket

    import psutil

    try:
        table = psutil.net_if_addrs()
    except OSError:
        return None
    return {
        name: any(
            a.family == socket.AF_INET
            or (a.family == socket.AF_INET6 and a.address.split("%")[0] != "::1")
            for a in addrs
        )
        for name, addrs in table.items()
    }


def ib_devices(root: str = "/sys/class/infiniband") -> tuple[str, ...]:
    try:
        return tuple(sorted(os.listdir(root)))
    except OSError:
        return ()


def _ld_cache() -> dict[str, str]:
    """Library file name -> path, from the loader cache (its strings are plain paths)."""
    try:
        data = Path(LD_CACHE).read_bytes()
    except OSError:
        return {}
    paths = (m.decode(errors="replace") for m in re.findall(rb"/[^\x00]*\.so[^\x00]*", data))
    return {p.rsplit("/", 1)[-1]: p for p in paths}


def _nccl_wheel_dirs() -> list[str]:
    """``site-packages/nvidia/nccl/lib``: libnccl's RUNPATH, so dlopen from NCCL searches it."""
    return [str(d) for p in sys.path if (d := Path(p or ".") / "nvidia" / "nccl" / "lib").is_dir()]


def resolve_libraries(
    names: Iterable[str], env: Mapping[str, str], cwd: Path
) -> dict[str, str | None]:
    """Where the dynamic loader, called from libnccl, would find each library name."""
    ld_path = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs = [*ld_path, *_nccl_wheel_dirs()]
    cache: dict[str, str] | None = None
    found: dict[str, str | None] = {}
    for name in names:
        if "/" in name:
            path = Path(name) if Path(name).is_absolute() else cwd / name
            found[name] = str(path) if path.is_file() else None
            continue
        hit = next((str(Path(d) / name) for d in dirs if (Path(d) / name).is_file()), None)
        if hit is None:
            cache = _ld_cache() if cache is None else cache
            hit = cache.get(name) or next(
                (str(Path(d) / name) for d in DEFAULT_LIB_DIRS if (Path(d) / name).is_file()), None
            )
        found[name] = hit
    return found


def _cap_sys_ptrace() -> bool:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    match = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status, re.M)
    return bool(match and int(match.group(1), 16) >> CAP_SYS_PTRACE & 1)


def _ptrace_scope() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip())
    except (OSError, ValueError):
        return None


class _ProbeUnavailable(Exception):
    """The probe itself could not run (no ``sh``, an overloaded host): a skip, not a warning."""


def _start_orphan(timeout: float) -> int:
    """Start ``sleep`` through a shell that exits at once, so ``sleep`` is not our descendant
    (as a rank is not the descendant of the shell running triage)."""
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 10 </dev/null >/dev/null 2>&1 & echo $!"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # sh and its sleep share the new process group
        proc.communicate()
        raise _ProbeUnavailable(f"the probe process did not start within {timeout:g}s") from None
    if proc.returncode != 0 or not out.strip().isdigit():
        raise _ProbeUnavailable("sh could not start the probe process")
    return int(out.strip())


def _attach(pid: int, timeout: float) -> str | None:
    """``PTRACE_SEIZE`` the process, then kill (and, as its tracer, reap) it; None = it worked."""
    traced = False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        traced = libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0
        return None if traced else os.strerror(ctypes.get_errno())
    finally:
        os.kill(pid, signal.SIGKILL)
        if traced:
            _reap_tracee(pid, timeout)


def _reap_tracee(pid: int, timeout: float) -> None:
    """A dead tracee stays a zombie until its tracer waits for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG | _WALL)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.002)


def probe_ptrace(timeout: float = 2.0) -> PtraceFacts:
    """Try ptrace for real on a process that is not our child; bounded by ``timeout``."""
    pyspy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    scope, cap = _ptrace_scope(), _cap_sys_ptrace()
    try:
        return PtraceFacts(scope, cap, _attach(_start_orphan(timeout), timeout), pyspy)
    except (_ProbeUnavailable, OSError) as exc:
        return PtraceFacts(scope, cap, None, pyspy, probe_error=str(exc))


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def driver_version(text: str) -> str:
    """``550.54.15`` from ``/proc/driver/nvidia/version`` (proprietary or open kernel module)."""
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", text)
    return match.group(1) if match else (text.splitlines() or ["unknown"])[0]


def cuda_version(local: str) -> str | None:
    """``12.8`` from a torch local version ``cu128``; None when it names no CUDA."""
    digits = local[2:] if local.startswith("cu") else ""
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 and digits.isdigit() else None


def versions() -> dict[str, str]:
    """torch, NCCL (CUDA builds only), CUDA, driver and Python, without importing torch."""
    found = {"python": platform.python_version()}
    torch = _version("torch")
    found["torch"] = torch or "not installed"
    local = torch.partition("+")[2] if torch else ""
    cuda_build = local.startswith("cu") or (
        torch is not None
        and not local
        and any("nvidia-nccl" in r for r in (metadata.distribution("torch").requires or []))
    )
    if cuda_build:
        found["cuda"] = (
            cuda_version(local)
            # CUDA 13's wheels dropped the suffix (torch 2.11+cu130 needs nvidia-cuda-runtime)
            or _version(
                "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime"
            )
            or "unknown"
        )
        found["nccl"] = (
            _version("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl")
            or "bundled in torch (version unknown)"
        )
    else:
        found["cuda"] = found["nccl"] = f"none ({local or 'no CUDA'} torch build)"
    try:
        found["driver"] = driver_version(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        found["driver"] = "none (no NVIDIA driver loaded)"
    return found
