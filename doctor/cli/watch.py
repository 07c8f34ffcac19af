"""`nccl-doctor watch --job ID [--config FILE]`: the launch watcher's loop, run from outside."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer


def watch(
    job: Annotated[
        str,
        typer.Option(help="TORCHELASTIC_RUN_ID, SLURM_JOB_ID or a `nccl-doctor launch` job id"),
    ],
    config: Annotated[Path | None, typer.Option(help="nccl-doctor.toml to read")] = None,
) -> None:
    """Detect a stall from progress, bundle the evidence, act by verdict; until the job ends.

    Exit 0 when the job ended, 93/94 when it was stopped (do not requeue / requeue
    without a host), 1 when a hang was found that nothing here can cure in place (the
    ranks do not run inside the restart wrapper).
    """
    from doctor.errors import NoSuchJobError, UsageError
    from doctor.jobconfig.config import load_config
    from doctor.jobdir.registry import job_dir
    from doctor.triage.discover import discover_job
    from doctor.watch.diagnose import job_collect
    from doctor.watch.roster import DiscoveryRoster
    from doctor.watch.watcher import (
        DIAGNOSIS_WINDOW,
        Watcher,
        run_and_report,
        running_watcher,
    )

    env = dict(os.environ)
    settings = load_config(config, env, Path.cwd()).watch
    discover_job(job, env)  # a job that is not there is an input error, now
    try:
        directory = job_dir(job, env)
    except ValueError as exc:
        raise NoSuchJobError(str(exc)) from None
    if (pid := running_watcher(directory)) is not None:
        raise UsageError(f"job {job} is already watched by its own watcher (pid {pid})")
    watcher = Watcher(
        job,
        directory,
        settings,
        job_collect(job, env, DIAGNOSIS_WINDOW),
        DiscoveryRoster(job, env, settings.sample_interval),
        signal_ranks=False,
    )
    raise typer.Exit(run_and_report(watcher))
