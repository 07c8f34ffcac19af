"""`nccl-doctor launch [--lane L] [--config F] [--wrap] [--watch] [--job ID] -- CMD...`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from doctor.jobconfig.lanes import Lane


def launch(
    ctx: typer.Context,
    lane: Annotated[
        Lane | None,
        typer.Option(
            help="auto detects SLURM/torchrun node counts; default: [lane] kind, then auto"
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="nccl-doctor.toml to read")] = None,
    wrap: Annotated[
        bool,
        typer.Option(
            "--wrap", help="run the Python entrypoint in-process inside the restart wrapper"
        ),
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="detect a stall from progress, bundle the evidence, act by verdict "
            "([watch] in the config); exit 93 when the job must not be requeued",
        ),
    ] = False,
    job: Annotated[
        str | None, typer.Option(help="job id (default: TORCHELASTIC_RUN_ID or SLURM_JOB_ID)")
    ] = None,
) -> None:
    """Apply the env policy, gate on preflight, register the rank, run CMD (after --)."""
    from doctor.jobconfig.config import load_config
    from doctor.launch.prologue import launch as run_launch
    from doctor.torchjob.torchdep import require_torch

    if wrap:  # before the policy and the preflight gate: the wrapper cannot run at all
        require_torch("the restart wrapper (launch --wrap)")
    env = dict(os.environ)
    cfg = load_config(config, env, Path.cwd())
    raise typer.Exit(run_launch(ctx.args, cfg, lane.value if lane else None, wrap, job, env, watch))
