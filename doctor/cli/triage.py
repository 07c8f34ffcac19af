"""`nccl-doctor triage [--job ID | --pids P,P] [--once] [--json] [--bundle OUT] [--report FILE]
[--interval S] [--via slurm|ssh] [--hosts H,.. | --hostfile F] [--timeout S]`.

Without ``--job`` or ``--pids``, the only job on this host is triaged (several: they are listed).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from doctor.errors import EXIT_FOUND, EXIT_OK, NoSuchJobError, UsageError

DEFAULT_INTERVAL = 1.0
"""Seconds of sampling in one look: enough for a hung job's structure to show."""

if TYPE_CHECKING:
    from doctor.remote.reach import Reach
    from doctor.triage.collect import CollectOptions, JobRef
    from doctor.triage.snapshot import TriageSnapshot
    from doctor.triage.target import Target


def triage(
    job: Annotated[
        str | None,
        typer.Option(
            "--job",
            help="TORCHELASTIC_RUN_ID, SLURM_JOB_ID or a `nccl-doctor launch` job id",
            show_default=False,
        ),
    ] = None,
    pids: Annotated[
        str | None,
        typer.Option("--pids", help="rank processes, comma-separated", show_default=False),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="print the verdict and exit")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="print nccl-doctor/triage/v1 JSON")
    ] = False,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle", help="write every piece of evidence to OUT.tar.gz", show_default=False
        ),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="write the incident report to FILE (.md: Markdown for an issue; else HTML)",
            show_default=False,
        ),
    ] = None,
    interval: Annotated[
        float | None,
        typer.Option(
            "--interval",
            help="seconds of sampling per look (and between TUI refreshes); default 1, and"
            " a --once look that proves neither a hang nor progress looks again over 3",
            show_default=False,
        ),
    ] = None,
    via: Annotated[
        str | None,
        typer.Option(
            "--via",
            help="reach the job's hosts with `slurm` (srun --overlap) or `ssh`",
            show_default=False,
        ),
    ] = None,
    hosts: Annotated[
        str | None,
        typer.Option("--hosts", help="the job's hosts: h1,h2 or h[1-64]", show_default=False),
    ] = None,
    hostfile: Annotated[
        Path | None,
        typer.Option("--hostfile", help="a file of the job's hosts", show_default=False),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="seconds to wait for the other hosts' answers"),
    ] = 6.0,
) -> None:
    """Which rank hangs the job, why, and what to do: without stopping it."""
    from doctor.triage.collect import CollectOptions, JobRef
    from doctor.triage.discover import parse_pids
    from doctor.triage.export import write_triage_bundle
    from doctor.triage.sources.native import SLOW_NATIVE, native_missed
    from doctor.verdict.progress import LONGER_LOOK, needs_longer_look

    if job is not None and pids is not None:
        raise UsageError("name the job with one of --job ID or --pids P,P, not both")
    chosen = interval is not None
    interval = interval if interval is not None else DEFAULT_INTERVAL
    if not 0.05 <= interval <= 600:
        raise UsageError(f"--interval must be between 0.05 and 600 seconds, not {interval}")
    ref = JobRef(job=job, pids=tuple(parse_pids(pids)) if pids else ())
    options = CollectOptions(interval=interval, env=dict(os.environ))
    reach = _reach(job, via, hosts, hostfile, timeout, interval, options)
    if sys.stdout.isatty() and not (once or as_json or report):
        raise typer.Exit(_tui(ref, options, job or pids or "the job on this host", reach, timeout))
    snapshot = _look(ref, reach, options, timeout, spinner=not as_json)
    slower = replace(options, native_timeout=options.native_timeout * SLOW_NATIVE)
    if reach is None and native_missed(snapshot.evidence):
        print(
            f"a native stack dump took over {options.native_timeout:g} s (a loaded host?): "
            f"looking again with {slower.native_timeout:g} s for it",
            file=sys.stderr,
        )
        snapshot = _look_again(snapshot, ref, reach, slower, timeout, spinner=not as_json)
    longer = replace(
        options,
        interval=interval * LONGER_LOOK,
        samples=round(options.samples * LONGER_LOOK),
    )
    fits = reach is None or longer.interval + 1.0 < timeout  # the hosts' answer deadline
    if not chosen and fits and needs_longer_look(snapshot.verdict):
        print(
            f"nothing proved a hang or progress in {interval:g} s: "
            f"looking again over {longer.interval:g} s ({longer.samples} stack samples)",
            file=sys.stderr,
        )
        snapshot = _look_again(snapshot, ref, reach, longer, timeout, spinner=not as_json)
    if bundle is not None:
        write_triage_bundle(snapshot, bundle)
    if report is not None:
        from doctor.report.write import write_report

        fmt = "md" if report.suffix.lower() == ".md" else "html"
        write_report(snapshot.evidence, snapshot.analysis, report, fmt)
    _print(snapshot, as_json, bundle, _watch_events(ref, options), report)
    raise typer.Exit(EXIT_FOUND if snapshot.verdict.hang_class.is_hang else EXIT_OK)


def _reach(
    job: str | None,
    via: str | None,
    hosts: str | None,
    hostfile: Path | None,
    timeout: float,
    interval: float,
    options: CollectOptions,
) -> Reach | None:
    """How to reach the job's other hosts; None when it runs on this host alone."""
    if job is None:
        if via or hosts or hostfile:
            raise UsageError("--via, --hosts and --hostfile need --job")
        return None
    from doctor.remote.reach import reach_from_flags

    return reach_from_flags(job, via, hosts, hostfile, timeout, interval, options.env)


def _look(
    ref: JobRef, reach: Reach | None, options: CollectOptions, timeout: float, spinner: bool
) -> TriageSnapshot:
    """One look at the job: on this host, or through its hosts' collectors."""
    if reach is None:
        return _collect_once(ref, options, spinner)
    return _remote_once(reach, options, timeout)


def _look_again(
    first: TriageSnapshot,
    ref: JobRef,
    reach: Reach | None,
    options: CollectOptions,
    timeout: float,
    spinner: bool,
) -> TriageSnapshot:
    """A second look; when the job's ranks ended after the first, the first look is kept
    (a killed rank's peers can exit within a second: their evidence was already read)."""
    try:
        return _look(ref, reach, options, timeout, spinner)
    except NoSuchJobError:
        print(
            "the job's ranks ended before the second look: this is the first look's verdict",
            file=sys.stderr,
        )
        return first


def _remote_once(reach: Reach, options: CollectOptions, timeout: float) -> TriageSnapshot:
    from rich.console import Console

    from doctor.remote.hosts import fold
    from doctor.remote.reach import snapshot_round

    console = Console(stderr=True)
    if not console.is_terminal:
        return snapshot_round(reach, options.interval, timeout, options.env)
    with console.status(f"collecting from {fold(reach.hosts)} by {reach.via.value}"):
        return snapshot_round(reach, options.interval, timeout, options.env)


def _collect_once(ref: JobRef, options: CollectOptions, spinner: bool) -> TriageSnapshot:
    """One look; on a terminal, a spinner on stderr follows the collector's progress events."""
    from rich.console import Console

    from doctor.triage.collect import ProgressHook, collect_snapshot

    console = Console(stderr=True)
    if not (spinner and console.is_terminal):
        return collect_snapshot(ref, options)
    with console.status("finding the ranks") as status:

        class Spinner(ProgressHook):
            def discovered(self, target: Target) -> None:
                status.update(f"looking at {len(target.ranks)} ranks of {target.job}")

            def source_done(self, source: str, seconds: float, problems: int) -> None:
                status.update(f"{source} done after {seconds:.1f}s")

        return collect_snapshot(ref, options, Spinner())


def _tui(
    ref: JobRef, options: CollectOptions, title: str, reach: Reach | None, timeout: float
) -> int:
    from doctor.remote.reach import snapshot_round
    from doctor.triage.collect import collect_snapshot
    from doctor.triage.export import write_triage_bundle
    from doctor.triage.tui.app import run_tui

    if reach is None:
        ref.discover(options.env)  # a job that is not there is an input error, not a blank
    return run_tui(
        (lambda: collect_snapshot(ref, options))
        if reach is None
        else (lambda: snapshot_round(reach, options.interval, timeout, options.env)),
        options.interval,
        title,
        on_bundle=write_triage_bundle,
        on_recover=_recover_action(ref, options),
    )


def _recover_action(ref: JobRef, options: CollectOptions) -> Callable[[], str] | None:
    """The TUI's recover key, offered only for a job whose ranks run inside the wrapper."""
    from doctor.jobdir.registry import job_dir, read_states, valid_job_id

    if ref.job is None or not valid_job_id(ref.job):
        return None
    job, directory = ref.job, job_dir(ref.job, options.env)
    if not read_states(directory):
        return None

    def recover() -> str:
        from doctor.restart.recover import request_restart

        event = request_restart(directory, job, "requested from nccl-doctor triage", 60.0)
        return (
            f"job {job} restarted into iteration {event['iteration']}: "
            f"{event['world_size']} ranks re-entered"
        )

    return recover


def _watch_events(ref: JobRef, options: CollectOptions) -> list[dict[str, Any]]:
    """What the job's watcher did (``launch --watch``, ``nccl-doctor watch``), newest last."""
    from doctor.jobdir.registry import job_dir, valid_job_id
    from doctor.watch.events import read_watch_events

    if ref.job is None or not valid_job_id(ref.job):
        return []
    return read_watch_events(job_dir(ref.job, options.env))


def _print(
    snapshot: TriageSnapshot,
    as_json: bool,
    bundle: Path | None,
    events: list[dict[str, Any]],
    report: Path | None = None,
) -> None:
    from rich.console import Console

    from doctor.trust.safe_text import safe_text
    from doctor.verdict.render import render, to_json
    from doctor.watch.events import summary

    if as_json:
        doc = to_json(snapshot.evidence, snapshot.analysis)
        print(json.dumps({**doc, "watch_events": events} if events else doc, indent=2))
        return
    console = Console()
    console.print(render(snapshot.evidence, snapshot.analysis))
    # soft_wrap: a path is printed whole (the terminal wraps it), never cut at the console's
    # width into lines a user copies apart
    for event in events:
        console.print(f"watch: {summary(event)}", markup=False, highlight=False, soft_wrap=True)
    if bundle is not None:
        line = f"bundle written: {bundle} (re-judge it: nccl-doctor analyze {bundle})"
        console.print(safe_text(line), highlight=False, soft_wrap=True)
    if report is not None and str(report) != "-":
        console.print(safe_text(f"report written: {report}"), highlight=False, soft_wrap=True)
