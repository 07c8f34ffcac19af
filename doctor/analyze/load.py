"""Saved evidence in: whatever a user hands ``analyze`` becomes one raw ``Evidence``.

Accepted, in any mix: a triage bundle (tar.gz or the folder it unpacks to),
a folder or archive of Flight Recorder dumps, dump files, and logs (``doctor.logs``:
a job's combined output, NCCL debug files, RAS reports, kernel Xid lines, py-spy text).
A v2 bundle carries its reduced dumps in ``evidence.json``; a v1 bundle
(``nccl-doctor/evidence/v1``) is read as before, its dumps from ``fr/``. Nothing here
aligns or judges: that is ``doctor.verdict.classify.analyse``, as for live triage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from doctor.analyze.format import read_bundle_json
from doctor.codec import DecodeError
from doctor.errors import InputError
from doctor.evidence import SCHEMA, Evidence
from doctor.flight.reader import Progress, read_flight
from doctor.logs import read_logs
from doctor.logs.reader import is_binary
from doctor.logs.words import union


def _bundle(paths: Sequence[Path]) -> tuple[Path, Evidence, bool] | None:
    """The first bundle among ``paths``, its evidence, and whether that carries the dumps
    (v2); ``InputError`` if it is malformed."""
    for p in paths:
        doc, _verdict = read_bundle_json(p)
        if doc is None:
            continue
        try:
            return p, Evidence.from_json(doc), doc.get("schema") == SCHEMA
        except DecodeError as exc:
            raise InputError(f"{p.name}: evidence.json is malformed ({exc})") from None
    return None


def _nothing_read(paths: Sequence[Path], reasons: Sequence[str]) -> str:
    """The error when nothing in ``paths`` could be read: binary data given says so (the dump
    reader's reason, its name without a rank, would send the user the wrong way)."""
    binary = [p for p in paths if p.is_file() and is_binary(p)]
    if len(binary) == len(paths):
        verb = "is" if len(paths) == 1 else "are"
        return (
            f"{', '.join(map(str, paths))} {verb} binary data, neither a log nor a pickled "
            f"Flight Recorder dump"
        )
    why = f"{binary[0].name}: binary data" if binary else (reasons[0] if reasons else "")
    return (
        f"found no readable Flight Recorder dump, triage bundle or log in "
        f"{', '.join(map(str, paths))}" + (f" ({why})" if why else "")
    )


def load_evidence(
    paths: Sequence[Path], progress: Progress | None = None, log_progress: Progress | None = None
) -> Evidence:
    """Evidence from bundles, folders, archives or dump files; ``InputError`` if none is.
    ``progress`` hears how far the reading of a large folder of dumps is (dumps read of all),
    ``log_progress`` that of the logs (bytes read of all)."""
    for p in paths:
        if not p.exists():
            raise InputError(f"no such file or folder: {p}")
    found = _bundle(paths)
    t0 = time.monotonic()
    # a v2 bundle's dumps are in its evidence.json; its fr/ copies are for people
    skip = found[0] if found is not None and found[2] else None
    fr = read_flight((p for p in paths if p != skip), progress)
    # a bundle's log events are in its evidence.json too: its logs/ tails (and, unpacked, its
    # JSON documents) are not read again as logs
    logs = read_logs(
        [p for p in paths if found is None or p != found[0]],
        not_logs=fr.files,
        progress=log_progress,
    )
    texts = {Path(f).name for f in logs.files}
    unreadable = tuple(s for s in fr.skipped if s.reason.split(":", 1)[0] not in texts)
    if not fr.dumps and found is None and not logs.files:
        raise InputError(_nothing_read(paths, [s.reason for s in fr.skipped]))
    if found is None:
        base = Evidence(job=paths[0].name, ranks_expected=None, seconds=time.monotonic() - t0)
    else:
        base = found[1]
    return replace(
        base,
        dumps=base.dumps + fr.dumps,
        unreadable_dumps=tuple(dict.fromkeys(base.unreadable_dumps + unreadable)),
        logs=base.logs + logs.events,
        stacks=base.stacks + logs.stacks,
        skipped=tuple(dict.fromkeys(base.skipped + logs.skipped)),
        log_files=tuple(dict.fromkeys(base.log_files + logs.files)),
        log_words=union((base.log_words, logs.words)),
    )
