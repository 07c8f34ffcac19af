"""What a rank publishes for triage: the wrapper's state in the job registry, and its checks."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from doctor.jobdir.registry import write_state
from doctor.model import Severity
from doctor.restart.timeouts import judge, probe_default_group
from doctor.trust.escape import escape_control

if TYPE_CHECKING:
    from doctor.restart.hooks import WrapperSettings
    from doctor.restart.monitor_thread import IterationContext
    from doctor.restart.options import RestartOptions
    from doctor.restart.session import Session
    from doctor.restart.store import RestartStore
    from doctor.restart.watchdog import SharedProgress
    from doctor.trust.process_identity import ProcessId


class PublishedCall(Protocol):
    """What ``publish`` reads of a running ``CallWrapper`` (structural: this module sits
    below ``doctor.restart.call``, which calls it)."""

    job: str
    directory: Path
    identity: ProcessId
    """This rank's process (pid and start time), for readers to check it still runs."""
    initial_rank: int
    initial_world_size: int
    rank: int
    world_size: int
    active: bool
    last_fault: dict[str, Any] | None
    pg_findings: list[str]
    pg_findings_checked: int
    opt: RestartOptions
    progress: SharedProgress
    session: Session
    rs: RestartStore
    wrapper: WrapperSettings


def publish(call: PublishedCall, ctx: IterationContext | None) -> None:
    """Write ``state-<rank>.json`` (called from the monitor thread every heartbeat interval)."""
    auto, _, step, iteration, phase = call.progress.read()
    if ctx is not None and not call.pg_findings_checked == iteration:
        _check_group(call, iteration)
    session = call.session
    write_state(
        call.directory,
        call.initial_rank,
        {
            "job": call.job,
            "pid": call.identity.pid,
            "pid_start": call.identity.start,
            "initial_rank": call.initial_rank,
            "initial_world_size": call.initial_world_size,
            "rank": call.rank,
            "world_size": call.world_size,
            "iteration": iteration,
            "phase": phase.name.lower(),
            "active": call.active,
            "heartbeat": time.time() - (time.monotonic() - auto),
            "step_time": step or None,
            "last_fault": call.last_fault,
            "store": f"{session.host}:{session.port}",
            "store_prefix": session.prefix,
            "timeout_findings": call.pg_findings,
            "updated_at": time.time(),
        },
    )


def _check_group(call: PublishedCall, iteration: int) -> None:
    probe = probe_default_group()
    if probe is None:
        return
    call.pg_findings_checked = iteration
    backend, seconds = probe
    findings = judge(backend, seconds, call.opt, os.environ)
    said_before = set(call.pg_findings)
    call.pg_findings = [f"{f.severity.value} {f.check}: {f.message}" for f in findings]
    for line in (line for line in call.pg_findings if line not in said_before):
        # each restart's new group repeats the last one's: said once, not once a restart
        shown = escape_control(line)  # findings quote the environment's values
        print(f"nccl-doctor wrapper[{call.initial_rank}]: {shown}", file=sys.stderr, flush=True)
    failed = [f for f in findings if f.severity == Severity.FAIL]
    if failed and call.wrapper.timeout_policy == "refuse":
        call.rs.record_fault(
            iteration,
            {
                "cause": "refused",
                "rank": call.initial_rank,
                "time": time.time(),
                "exception": failed[0].message,
            },
        )
