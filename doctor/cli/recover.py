"""`nccl-doctor recover --job ID [--reason TEXT]`: graceful in-process restart of every rank."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from doctor.errors import EXIT_FOUND, EXIT_OK, UsageError


def recover(
    job: Annotated[str, typer.Option(help="job id, as registered by nccl-doctor launch")],
    reason: Annotated[
        str, typer.Option(help="why; recorded in the restart event")
    ] = "requested by nccl-doctor recover",
    timeout: Annotated[float, typer.Option(help="seconds to wait for every rank")] = 60.0,
    json_out: Annotated[bool, typer.Option("--json", help="print the restart event")] = False,
) -> None:
    """Ask the wrapper of every rank for a restart; report when every rank re-entered."""
    from doctor.errors import NoSuchJobError
    from doctor.jobdir.registry import job_dir
    from doctor.restart.recover import RecoverTimeout, request_restart
    from doctor.trust.escape import escape_control

    if not 0 < timeout <= 86400:
        raise UsageError(f"--timeout must be between 0 and 86400 seconds, not {timeout:g}")
    try:
        directory = job_dir(job, dict(os.environ))
    except ValueError as exc:
        raise NoSuchJobError(str(exc)) from None
    try:
        event = request_restart(directory, job, reason, timeout)
    except RecoverTimeout as exc:
        print(f"nccl-doctor recover: {escape_control(str(exc))}")
        raise typer.Exit(EXIT_FOUND) from None
    if json_out:
        print(json.dumps(event, sort_keys=True))
    else:
        print(
            f"nccl-doctor recover: job {job} restarted into iteration {event['iteration']}: "
            f"{event['world_size']} ranks re-entered "
            f"{event['phases'].get('reentry', 0):.2f}s after the request"
        )
    raise typer.Exit(EXIT_OK)
