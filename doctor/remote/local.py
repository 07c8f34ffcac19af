"""The host-local half of multi-host triage: this host's ranks of a job, as one document.

What ``nccl-doctor collect`` runs on each host (through srun or ssh): the
same discovery and sources as single-host triage, bounded by the caller's
budget so the host answers before the caller's deadline. A host with no
rank of the job left answers too: that is evidence (its ranks are gone).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from doctor import __version__
from doctor.errors import NoSuchJobError
from doctor.evidence import Evidence
from doctor.model import Skipped
from doctor.remote.document import to_document
from doctor.triage.collect import DEADLINE_SLACK, CollectOptions, collect_evidence
from doctor.triage.discover import discover_job
from doctor.triage.target import Target

STARTUP_S = 0.4
"""What starting Python and importing nccl-doctor costs before collection begins."""


def host_name(env: Mapping[str, str]) -> str:
    """The name the scheduler knows this host by (``SLURMD_NODENAME``), else its hostname."""
    return env.get("SLURMD_NODENAME") or socket.gethostname()


def fit_options(options: CollectOptions, budget: float | None) -> CollectOptions:
    """Shrink the probe timeout (then the window) so collection ends within ``budget``."""
    if budget is None:
        return options
    room = budget - STARTUP_S - DEADLINE_SLACK
    interval = min(options.interval, max(0.1, room * 0.5))
    probe = min(options.probe_timeout, max(0.1, room - interval))
    return replace(options, interval=interval, probe_timeout=probe)


def _local_ranks(target: Target) -> list[int]:
    return [r.rank for r in target.ranks] + [lost.rank for lost in target.lost]


def host_document(job: str, options: CollectOptions, budget: float | None = None) -> dict[str, Any]:
    """Discover and collect this host's ranks of ``job``; the host document."""
    start = time.monotonic()
    host = host_name(options.env)
    options = fit_options(options, budget)
    try:
        target = discover_job(job, options.env)
    except NoSuchJobError as exc:
        empty = Evidence(
            job,
            None,
            skipped=(Skipped(None, "discover", str(exc)),),
            seconds=time.monotonic() - start,
        )
        return to_document(empty, host, None, (), __version__)
    evidence = collect_evidence(target, options, started=start)
    evidence = replace(
        evidence,
        skipped=tuple(s for s in evidence.skipped if s.probe != "discover"),
    )
    world = evidence.world_size or target.world_size
    return to_document(evidence, host, world, _local_ranks(target), __version__)
