"""Triage bundles: everything triage saw, in one tar.gz that ``analyze`` re-judges elsewhere.

Layout::

    evidence.json          Evidence.to_json(): raw evidence, reduced dumps included (v2)
    verdict.json           the verdict triage reached (Verdict.to_json())
    fr/<name>              raw Flight Recorder dumps, as the ranks wrote them (for people
                           and other tools; v1 bundles were re-read from these)
    stacks/rank_<N>.json   each rank's stacks as JSON
    logs/<name>            tails of the NCCL / launcher logs
    hosts/<host>.json      multi-host triage: every host document, as the host sent it

Writing is atomic (a temp file, then a rename). Reading goes through
``doctor.trust.archive`` (members into memory, never extracted; its rules and bounds).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from doctor.errors import InputError
from doctor.evidence import Evidence
from doctor.model import Verdict
from doctor.trust import archive

MAX_JSON_BYTES = 64 * 1024 * 1024
"""Bound on evidence.json and verdict.json (a bundle of 64 ranks' evidence is ~1 MiB)."""
DOCUMENTS = ("evidence.json", "verdict.json")


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _safe_name(name: str) -> str:
    base = PurePosixPath(name.replace("\\", "/")).name
    if not base or base in (".", ".."):
        raise ValueError(f"bad member name {name!r}")
    return base


def write_bundle(
    out: Path,
    evidence: Evidence,
    verdict: Verdict,
    fr: Mapping[str, bytes] | None = None,
    stacks: Mapping[int, str] | None = None,
    logs: Mapping[str, bytes] | None = None,
    hosts: Mapping[str, bytes] | None = None,
) -> Path:
    """Write the bundle atomically (temp file, then rename) and return its path."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    # 0600: a bundle holds what the ranks' owner could read, which others may not
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        _add(tar, "evidence.json", json.dumps(evidence.to_json(), indent=1).encode())
        _add(tar, "verdict.json", json.dumps(verdict.to_json(), indent=1).encode())
        for name, data in sorted((fr or {}).items()):
            _add(tar, f"fr/{_safe_name(name)}", data)
        for rank, text in sorted((stacks or {}).items()):
            _add(tar, f"stacks/rank_{int(rank)}.json", text.encode())
        for name, data in sorted((logs or {}).items()):
            _add(tar, f"logs/{_safe_name(name)}", data)
        for host, data in sorted((hosts or {}).items()):
            _add(tar, f"hosts/{_safe_name(host)}.json", data)
    tmp.replace(out)
    return out


def _read_json(data: bytes, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{where} does not hold a JSON object")
    return doc


def _documents(path: Path) -> dict[str, bytes]:
    """evidence.json and verdict.json of a bundle folder or archive, where present."""
    found: dict[str, bytes] = {}
    if path.is_dir():
        for name in DOCUMENTS:
            file = path / name
            if file.is_file() and not file.is_symlink():
                if file.stat().st_size > MAX_JSON_BYTES:
                    raise InputError(f"{path.name}: {name} is larger than {MAX_JSON_BYTES} bytes")
                found[name] = file.read_bytes()
        return found
    if not archive.is_archive(path):
        return found
    bounds = archive.Bounds(member_bytes=MAX_JSON_BYTES)
    try:
        for entry in archive.members(path, bounds, wanted=lambda name: name in DOCUMENTS):
            if isinstance(entry, archive.Refused):
                raise InputError(f"{path.name}: refused {entry} ({entry.rule} rule)")
            found[entry.name] = entry.read()
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile):
        return {}  # not a readable archive: the Flight Recorder reader says why, per file
    return found


def read_bundle_json(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(evidence.json, verdict.json) of a bundle tar or folder; None for what is absent."""
    found = _documents(path)
    ev, ve = found.get("evidence.json"), found.get("verdict.json")
    return (
        _read_json(ev, f"{path.name}: evidence.json") if ev is not None else None,
        _read_json(ve, f"{path.name}: verdict.json") if ve is not None else None,
    )
