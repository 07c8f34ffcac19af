"""One JSON line per decision of the watcher, beside the wrapper's restart events.

``<jobdir>/events.jsonl`` holds both kinds (``schema`` tells them apart); each
watcher line says what was detected, what the diagnosis found, which bundle holds
the evidence, what was done and why. ``triage`` shows them with the job.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doctor.errors import EXIT_NO_REQUEUE
from doctor.jobconfig.watch_settings import Action
from doctor.ranks import rank_ranges
from doctor.trust.escape import escape_control
from doctor.trust.safeio import UnsafePath, open_append, private_dir, read_text
from doctor.watch.detector import Stall
from doctor.watch.diagnose import Diagnosis
from doctor.watch.policy import Decision

SCHEMA = "nccl-doctor/watch-event/v1"
EVENTS = "events.jsonl"
MAX_EVENTS_BYTES = 16 * 1024 * 1024
"""The bound on the events file read for triage (a line is about 2 KiB)."""


def build_event(
    job: str, stall: Stall, diagnosis: Diagnosis, decision: Decision, outcome: str, now: float
) -> dict[str, Any]:
    """The event line of one decision (pure; ``now`` is wall-clock time)."""
    verdict = diagnosis.snapshot.verdict
    mono_offset = now - time.monotonic()
    return {
        "schema": SCHEMA,
        "job": job,
        "time": now,
        "action": decision.action.value,
        "requested": decision.requested.value,
        "reason": decision.reason,
        "outcome": outcome,
        "exit_code": decision.exit_code,
        "ranks": list(decision.ranks),
        "hosts": list(decision.hosts),
        "verdict": verdict.to_json(),
        "place": diagnosis.place,
        "bundle": str(diagnosis.bundle),
        "detection": {
            "stalled_ranks": list(stall.ranks),
            "stalled_for": round(stall.stalled_for, 3),
            "step_time": round(stall.step_time, 4),
            "threshold": round(stall.threshold, 3),
            "source": stall.source,
            "last_progress_at": round(stall.since + mono_offset, 3),
        },
        "diagnosis_seconds": round(diagnosis.seconds, 3),
    }


def summary(event: Mapping[str, Any]) -> str:
    """One line a person reads: verdict, culprits, action and why, the bundle. The event
    was read back from a file in the job's folder: its text is shown escaped (one line,
    nothing the terminal obeys) and a field of the wrong type reads as nothing."""
    verdict = _mapping(event.get("verdict"))
    listed = verdict.get("culprit_ranks")
    culprits = [r for r in listed if type(r) is int] if isinstance(listed, list) else []
    who = f" on rank {rank_ranges(culprits)}" if culprits else ""
    action = event.get("action")
    if action == Action.STOP.value:
        code = event.get("exit_code")
        hosts = event.get("hosts")
        named = ", ".join(map(str, hosts)) if isinstance(hosts, list) and hosts else "the host"
        meaning = "do not requeue" if code == EXIT_NO_REQUEUE else f"requeue without {named}"
        head = f"stopped job {event.get('job')}: {verdict.get('hang_class')}{who}"
        line = (
            f"{head} ({event.get('reason')}); bundle {event.get('bundle')}; exit {code} ({meaning})"
        )
        return escape_control(line)
    detected = _mapping(event.get("detection"))
    line = (
        f"{action} job {event.get('job')}: {verdict.get('hang_class')}{who} after "
        f"{_seconds(detected.get('stalled_for')):.1f}s without progress "
        f"(step {_seconds(detected.get('step_time')):.2f}s); {event.get('reason')}; "
        f"{event.get('outcome')}; bundle {event.get('bundle')}"
    )
    return escape_control(line)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if math.isfinite(value) else 0.0


def record_event(directory: Path, event: Mapping[str, Any]) -> None:
    """Append the event to the job's events file and print its summary line to stderr."""
    fd = open_append(private_dir(directory) / EVENTS)
    try:
        os.write(fd, (json.dumps(event, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)
    print(f"nccl-doctor watch: {summary(event)}", file=sys.stderr, flush=True)


def read_watch_events(directory: Path, limit: int = 20) -> list[dict[str, Any]]:
    """The newest ``limit`` watcher events of a job (restart events are left out)."""
    try:
        lines = read_text(directory / EVENTS, MAX_EVENTS_BYTES).splitlines()
    except (OSError, UnsafePath):
        return []
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("schema") == SCHEMA:
            events.append(event)
    return events[-limit:]
