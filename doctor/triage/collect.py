"""One triage observation: discover, run every source in parallel within a deadline, classify.

``collect_snapshot(ref, options, progress)`` is what the CLI (``--once``) and
the TUI (every ``interval``) call. It rediscovers the job each time, so a
rank that died since the last look is seen as lost. Sources run side by
side on daemon threads; the collection ends when all of them are done or at
the deadline (``interval`` + the longer of ``probe_timeout`` and
``native_timeout`` + a little), whichever comes
first, and a source still running then is reported as ``Skipped``. Nothing
here signals, stops or kills the job.

Progress goes to a ``ProgressHook`` (no-op methods, override what you
need), called on the thread that called ``collect_snapshot``: the CLI
spinner and the TUI worker consume the same events.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from doctor.evidence import Evidence
from doctor.model import Skipped
from doctor.ranks import rank_prose
from doctor.triage.discover import discover_pids
from doctor.triage.fanout import Done, Failed, fanout
from doctor.triage.hostjobs import find_job
from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.sources.flight import FlightSource
from doctor.triage.sources.interface import Collected, Source, SourceError
from doctor.triage.sources.logs import LogSource
from doctor.triage.sources.nvml import NvmlSource
from doctor.triage.sources.proc import ProcSource
from doctor.triage.sources.pyspy import PySpySource
from doctor.triage.sources.ras import RasSource
from doctor.triage.target import Target

DEADLINE_SLACK = 0.25


@dataclass(frozen=True)
class CollectOptions:
    """How to look. ``env`` is nccl-doctor's own environment (py-spy path, fake NVML, registry)."""

    interval: float = 1.0
    """The sampling window: stacks ``samples`` times and liveness twice across it."""
    samples: int = 5
    probe_timeout: float = 1.0
    """The most one probe of one rank (a py-spy dump, an agent request) may take."""
    native_timeout: float = 2.0
    """The most a native stack dump (``py-spy --native``, taken after the window where the
    Python stack cannot show a wait) may take: it reads libtorch's symbols, about 1 s."""
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class JobRef:
    """What the user named: ``--job ID``, ``--pids``, or neither (the only job here)."""

    job: str | None = None
    pids: tuple[int, ...] = ()

    def discover(self, env: Mapping[str, str]) -> Target:
        """The named job, else the listed pids, else the only job on this host."""
        return discover_pids(self.pids) if self.pids else find_job(self.job, env)


class ProgressHook:
    """Collection events for a UI; every method is optional to override."""

    def discovered(self, target: Target) -> None:
        """The ranks were found; sources start now."""

    def source_done(self, source: str, seconds: float, problems: int) -> None:
        """One source finished (``problems``: how many ``Skipped`` it reported)."""

    def finished(self, snapshot: TriageSnapshot) -> None:
        """The snapshot is ready."""


def default_sources(options: CollectOptions) -> list[Source]:
    """Every evidence source, each with its share of the sampling window."""
    return [
        PySpySource(
            options.env,
            window=options.interval,
            samples=options.samples,
            probe_timeout=options.probe_timeout,
        ),
        ProcSource(window=options.interval),
        LogSource(),
        RasSource(options.env, window=options.interval),
        NvmlSource(options.env),
        FlightSource(window=options.interval, probe_timeout=options.probe_timeout),
    ]


def _merge(
    target: Target, parts: Sequence[Collected], skipped: Sequence[Skipped], seconds: float
) -> Evidence:
    remote = (
        [
            Skipped(
                None,
                "discover",
                f"{rank_prose(target.remote)} run{'s' * (len(target.remote) == 1)} on other "
                "hosts: name them to triage them all from here (--hosts H,.. or --via slurm)",
            )
        ]
        if target.remote
        else []
    )
    launcher = f"{target.launcher.pid}: {target.launcher.cmdline}" if target.launcher else ""
    return Evidence(
        job=target.job,
        ranks_expected=target.ranks_expected,
        processes=tuple(sorted((x for p in parts for x in p.processes), key=lambda x: x.rank)),
        stacks=tuple(sorted((x for p in parts for x in p.stacks), key=lambda x: x.rank)),
        gpus=tuple(x for p in parts for x in p.gpus),
        logs=tuple(x for p in parts for x in p.logs),
        progress=tuple(
            sorted((x for p in parts for x in p.progress), key=lambda x: (x.rank, x.time_s))
        ),
        skipped=(
            tuple(remote)
            + target.refused
            + tuple(x for p in parts for x in p.skipped)
            + tuple(skipped)
        ),
        dumps=tuple(x for p in parts for x in p.dumps),
        unreadable_dumps=tuple(x for p in parts for x in p.unreadable_dumps),
        world_size=target.world_size,
        seconds=round(seconds, 3),
        launcher=launcher,
        fr_files=tuple(dict.fromkeys(str(f) for p in parts for f in p.fr_files)),
        log_files=tuple(dict.fromkeys(str(f) for p in parts for f in p.log_files)),
    )


def collect_evidence(
    target: Target,
    options: CollectOptions,
    sources: Sequence[Source] | None = None,
    progress: ProgressHook | None = None,
    started: float | None = None,
) -> Evidence:
    """Run ``sources`` (default: all) against ``target`` in parallel, until the deadline."""
    hook = progress or ProgressHook()
    start = time.monotonic() if started is None else started
    longest = max(options.probe_timeout, options.native_timeout)
    deadline = time.monotonic() + options.interval + longest + DEADLINE_SLACK
    chosen = list(sources if sources is not None else default_sources(options))
    by_name = {s.name: s for s in chosen}

    def report(name: str, outcome: Done[Collected] | Failed) -> None:
        problems = len(outcome.value.skipped) if isinstance(outcome, Done) else 1
        hook.source_done(name, time.monotonic() - start, problems)

    calls = {s.name: (lambda s=s: s.collect(target, deadline)) for s in chosen}
    outcomes = fanout(calls, deadline + 0.05, on_done=report)
    parts, skipped = [], []
    for name in by_name:
        outcome = outcomes.get(name)
        if isinstance(outcome, Done):
            parts.append(outcome.value)
        elif isinstance(outcome, Failed):
            error = outcome.error
            why = str(error) if isinstance(error, SourceError) else f"failed: {error!r}"
            skipped.append(Skipped(None, name, why))
        else:
            skipped.append(Skipped(None, name, "did not finish before the deadline"))
    return _merge(target, parts, skipped, time.monotonic() - start)


def collect_snapshot(
    ref: JobRef | Target,
    options: CollectOptions,
    progress: ProgressHook | None = None,
    sources: Sequence[Source] | None = None,
) -> TriageSnapshot:
    """Discover (again), collect and classify: the one call behind ``--once`` and the TUI.

    Raises ``NoSuchJobError`` when no rank of the job is left on this host.
    """
    from doctor.verdict.classify import analyse

    hook = progress or ProgressHook()
    start = time.monotonic()
    target = ref.discover(options.env) if isinstance(ref, JobRef) else ref
    hook.discovered(target)
    evidence = collect_evidence(target, options, sources, progress=hook, started=start)
    snapshot = TriageSnapshot(evidence, analyse(evidence), time.time())
    hook.finished(snapshot)
    return snapshot
