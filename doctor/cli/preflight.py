"""`nccl-doctor preflight`: is this environment going to hang, crash at bootstrap, or be
unrecoverable? Builds the facts, runs the registry, hands the report to a renderer.
Only light modules are imported (no torch, no NVML unless a GPU check needs it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from doctor.errors import EXIT_FOUND, EXIT_OK, UsageError
from doctor.jobconfig.lanes import Lane
from doctor.model import Severity

if TYPE_CHECKING:
    from doctor.checks.report import Report


def exit_code(report: Report, strict: bool) -> int:
    """1 when anything fails (or, with ``--strict``, warns); else 0."""
    bad = report.count(Severity.FAIL) + (report.count(Severity.WARN) if strict else 0)
    return EXIT_FOUND if bad else EXIT_OK


def preflight(
    lane: Annotated[
        Lane | None,
        typer.Option(
            help="auto detects SLURM/torchrun node counts; default: [lane] kind, then auto"
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="nccl-doctor.toml to read (default: ./nccl-doctor.toml or pyproject.toml)"
        ),
    ] = None,
    bench: Annotated[
        bool, typer.Option("--bench", help="also run the AllReduce benchmark")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON for machines")] = False,
    emit_env: Annotated[
        bool,
        typer.Option("--emit-env", help="print export/unset lines that make the environment pass"),
    ] = False,
    strict: Annotated[bool, typer.Option("--strict", help="exit 1 on warnings too")] = False,
    job: Annotated[
        str | None,
        typer.Option("--job", help="every host of this SLURM allocation (srun --overlap)"),
    ] = None,
    hosts: Annotated[
        str | None, typer.Option("--hosts", help="every host of h1,h2 or h[1-64] (ssh)")
    ] = None,
    hostfile: Annotated[
        Path | None, typer.Option("--hostfile", help="every host of a host file (ssh)")
    ] = None,
    via: Annotated[
        str | None, typer.Option("--via", help="reach the hosts with `slurm` or `ssh`")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds to wait for the hosts' preflights")
    ] = 30.0,
) -> None:
    """Check this host and environment before launch (exit 1 if anything fails); with
    --job/--hosts/--hostfile, every host of the allocation, merged."""
    if job is not None or hosts is not None or hostfile is not None:
        from doctor.cli.fleet import fleet_preflight

        if emit_env:
            raise UsageError("--emit-env is for one host; drop it with --job/--hosts")
        lane_value = lane.value if lane and lane is not Lane.AUTO else "multi-node"
        opts = (lane_value, bench, json_out, strict, timeout)
        raise typer.Exit(fleet_preflight(job, via, hosts, hostfile, *opts))
    from doctor.checks import fixes, render
    from doctor.checks.gather import gather
    from doctor.checks.registry import run_checks
    from doctor.jobconfig.config import load_config

    if json_out and emit_env:
        raise UsageError("--json and --emit-env print different things; choose one")
    env = dict(os.environ)
    cfg = load_config(config, env, Path.cwd())
    facts = gather(env, cfg, lane.value if lane else None, bench, Path.cwd())
    report = run_checks(facts)
    if emit_env:
        snippet, unfixed = fixes.emit_env(report.findings)
        print(snippet)
        raise typer.Exit(EXIT_FOUND if unfixed else EXIT_OK)
    if json_out:
        print(render.to_json(report))
    else:
        from rich.console import Console

        render.print_report(report, Console(file=sys.stdout))
    raise typer.Exit(exit_code(report, strict))
