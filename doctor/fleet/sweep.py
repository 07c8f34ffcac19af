"""Which hosts, by which transport, and every host's preflight within one deadline.

The hosts come from a SLURM allocation (``--job``: ``scontrol show job``, one
``srun --overlap`` step, the caller's own job only) or a host list (``--hosts``,
``--hostfile``: ssh, or srun with ``--via slurm``), the way ``triage --job`` reaches
them (``doctor.remote``). Each host runs ``nccl-doctor fleet-host --preflight``;
the round is ``triage``'s (``doctor.remote.reach.gather``): a silent host gets the
connect probe, its reason says whether it is cut off or only slow, and the sweep ends
early once every silent host is proven unreachable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from doctor.errors import NoSuchJobError, UsageError
from doctor.fleet.hostdoc import read_document
from doctor.fleet.merge import HostResult
from doctor.remote.document import DocumentError
from doctor.remote.reach import Via, gather
from doctor.remote.slurm import SlurmJob, job_nodes
from doctor.remote.transport import host_argv

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class FleetTarget:
    via: Via
    hosts: tuple[str, ...]
    job: str | None = None


def check_allocation(job: str, found: SlurmJob | None, uid: int) -> tuple[str, ...]:
    """The allocation's hosts, or one sentence on why it cannot be swept."""
    if found is None:
        raise NoSuchJobError(f"SLURM knows no job {job!r} (scontrol show job {job} found none)")
    if found.user is not None and uid != 0 and found.user != uid:
        raise UsageError(
            f"job {job} belongs to uid {found.user}, not to you (uid {uid}): "
            "preflight only steps into your own allocations"
        )
    if not found.nodes:
        raise UsageError(f"job {job} holds no nodes (it is {found.state}): nothing to preflight")
    return found.nodes


def plan_target(
    job: str | None,
    via: str | None,
    hosts: str | None,
    hostfile: Path | None,
    env: Mapping[str, str],
) -> FleetTarget:
    """The flags checked and turned into hosts and a transport."""
    from doctor.remote.hosts import parse_hosts, read_hostfile

    if hosts and hostfile:
        raise UsageError("name the hosts with one of --hosts or --hostfile, not both")
    if via is not None and via not in {v.value for v in Via}:
        raise UsageError(f"--via must be slurm or ssh, not {via!r}")
    names = parse_hosts(hosts) if hosts else read_hostfile(hostfile) if hostfile else []
    if job is not None:
        found = check_allocation(job, job_nodes(job, env), os.getuid())
        if names:
            extra = sorted(set(names) - set(found))
            if extra:
                raise UsageError(f"--hosts names {', '.join(extra)}, not in job {job}")
        return FleetTarget(Via(via) if via else Via.SLURM, tuple(names or found), job)
    if via == Via.SLURM.value:
        raise UsageError("--via slurm needs --job ID: srun steps into an allocation")
    return FleetTarget(Via.SSH, tuple(names))


def sweep(
    target: FleetTarget,
    lane: str,
    timeout: float,
    env: Mapping[str, str],
    on_answer: Callable[[str], None] | None = None,
) -> dict[str, HostResult]:
    """Every host's preflight, read back, by ``timeout`` seconds from now."""
    sent = time.time()
    argv = host_argv(["fleet-host", "--preflight", "--lane", lane])
    answers, _ended = gather(
        target.via, target.job or "", target.hosts, argv, timeout, env, on_answer
    )
    results, shared = {}, {}  # type: ignore[var-annotated]
    for host in target.hosts:
        a = answers[host]
        if a.text is None:
            results[host] = HostResult(host, None, a.reason, sent)
            continue
        try:
            doc = read_document(a.text, host, shared)
        except DocumentError as exc:
            results[host] = HostResult(host, None, f"sent an unreadable document ({exc})", sent)
            continue
        results[host] = HostResult(host, doc, "", sent, sent + (a.seconds or 0.0))
    return results


def bench_hosts(answered: Sequence[str]) -> tuple[str, ...]:
    """The hosts the benchmark runs on: those that answered preflight (at least two)."""
    if len(answered) < 2:
        raise UsageError("--bench across hosts needs at least two hosts that answered")
    return tuple(answered)
