"""`nccl-doctor collect --job ID [--json]`: this host's evidence about a job, as one document."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer

from doctor.errors import UsageError


def collect(
    job: Annotated[
        str,
        typer.Option(
            "--job",
            help="TORCHELASTIC_RUN_ID, SLURM_JOB_ID or a launch job id",
            show_default=False,
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="print nccl-doctor/host-evidence/v1 JSON")
    ] = False,
    interval: Annotated[float, typer.Option("--interval", help="seconds of sampling")] = 1.0,
    budget: Annotated[
        float | None,
        typer.Option("--budget", help="seconds the whole collection may take", show_default=False),
    ] = None,
    until: Annotated[
        float | None,
        typer.Option("--until", hidden=True, help="the same deadline, as a wall-clock time"),
    ] = None,
    frames: Annotated[
        bool,
        typer.Option("--frames", hidden=True, help="tagged short lines, for one srun stream"),
    ] = False,
) -> None:
    """The host-local half of triage: what `triage` runs on each host of a multi-host job."""
    from doctor.remote.local import host_document, host_name
    from doctor.triage.collect import CollectOptions

    if not 0.05 <= interval <= 600:
        raise UsageError(f"--interval must be between 0.05 and 600 seconds, not {interval}")
    env = dict(os.environ)
    if until is not None:
        import time

        left = until - time.time()
        budget = left if budget is None else min(budget, left)
    doc = host_document(job, CollectOptions(interval=interval, env=env), budget)
    text = json.dumps(doc, separators=(",", ":"))
    if frames:
        from doctor.remote.frames import encode

        print("\n".join(encode(host_name(env), text)), flush=True)
    elif as_json:
        print(text)
    else:
        _summary(doc)


def _summary(doc: dict[str, Any]) -> None:
    """One line per fact for a person; the document itself is what --json prints."""
    from doctor.ranks import rank_ranges
    from doctor.trust.escape import escape_control

    procs = doc.get("processes") or []
    alive = [p["rank"] for p in procs if p.get("alive")]
    lost = [p["rank"] for p in procs if not p.get("alive")]
    host, job = escape_control(str(doc["host"])), escape_control(str(doc["job"]))
    print(f"host {host}: job {job}, ranks {rank_ranges(alive) or 'none'} alive")
    if lost:
        print(f"  lost: ranks {rank_ranges(lost)}")
    print(f"  {len(doc.get('classes') or [])} stack classes; --json prints the whole document")
