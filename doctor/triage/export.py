"""Write a triage snapshot as a bundle that ``nccl-doctor analyze`` re-judges elsewhere.

The layout is ``doctor.analyze.format``'s: ``evidence.json`` (every probe's
raw result, reduced Flight Recorder dumps included: ``analyze`` re-judges it),
``verdict.json``, the Flight Recorder dump files triage read (for people and
other tools), each rank's stacks as JSON, and the tails of the logs triage read.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from doctor.analyze.format import write_bundle
from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.sources.logs import TAIL_BYTES

MAX_FR_BYTES = 256 * 1024 * 1024


def _read(path: str, limit: int, tail: bool) -> bytes | None:
    try:
        with open(path, "rb") as f:
            if tail:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - limit))
            data = f.read(limit + 1)
    except OSError:
        return None
    return data if tail or len(data) <= limit else None


def write_triage_bundle(snapshot: TriageSnapshot, out: Path) -> Path:
    """Write ``out`` (a .tar.gz) atomically; files that vanished since are left out."""
    evidence = snapshot.evidence
    fr = {
        Path(p).name: data
        for p in evidence.fr_files
        if (data := _read(p, MAX_FR_BYTES, tail=False)) is not None
    }
    logs = {
        p.strip("/").replace("/", "_"): data
        for p in evidence.log_files
        if (data := _read(p, TAIL_BYTES, tail=True)) is not None
    }
    stacks = {s.rank: json.dumps(asdict(s), indent=1) for s in evidence.stacks}
    return write_bundle(out, evidence, snapshot.verdict, fr=fr, stacks=stacks, logs=logs)
