"""Triage bundles: everything triage saw, in one tar.gz that ``analyze`` re-judges elsewhere.

Layout (read back by ``load_evidence``)::

    evidence.json          Evidence.to_json() + {"schema": "nccl-doctor/evidence/v1"}
    verdict.json           the verdict triage reached (Verdict.to_json())
    fr/<name>              raw Flight Recorder dumps, as the ranks wrote them
    stacks/rank_<N>.json   py-spy --json output per rank
    logs/<name>            NCCL / launcher logs
    hosts/<host>.json      multi-host triage: every host document, as the host sent it

Reading never extracts to disk: members are read into memory, and only plain
files with relative names inside the bundle are accepted (no links, no
absolute paths, no ``..``), so a hostile bundle cannot write anywhere.
``load_evidence`` also takes a folder laid out the same way, a folder or
archive of bare dumps, or explicit dump files.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from doctor.errors import InputError
from doctor.evidence import Evidence
from doctor.flight.align import align
from doctor.flight.reader import read_flight
from doctor.model import Verdict

EVIDENCE_SCHEMA = "nccl-doctor/evidence/v1"
MAX_JSON_BYTES = 64 * 1024 * 1024


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
    fr: Mapping[str, bytes] = {},  # noqa: B006 - read only
    stacks: Mapping[int, str] = {},  # noqa: B006
    logs: Mapping[str, bytes] = {},  # noqa: B006
    hosts: Mapping[str, bytes] = {},  # noqa: B006
) -> Path:
    """Write the bundle atomically (temp file, then rename) and return its path."""
    tmp = out.with_name(f".{out.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        doc = {"schema": EVIDENCE_SCHEMA, **evidence.to_json()}
        _add(tar, "evidence.json", json.dumps(doc, indent=1).encode())
        _add(tar, "verdict.json", json.dumps(verdict.to_json(), indent=1).encode())
        for name, data in sorted(fr.items()):
            _add(tar, f"fr/{_safe_name(name)}", data)
        for rank, text in sorted(stacks.items()):
            _add(tar, f"stacks/rank_{int(rank)}.json", text.encode())
        for name, data in sorted(logs.items()):
            _add(tar, f"logs/{_safe_name(name)}", data)
        for host, data in sorted(hosts.items()):
            _add(tar, f"hosts/{_safe_name(host)}.json", data)
    tmp.replace(out)
    return out


def _member_ok(m: tarfile.TarInfo) -> bool:
    p = PurePosixPath(m.name)
    return m.isfile() and not p.is_absolute() and ".." not in p.parts


def _read_json(data: bytes, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise InputError(f"{where} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{where} does not hold a JSON object")
    return doc


def read_bundle_json(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(evidence.json, verdict.json) of a bundle tar or folder; None for what is absent."""
    found: dict[str, bytes] = {}
    if path.is_dir():
        for name in ("evidence.json", "verdict.json"):
            if (path / name).is_file() and (path / name).stat().st_size <= MAX_JSON_BYTES:
                found[name] = (path / name).read_bytes()
    elif tarfile.is_tarfile(path):
        with tarfile.open(path) as tar:
            for m in tar:
                name = PurePosixPath(m.name).as_posix().removeprefix("./")
                if (
                    name in ("evidence.json", "verdict.json")
                    and _member_ok(m)
                    and m.size <= MAX_JSON_BYTES
                ):
                    f = tar.extractfile(m)
                    found[name] = f.read() if f else b""
    ev, ve = found.get("evidence.json"), found.get("verdict.json")
    return (
        _read_json(ev, f"{path.name}: evidence.json") if ev is not None else None,
        _read_json(ve, f"{path.name}: verdict.json") if ve is not None else None,
    )


def load_evidence(paths: Sequence[Path]) -> Evidence:
    """Evidence from bundles, folders, archives or dump files; ``InputError`` if none is."""
    for p in paths:
        if not p.exists():
            raise InputError(f"no such file or folder: {p}")
    base: Evidence | None = None
    for p in paths:
        doc, _verdict = read_bundle_json(p)
        if doc is not None:
            try:
                base = Evidence.from_json(doc)
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                raise InputError(f"{p.name}: evidence.json is malformed ({exc})") from None
            break
    t0 = time.monotonic()
    fr = read_flight(paths)
    if not fr.dumps and base is None:
        why = f" ({fr.skipped[0].reason})" if fr.skipped else ""
        raise InputError(
            f"found no readable Flight Recorder dump or triage bundle in "
            f"{', '.join(map(str, paths))}{why}"
        )
    if base is None:
        base = Evidence(job=paths[0].name, ranks_expected=None, seconds=time.monotonic() - t0)
    flight = (
        align(fr.dumps, fr.skipped, world_size=base.ranks_expected)
        if fr.dumps or fr.skipped
        else None
    )
    return Evidence(
        **{
            **{f: getattr(base, f) for f in base.__dataclass_fields__},
            "flight": flight,
            "skipped": tuple(dict.fromkeys(base.skipped + fr.skipped)),
        }
    )
