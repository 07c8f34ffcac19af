"""`preflight --job ID | --hosts H | --hostfile F`: the allocation's preflight, merged."""

from __future__ import annotations

import json
import os
from pathlib import Path

from doctor.errors import EXIT_FOUND, EXIT_OK, UsageError
from doctor.model import Severity


def fleet_preflight(
    job: str | None,
    via: str | None,
    hosts: str | None,
    hostfile: Path | None,
    lane: str,
    bench: bool,
    json_out: bool,
    strict: bool,
    timeout: float,
) -> int:
    """Sweep, merge, print; the exit code of single-host preflight (1: something fails)."""
    from rich.console import Console

    from doctor.fleet.pipeline import run_fleet
    from doctor.fleet.render import all_findings, fleet_renderable, to_json
    from doctor.fleet.sweep import plan_target

    if not 1 <= timeout <= 600:
        raise UsageError(f"--timeout must be between 1 and 600 seconds, not {timeout}")
    env = dict(os.environ)
    target = plan_target(job, via, hosts, hostfile, env)
    with _Progress(len(target.hosts), quiet=json_out) as progress:
        report, measured = run_fleet(
            target, lane, timeout, strict, bench, env, progress.answered, progress.round
        )
    if json_out:
        print(json.dumps(to_json(report, measured), indent=2))
    else:
        Console(highlight=False).print(fleet_renderable(report, measured))
    bad = {Severity.FAIL, Severity.WARN} if strict else {Severity.FAIL}
    return EXIT_FOUND if any(f.severity in bad for f in all_findings(report, measured)) else EXIT_OK


class _Progress:
    """Hosts answered, then benchmark rounds, on stderr; silent off a terminal or under --json."""

    def __init__(self, hosts: int, quiet: bool) -> None:
        from doctor.cli.progress import stderr_bar

        self.bar = stderr_bar(quiet)
        self.task = self.bar.add_task("hosts answered", total=hosts)

    def __enter__(self) -> _Progress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def answered(self, host: str) -> None:
        self.bar.update(self.task, advance=1)

    def round(self, hosts: int) -> None:
        self.bar.update(self.task, description=f"AllReduce rounds among {hosts} hosts")
