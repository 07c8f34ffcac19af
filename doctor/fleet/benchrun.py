"""The fleet benchmark from the login node: one step on every host, rank 0's outcome read back.

``fleet-host --bench`` (``doctor.fleet.worker``) runs on every host through the
transport that reached it for preflight (one ``srun --overlap`` step, or ssh); the
hosts run the whole search among themselves, and rank 0 (the first host) sends the
outcome. Nothing here talks to the hosts but the transport.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence

from doctor.fleet.benchjudge import FleetBench, bench_from_json
from doctor.remote.document import DocumentError
from doctor.remote.slurm import collect_via_srun
from doctor.remote.ssh import collect_via_ssh
from doctor.remote.transport import host_argv

BENCH_BYTES = 4 << 20
BENCH_TIMEOUT = 120.0
PORT = 29650


def run_bench(
    hosts: Sequence[str],
    job: str | None,
    env: Mapping[str, str],
    timeout: float = BENCH_TIMEOUT,
    nbytes: int = BENCH_BYTES,
    port: int = PORT,
) -> FleetBench | str:
    """The benchmark's outcome, or why there is none (one sentence)."""
    args = ["fleet-host", "--bench", ",".join(hosts), "--port", str(port)]
    args += ["--bytes", str(nbytes), "--timeout", f"{max(10.0, timeout - 10):g}"]
    argv = host_argv(args)
    start = time.monotonic()
    if job is not None:
        answers = collect_via_srun(job, hosts, argv, timeout, env)
    else:
        answers = collect_via_ssh(hosts, argv, timeout, env)
    first = answers[hosts[0]]
    if first.text is None:
        silent = [f"{h}: {a.reason}" for h, a in answers.items() if a.text is None]
        return "the benchmark did not finish: " + "; ".join(silent)[:400]
    try:
        data = json.loads(first.text)
        if not isinstance(data, dict) or "bench" not in data:
            raise DocumentError(
                str(data.get("error", "no outcome")) if isinstance(data, dict) else ""
            )
        found = bench_from_json(data["bench"])
    except (ValueError, DocumentError) as exc:
        return f"the benchmark's outcome from {hosts[0]} is unreadable ({exc})"
    return dataclasses.replace(found, wall_seconds=time.monotonic() - start)
