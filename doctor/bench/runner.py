"""Start the ranks of a bench run, or join the job we are already a rank of.

Local runs start ``nproc`` interpreters (``python -m doctor.bench.worker``) on
127.0.0.1, read rank 0's JSON lines for progress, and always reap every child
(terminate, kill, wait) even on a timeout or a failed rank. Inside a torchrun
or srun job (``RANK``/``WORLD_SIZE``, or ``SLURM_PROCID``/``SLURM_NTASKS``, with
``MASTER_ADDR``/``MASTER_PORT``) every rank runs the worker in-process.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import IO, Any

from doctor.bench.result import Measured
from doctor.bench.worker import Emit, WorkerSpec, run_rank
from doctor.errors import DoctorError
from doctor.trust.subproc import free_port, stop_all


class BenchError(DoctorError):
    """The benchmark could not run: a rank failed to start, crashed or timed out."""


def job_env(env: Mapping[str, str]) -> dict[str, str] | None:
    """The rank variables of the job we run inside, or None when we are not a rank."""
    if "RANK" in env and "WORLD_SIZE" in env:
        ranks = {
            "RANK": env["RANK"],
            "WORLD_SIZE": env["WORLD_SIZE"],
            "LOCAL_RANK": env.get("LOCAL_RANK", env["RANK"]),
        }
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        ranks = {
            "RANK": env["SLURM_PROCID"],
            "WORLD_SIZE": env["SLURM_NTASKS"],
            "LOCAL_RANK": env.get("SLURM_LOCALID", env["SLURM_PROCID"]),
        }
    else:
        return None
    if "MASTER_ADDR" not in env or "MASTER_PORT" not in env:
        raise BenchError("inside a job, bench needs MASTER_ADDR and MASTER_PORT to join its ranks")
    return {**env, **ranks}


def run_in_job(spec: WorkerSpec, env: Mapping[str, str], emit: Emit) -> Measured | None:
    """Run this rank's part; rank 0 gets the measurements."""
    ranks = job_env(env)
    assert ranks is not None
    return run_rank(spec, ranks, emit)


def _child_env(
    env: Mapping[str, str], rank: int, nproc: int, port: int, backend: str
) -> dict[str, str]:
    child = {k: v for k, v in env.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    child.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(nproc),
        PYTHONUNBUFFERED="1",
    )
    child.setdefault("OMP_NUM_THREADS", "1")
    if backend == "gloo":
        child.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return child


def _last_line(stream: IO[bytes]) -> str:
    stream.seek(0)
    lines = [ln for ln in stream.read().decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "no output"


def run_local(
    spec: WorkerSpec, nproc: int, env: Mapping[str, str], emit: Emit, timeout_s: float
) -> Measured:
    """Start ``nproc`` local ranks, relay rank 0's progress, return its measurements."""
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    errs: list[IO[bytes]] = []
    try:
        for rank in range(nproc):
            err = tempfile.TemporaryFile()
            errs.append(err)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "doctor.bench.worker", spec.to_argv()],
                    stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    env=_child_env(env, rank, nproc, port, spec.backend),
                )
            )
        return _collect(procs, errs, emit, time.monotonic() + timeout_s)
    finally:
        stop_all(procs)
        for proc in procs:
            if proc.stdout:
                proc.stdout.close()
        for log in errs:
            log.close()


def _collect(
    procs: list[subprocess.Popen[bytes]], errs: list[IO[bytes]], emit: Emit, deadline: float
) -> Measured:
    assert procs[0].stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(procs[0].stdout, selectors.EVENT_READ)
    buffer = b""
    result: dict[str, Any] | None = None
    try:
        while result is None:
            if time.monotonic() > deadline:
                raise BenchError("the benchmark ranks did not finish in time")
            for rank, proc in enumerate(procs):
                code = proc.poll()
                if code not in (None, 0):
                    raise BenchError(
                        f"rank {rank} exited with code {code}: {_last_line(errs[rank])}"
                    )
            if not selector.select(timeout=0.2):
                if procs[0].poll() == 0:
                    raise BenchError("rank 0 finished without a result")
                continue
            chunk = procs[0].stdout.read1(65536)  # type: ignore[attr-defined]
            if not chunk and procs[0].poll() is not None:
                raise BenchError(f"rank 0 stopped: {_last_line(errs[0])}")
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a library printed to stdout; only our JSON lines count
                if event.get("event") == "result":
                    result = event
                else:
                    emit(event)
    finally:
        selector.close()
    return Measured.from_json(result)
