"""Which hosts a job runs on, how to reach them, and one round of collection within a deadline.

``plan_reach`` decides, in this order:

1. ``--hosts``/``--hostfile``: those hosts, by ssh (or by srun with ``--via slurm``);
2. a launch registry (``NCCL_DOCTOR_JOB_DIR`` on a shared filesystem) whose rank
   records name hosts other than this one: those hosts, by srun when SLURM knows
   the job, else by ssh;
3. a job id SLURM knows (``scontrol show job``): its nodes, by one srun step;
4. otherwise nothing: the job is judged on this host alone, as before.

``collect_round`` runs ``nccl-doctor collect`` on every host, merges what came
back by the deadline (or earlier, once nothing more can come: ``doctor.remote.ending``)
and returns one ``Evidence`` (``doctor.remote.merge``).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from doctor.errors import NoSuchJobError, UsageError
from doctor.evidence import Evidence
from doctor.jobdir.registry import JOB_DIR_ENV, read_ranks
from doctor.remote import probe
from doctor.remote.ending import PROBE_S, Ending, Watch, ending
from doctor.remote.merge import merge
from doctor.remote.slurm import collect_via_srun, job_nodes
from doctor.remote.ssh import collect_via_ssh
from doctor.remote.transport import HostAnswer, collect_argv
from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.target import Target

DEFAULT_TIMEOUT = 6.0
TRANSPORT_S = 0.6
"""Of the deadline: what starting srun/ssh and bringing the documents back costs."""
PORT_S = 3.0
"""The most ``scontrol show config`` may take to name slurmd's port."""


class Via(StrEnum):
    SLURM = "slurm"
    SSH = "ssh"


@dataclass(frozen=True)
class Reach:
    """How to reach every host of a job."""

    job: str
    via: Via
    hosts: tuple[str, ...]
    known_hosts: Mapping[int, str] = field(default_factory=dict)
    """Rank -> host, where a launch registry says so."""
    remote_env: Mapping[str, str] = field(default_factory=dict)
    """Variables the remote collect needs (the shared job directory)."""
    world_size: int | None = None


def plan_reach(
    job: str,
    env: Mapping[str, str],
    via: Via | None = None,
    hosts: Sequence[str] = (),
    local: Target | None = None,
) -> Reach | None:
    """How to reach the job's hosts (module docstring); None: this host alone."""
    if hosts:
        return Reach(job, via or Via.SSH, tuple(hosts))
    records = read_ranks(local.job_dir) if local is not None and local.job_dir else []
    here = socket.gethostname()
    if records and any(r.host != here for r in records):
        record_hosts = tuple(dict.fromkeys(r.host for r in records))
        known = {r.rank: r.host for r in records}
        chosen = via or (Via.SLURM if job_nodes(job, env) else Via.SSH)
        assert local is not None and local.job_dir is not None
        return Reach(
            job,
            chosen,
            record_hosts,
            known,
            {JOB_DIR_ENV: str(local.job_dir)},
            max(r.world_size for r in records),
        )
    if via is Via.SSH:
        raise UsageError("--via ssh needs the hosts: --hosts H1,H2 or --hostfile FILE")
    if local is not None and not local.remote and via is None:
        return None
    slurm = job_nodes(job, env)
    if slurm is None or not slurm.nodes:
        if via is Via.SLURM:
            state = f" (it is {slurm.state})" if slurm else ""
            raise NoSuchJobError(f"SLURM has no running job {job!r} with nodes{state}")
        return None
    return Reach(job, Via.SLURM, slurm.nodes)


def collect_round(
    reach: Reach, interval: float, timeout: float, env: Mapping[str, str]
) -> tuple[Evidence, tuple[tuple[str, str], ...]]:
    """Every host's document within ``timeout`` seconds, merged into one ``Evidence``;
    and the documents as received (a bundle keeps them)."""
    start = time.monotonic()
    budget = max(0.4, transport_wait(timeout) - TRANSPORT_S)
    command = collect_argv(reach.job, interval, budget, reach.remote_env)
    answers, ended = gather(reach.via, reach.job, reach.hosts, command, timeout, env)
    documents = tuple((h, a.text) for h, a in answers.items() if a.text is not None)
    return replace(
        merge(
            reach.job,
            reach.hosts,
            answers,
            time.monotonic() - start,
            known_hosts=reach.known_hosts,
            world_size=reach.world_size,
        ),
        ended=ended.value,
    ), documents


def gather(
    via: Via,
    job: str,
    hosts: Sequence[str],
    command: Sequence[str],
    timeout: float,
    env: Mapping[str, str],
    on_answer: Callable[[str], None] | None = None,
) -> tuple[dict[str, HostAnswer], Ending]:
    """Every host's answer by ``timeout`` seconds from now, and why the round ended;
    ``on_answer(host)`` as each host's answer completes (a progress bar).

    The transport gets the deadline less ``PROBE_S``. Beside it, every host gets a
    connect probe from the start, and once some host has answered, the round ends as
    soon as each silent one is proven unreachable (``doctor.remote.ending``); a silent
    host that takes connections is waited for until the transport's deadline. Each
    silent host's reason says whether it is cut off or only slow.
    """
    start = time.monotonic()
    wait = transport_wait(timeout)
    port = (lambda: probe.slurmd_port(env, PORT_S)) if via is Via.SLURM else lambda: probe.SSH_PORT
    watch = Watch(hosts, start + timeout, port)

    def arrived(host: str) -> None:
        watch.answer(host)
        if on_answer is not None:
            on_answer(host)

    if via is Via.SLURM:
        answers = collect_via_srun(job, hosts, command, wait, env, arrived, watch.done)
    else:
        answers = collect_via_ssh(hosts, command, wait, env, on_answer=arrived, stop=watch.done)
    reached = time.monotonic() >= start + wait
    why = watch.finish()
    answered = [h for h, a in answers.items() if a.text is not None]
    unreachable = {h for h, w in why.items() if w}
    return with_probe(answers, why), ending(hosts, answered, unreachable, reached)


def transport_wait(timeout: float) -> float:
    """What the transport gets of a round's ``timeout``: the rest is the silent hosts' probe."""
    return max(0.5, timeout - PROBE_S)


def with_probe(answers: Mapping[str, HostAnswer], why: Mapping[str, str]) -> dict[str, HostAnswer]:
    """``answers`` with each probed silent host's reason saying whether it is cut off
    (``why``: the probe's reason) or only slow (``why`` empty: it takes connections)."""
    out = dict(answers)
    for host, cause in why.items():
        if host not in answers or answers[host].text is not None:
            continue
        reason = answers[host].reason
        out[host] = replace(
            answers[host],
            reason=f"{cause}: cut off ({reason})"
            if cause
            else f"{reason} (the host takes connections)",
        )
    return out


def plan_job(
    job: str, env: Mapping[str, str], via: Via | None = None, hosts: Sequence[str] = ()
) -> Reach | None:
    """``plan_reach`` after looking on this host first: None when the job is all here.

    Raises ``NoSuchJobError`` when neither this host nor any way of reaching others
    knows the job.
    """
    from doctor.triage.hostjobs import find_job

    if hosts:
        return plan_reach(job, env, via, hosts)
    try:  # find_job, not discover_job: a --standalone alias or an ended torchrun job is here
        local: Target | None = find_job(job, env)
        missing: NoSuchJobError | None = None
    except NoSuchJobError as exc:
        local, missing = None, exc
    reach = plan_reach(job, env, via, (), local)
    if reach is None and missing is not None:
        raise missing
    return reach


def reach_from_flags(
    job: str,
    via: str | None,
    hosts: str | None,
    hostfile: Path | None,
    timeout: float,
    interval: float,
    env: Mapping[str, str],
) -> Reach | None:
    """``triage``'s flags checked and turned into a ``Reach`` (``plan_job``)."""
    from doctor.remote.hosts import parse_hosts, read_hostfile

    if hosts and hostfile:
        raise UsageError("name the hosts with one of --hosts or --hostfile, not both")
    if via is not None and via not in {v.value for v in Via}:
        raise UsageError(f"--via must be slurm or ssh, not {via!r}")
    if not interval + 1.0 < timeout <= 600:
        raise UsageError(
            f"--timeout must be more than --interval + 1 s and at most 600 s, not {timeout}"
        )
    names = parse_hosts(hosts) if hosts else read_hostfile(hostfile) if hostfile else []
    return plan_job(job, env, Via(via) if via else None, names)


def snapshot_round(
    reach: Reach, interval: float, timeout: float, env: Mapping[str, str]
) -> TriageSnapshot:
    """One multi-host look, judged: what ``triage`` shows, bundles and prints."""
    from doctor.verdict.classify import analyse

    evidence, documents = collect_round(reach, interval, timeout, env)
    return TriageSnapshot(evidence, analyse(evidence), time.time(), documents)
