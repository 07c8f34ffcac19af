"""Diagnose a stall: triage's collection and verdict, written as a bundle before any action.

The evidence of a hang is gone once the job is restarted or killed, so the
bundle is on disk (``<jobdir>/watch/NNN-<class>.tar.gz``) before the watcher
decides anything; ``nccl-doctor analyze`` re-judges it to the same verdict. The incident
report (``NNN-<class>.report.html``, ``doctor.report``) is written beside it once the
action is taken (``report_beside``): a person opens it first, the action never waits for it.

Collection is triage's own: on this host ``collect_snapshot`` (py-spy, /proc, NVML,
logs, Flight Recorder through the in-rank agent); for a job whose ranks run on other
hosts too (its launch registry on a shared filesystem, or SLURM, says so), one round of
``nccl-doctor collect`` on every host through the job's own launcher, merged
(``doctor.remote.reach``), judged once, exactly as ``triage --job`` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from doctor.triage.snapshot import TriageSnapshot
from doctor.trust.safeio import private_dir
from doctor.verdict.stacks import top_frame

Collect = Callable[[], TriageSnapshot]


@dataclass(frozen=True)
class Diagnosis:
    """One look at a stalled job: the snapshot, where its bundle is, what it points at."""

    snapshot: TriageSnapshot
    bundle: Path
    place: str
    """The verdict's collective (``all_gather pg 0 seq 12``), else the first culprit's top
    frame: two diagnoses at the same place are the same hang again."""
    seconds: float


def job_collect(job: str, env: Mapping[str, str], interval: float) -> Collect:
    """Triage's collection of every host of the job, as one call (module docstring)."""
    from doctor.errors import DoctorError
    from doctor.triage.collect import CollectOptions, JobRef, collect_snapshot

    options = CollectOptions(interval=interval, env=dict(env))

    def collect() -> TriageSnapshot:
        from doctor.remote.reach import DEFAULT_TIMEOUT, plan_job, snapshot_round

        try:
            reach = plan_job(job, options.env)
        except DoctorError:  # nothing reaches other hosts: what this host sees
            reach = None
        if reach is None:
            return collect_snapshot(JobRef(job=job), options)
        return snapshot_round(reach, interval, max(DEFAULT_TIMEOUT, interval + 2), options.env)

    return collect


def place_of(snapshot: TriageSnapshot) -> str:
    verdict = snapshot.verdict
    if verdict.collective is not None:
        ref = verdict.collective
        return f"{ref.op} pg {ref.process_group} seq {ref.seq}"
    stacks = {s.rank: s for s in snapshot.evidence.stacks}
    for rank in verdict.culprit_ranks:
        if rank in stacks:
            return f"rank {rank} in {top_frame(stacks[rank])}"
    return "an unknown place"


def diagnose(collect: Collect, directory: Path, index: int) -> Diagnosis:
    """Collect, classify once, write the bundle; the bundle exists when this returns."""
    from doctor.triage.export import write_triage_bundle

    start = time.monotonic()
    snapshot = collect()
    folder = private_dir(directory / "watch")
    name = f"{index:03d}-{snapshot.verdict.hang_class.value}.tar.gz"
    bundle = write_triage_bundle(snapshot, folder / name)
    return Diagnosis(snapshot, bundle, place_of(snapshot), time.monotonic() - start)


def report_beside(diagnosis: Diagnosis) -> Path:
    """Write the incident report of ``diagnosis`` beside its bundle; its path."""
    from doctor.report.write import write_report

    bundle = diagnosis.bundle
    path = bundle.with_name(bundle.name.replace(".tar.gz", ".report.html"))
    write_report(diagnosis.snapshot.evidence, diagnosis.snapshot.analysis, path)
    return path
