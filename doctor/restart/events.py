"""One JSON event per restart, built from every rank's phase times.

Each rank writes its own times (detect, abort, delivered, barrier, reentry;
wall clock) to the store when it re-enters the function; rank 0 of the new
iteration gathers them, and ``build_event`` (pure) turns them into the event:
each phase is the slowest rank's time since the fault. The event goes to
stderr, to ``<jobdir>/events.jsonl`` and to the store (where ``recover``
waits for it).
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from doctor.restart.store import RestartStore
from doctor.trust.safeio import open_append, private_dir

SCHEMA = "nccl-doctor/restart-event/v1"
PHASES = ("detect", "abort", "delivered", "barrier", "reentry")


def build_event(
    job: str | None,
    iteration: int,
    fault: dict[str, Any],
    faults: list[dict[str, Any]],
    per_rank: dict[int, dict[str, float]],
    world_size: int,
    terminated: list[int],
) -> dict[str, Any]:
    """The restart event: cause, who started it, and phase times in seconds after the fault."""
    start = float(fault.get("time") or min(min(p.values()) for p in per_rank.values()))
    phases = {}
    for phase in PHASES:
        seen = [p[phase] - start for p in per_rank.values() if phase in p]
        if seen:
            phases[phase] = round(max(seen), 4)
    others = sorted({f["rank"] for f in faults if f.get("rank") not in (None, fault.get("rank"))})
    event: dict[str, Any] = {
        "schema": SCHEMA,
        "job": job,
        "iteration": iteration,
        "cause": fault.get("cause"),
        "fault_time": start,
        "rank": fault.get("rank"),
        "exception": fault.get("exception"),
        "reason": fault.get("reason"),
        "other_faulted_ranks": others,
        "world_size": world_size,
        "terminated_ranks": terminated,
        "phases": phases,
        "faults": [
            {"cause": f.get("cause"), "rank": f.get("rank"), "time": f.get("time")} for f in faults
        ],
        "per_rank": {
            str(r): {k: round(v - start, 4) for k, v in sorted(p.items())}
            for r, p in sorted(per_rank.items())
        },
    }
    if fault.get("stack"):
        event["stack"] = fault["stack"]
    return event


def gather_and_report(
    store: RestartStore,
    job: str | None,
    directory: Path | None,
    iteration: int,
    ranks: list[int],
    timeout: float,
) -> None:
    """Wait (bounded) for every rank's phase record of the restart into ``iteration``; publish."""
    deadline = time.monotonic() + timeout
    per_rank: dict[int, dict[str, float]] = {}
    while time.monotonic() < deadline and len(per_rank) < len(ranks):
        for rank in ranks:
            if rank not in per_rank:
                record = store.get_json(f"phases/{rank}", iteration)
                if _valid_phases(record):
                    per_rank[rank] = record
        time.sleep(0.01)
    fault = store.fault(iteration - 1) or {}
    event = build_event(
        job,
        iteration,
        fault,
        store.all_faults(iteration - 1),
        per_rank,
        len(ranks),
        sorted(store.terminated()),
    )
    text = json.dumps(event, sort_keys=True)
    store.put_json("event", iteration, event)
    if directory is not None:
        fd = open_append(private_dir(directory) / "events.jsonl")
        with os.fdopen(fd, "a") as f:
            f.write(text + "\n")
    print(f"nccl-doctor restart: {text}", file=sys.stderr, flush=True)


def _valid_phases(record: object) -> bool:
    """A rank's phase times: known phase names to finite numbers."""
    return isinstance(record, dict) and all(
        name in PHASES
        and not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        for name, value in record.items()
    )


def report_in_background(*args: Any) -> threading.Thread:
    thread = threading.Thread(
        target=gather_and_report, args=args, name="nccl-doctor-event", daemon=True
    )
    thread.start()
    return thread
