"""Write a triage snapshot as a bundle that ``nccl-doctor analyze`` re-judges elsewhere.

The layout is ``doctor.analyze.format``'s: ``evidence.json`` (every probe's
raw result, reduced Flight Recorder dumps included: ``analyze`` re-judges it),
``verdict.json``, the Flight Recorder dump files triage read (for people and
other tools), each rank's stacks as JSON, and the tails of the logs triage read.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from doctor.analyze.format import write_bundle
from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.sources.logs import TAIL_BYTES
from doctor.trust.process_identity import owner_uid
from doctor.trust.safeio import UnsafePath, open_owned

MAX_FR_BYTES = 256 * 1024 * 1024


def _read(path: str, limit: int, tail: bool, owners: set[int]) -> bytes | None:
    """The file's bytes if it is a regular file of the job's owner (never through a link):
    a rank's environment may name a file its owner could not read, for root to copy."""
    try:
        fd = open_owned(path, owners)
        with os.fdopen(fd, "rb") as f:
            if tail:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - limit))
            data = f.read(limit + 1)
    except (OSError, UnsafePath):
        return None
    return data if tail or len(data) <= limit else None


def write_triage_bundle(snapshot: TriageSnapshot, out: Path) -> Path:
    """Write ``out`` (a .tar.gz) atomically; files that vanished since are left out."""
    evidence = snapshot.evidence
    uids = {owner_uid(p.pid) for p in evidence.processes if p.pid}
    owners = {uid for uid in uids if uid is not None} or {os.geteuid()}
    fr = {
        Path(p).name: data
        for p in evidence.fr_files
        if (data := _read(p, MAX_FR_BYTES, tail=False, owners=owners)) is not None
    }
    logs = {
        p.strip("/").replace("/", "_"): data
        for p in evidence.log_files
        if (data := _read(p, TAIL_BYTES, tail=True, owners=owners)) is not None
    }
    stacks = {s.rank: json.dumps(asdict(s), indent=1) for s in evidence.stacks}
    hosts = {host: text.encode() for host, text in snapshot.host_documents}
    return write_bundle(
        out, evidence, snapshot.verdict, fr=fr, stacks=stacks, logs=logs, hosts=hosts
    )
