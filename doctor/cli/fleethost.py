"""`nccl-doctor fleet-host`: the host-side half of `preflight --job/--hosts` (hidden).

``--preflight``: this host's preflight as one ``host-preflight/v1`` document;
``--bench HOSTS``: this host's part of the benchmark among HOSTS (``doctor.fleet.worker``).
Either is printed as tagged lines (``doctor.remote.frames``) so many hosts can share one
srun stream.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated

import typer

from doctor.errors import UsageError


def fleet_host(
    preflight: Annotated[bool, typer.Option("--preflight", help="this host's preflight")] = False,
    lane: Annotated[str | None, typer.Option("--lane", help="the lane to judge")] = None,
    bench_hosts: Annotated[
        str | None, typer.Option("--bench", help="h1,h2,..: the benchmark among these hosts")
    ] = None,
    port: Annotated[int, typer.Option("--port", help="rendezvous port of group 0")] = 29650,
    nbytes: Annotated[int, typer.Option("--bytes", help="AllReduce size")] = 4 << 20,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds for the benchmark")] = 110.0,
) -> None:
    """One host's part of a fleet preflight."""
    from doctor import __version__
    from doctor.remote.frames import encode
    from doctor.remote.local import host_name

    env = dict(os.environ)
    if preflight == (bench_hosts is not None):
        raise UsageError("fleet-host runs one of --preflight or --bench HOSTS")
    if bench_hosts is not None:
        from doctor.fleet.worker import serve

        doc = serve(bench_hosts.split(","), host_name(env), port, nbytes, timeout)
    else:
        from doctor.checks.gather import gather
        from doctor.checks.registry import run_checks
        from doctor.fleet.hostdoc import to_document
        from doctor.jobconfig.config import load_config

        cfg = load_config(None, env, Path.cwd())
        facts = gather(env, cfg, lane, False, Path.cwd())
        report = run_checks(facts)
        doc = to_document(report, facts, host_name(env), time.time(), __version__)
    text = json.dumps(doc, separators=(",", ":"))
    print("\n".join(encode(host_name(env), text)), flush=True)
