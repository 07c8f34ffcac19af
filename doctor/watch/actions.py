"""Carry out a decision through the restart wrapper's store (the channel ``recover`` uses).

* **restart** — a fault record with cause ``watch`` in the current iteration: every
  rank's monitor thread aborts its process groups and re-enters the function, exactly
  as for any fault; the answer is the wrapper's restart event.
* **exclude** — the leaving ranks are declared terminated first (so the next entry
  barrier closes without them even if they are stuck in a driver call), then the same
  record, naming them: they leave with exit code 0 and the rank assignment gives their
  places to spares.
* **stop** — ``<jobdir>/watch/stop.json`` first (read by every rank's stopper thread,
  for ranks the wrapper cannot unwind or that run without it), then the record with the
  exit code: every rank unwinds and its ``launch`` exits with that code (the watcher
  ends ranks still alive after a grace time: ``roster.end_ranks``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from doctor.jobconfig.watch_settings import Action
from doctor.trust.safeio import private_dir, write_atomic
from doctor.watch.diagnose import Diagnosis
from doctor.watch.policy import Decision
from doctor.watch.stopper import stop_path

RESTART_WAIT = 120.0
STORE_WAIT = 10.0
"""Seconds to reach the job's store before the action counts as failed."""


def _record(decision: Decision, diagnosis: Diagnosis, line: str) -> dict[str, Any]:
    verdict = diagnosis.snapshot.verdict
    return {
        "cause": "watch",
        "rank": None,
        "time": time.time(),
        "exception": f"{verdict.hang_class.value}: {verdict.summary}",
        "reason": decision.reason,
        "action": decision.action.value,
        "exit_code": decision.exit_code,
        "ranks": list(decision.ranks),
        "bundle": str(diagnosis.bundle),
        "line": line,
    }


def carry_out(
    decision: Decision,
    diagnosis: Diagnosis,
    job: str,
    directory: Path,
    iteration: int,
    wrapped: bool,
    line: str,
) -> str:
    """Do what ``decision`` says; returns what happened, in a few words."""
    if decision.action is Action.NONE:
        return "no action"
    if decision.action is Action.STOP:
        order = {"exit_code": decision.exit_code, "line": line, "time": time.time()}
        private_dir(directory / "watch")
        write_atomic(stop_path(directory), json.dumps(order))
        if wrapped:
            store, _ = _store(directory, job)
            store.record_fault(iteration, _record(decision, diagnosis, line))
        return f"stopping every rank (exit {decision.exit_code})"
    from doctor.restart.recover import await_restart

    store, _ = _store(directory, job)
    for rank in decision.ranks if decision.action is Action.EXCLUDE else ():
        store.mark_terminated(rank)
    store.record_fault(iteration, _record(decision, diagnosis, line))
    event = await_restart(store, job, iteration, RESTART_WAIT)
    by = "" if event.get("cause") == "watch" else f" (started by {event.get('cause')} first)"
    return (
        f"restarted into iteration {event['iteration']}{by}: {event['world_size']} ranks "
        f"re-entered {event.get('phases', {}).get('reentry', 0):.2f}s after the request"
    )


def _store(directory: Path, job: str) -> Any:
    from doctor.restart.recover import job_store

    return job_store(directory, job, STORE_WAIT)
