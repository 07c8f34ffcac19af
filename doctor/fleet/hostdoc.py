"""``nccl-doctor/host-preflight/v1``: one host's preflight, small enough to travel.

``to_document`` writes what the host found (its preflight findings) and the
facts the fleet compares across hosts, each a short text keyed by a dotted
name (``version.torch``, ``plugin.libnccl-net.so``, ``env.NCCL_IB_HCA``,
``net.interfaces``, ``gpu.count``, ``gpu.ecc-uncorrected``), and the host's
clock when it wrote. ``read_document`` checks a document from another machine
and turns it back into values; anything else is a ``DocumentError`` naming
what is wrong. Bounds: ``MAX_FINDINGS``, ``MAX_FACTS``, ``MAX_TEXT`` per
string and ``MAX_DOC_BYTES`` in all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doctor.checks.facts import Facts
from doctor.checks.report import Report
from doctor.gpu.nvml import Fleet
from doctor.launch.policy import apply_policy
from doctor.model import Finding, Severity
from doctor.remote.document import DocumentError

SCHEMA = "nccl-doctor/host-preflight/v1"
MAX_FINDINGS = 256
MAX_FACTS = 512
MAX_TEXT = 300
MAX_DOC_BYTES = 256 * 1024
ENV_PREFIXES = ("NCCL_", "TORCH_", "GLOO_", "CUDA_", "UCX_", "FI_")
"""The variables the job's communication reads; the rest of a host's environment
(SLURM task ids, shells) differs between hosts by design."""
_OWN = ("NCCL_DOCTOR_", "TORCH_FR_DUMP_TEMP_FILE", "NCCL_DEBUG_FILE")
"""Set by the launch policy to per-job paths, or nccl-doctor's own: not the host's."""


@dataclass(frozen=True)
class HostPreflight:
    """One host's preflight as read back from its document."""

    host: str
    findings: tuple[Finding, ...]
    facts: Mapping[str, str]
    clock: float
    """The host's wall clock (Unix seconds) when it wrote the document."""
    version: str = ""
    lane: str = ""


def _text(value: object) -> str:
    s = str(value)
    return s if len(s) <= MAX_TEXT else s[: MAX_TEXT - 1] + "…"


def _gpu_facts(fleet: Fleet) -> dict[str, str]:
    """GPU count, models and the health counters that climb on a failing GPU."""
    if fleet.unavailable:
        return {"gpu.count": "0", "gpu.nvml": fleet.unavailable}
    gpus = fleet.gpus

    def total(name: str) -> str:
        return str(sum(getattr(g, name) or 0 for g in gpus))

    return {
        "gpu.count": str(len(gpus)),
        "gpu.models": ", ".join(sorted({g.name for g in gpus})),
        "gpu.driver": fleet.driver,
        "gpu.lost": str(sum(g.lost for g in gpus)),
        "gpu.ecc-uncorrected": total("ecc_volatile_uncorrected"),
        "gpu.retired-pages-dbe": total("retired_pages_dbe"),
        "gpu.remapped-rows-uncorrectable": total("remapped_rows_uncorrectable"),
        "gpu.xid": ",".join(str(x) for x in sorted({x for g in gpus for x in g.xid_events}))
        or "none",
        "gpu.nvlink-errors": str(
            sum(n.replay_errors + n.recovery_errors + n.crc_errors for g in gpus for n in g.nvlinks)
        ),
        "gpu.nvlink-down": str(sum(not n.active for g in gpus for n in g.nvlinks)),
    }


def host_facts(facts: Facts) -> dict[str, str]:
    """The facts the fleet compares, as short texts by dotted key."""
    out = {f"version.{k}": v for k, v in facts.versions.items()}
    out["lane"] = facts.lane
    for name, path in sorted(facts.libraries.items()):
        out[f"plugin.{name}"] = path or "not found"
    policy = apply_policy(facts.env, facts.lane, False, "fleet", Path("/"), 0)
    for name, value in sorted(policy.env.items()):
        if name.startswith(ENV_PREFIXES) and not name.startswith(_OWN):
            out[f"env.{name}"] = value
    if facts.interfaces is not None:
        up = sorted(n for n, has_addr in facts.interfaces.items() if has_addr and n != "lo")
        out["net.interfaces"] = ",".join(up) or "none"
    out["net.ib-devices"] = ",".join(facts.ib_devices) or "none"
    out.update(_gpu_facts(facts.fleet))
    return out


def to_document(
    report: Report, facts: Facts, host: str, clock: float, version: str
) -> dict[str, Any]:
    """One host's preflight as a ``nccl-doctor/host-preflight/v1`` document (plain data)."""
    found = [{k: _text(v) for k, v in f.to_json().items()} for f in report.findings[:MAX_FINDINGS]]
    known = dict(sorted(host_facts(facts).items())[:MAX_FACTS])
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "host": _text(host),
        "version": _text(version),
        "lane": report.lane,
        "clock": round(clock, 3),
        "findings": found,
        "facts": {_text(k): _text(v) for k, v in known.items()},
    }
    while len(json.dumps(doc, separators=(",", ":"))) > MAX_DOC_BYTES and known:
        known = dict(list(known.items())[: len(known) // 2])
        doc["facts"] = {_text(k): _text(v) for k, v in known.items()}
    return doc


# ---- reading ---------------------------------------------------------------------


def _str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise DocumentError(f"{key!r} is not a string of at most {MAX_TEXT} characters")
    return value


def _finding(item: Any) -> Finding:
    if not isinstance(item, dict):
        raise DocumentError("a finding is not an object")
    try:
        severity = Severity(str(item.get("severity")))
    except ValueError:
        raise DocumentError(f"unknown severity {item.get('severity')!r}") from None
    return Finding(
        _str(item, "check"),
        severity,
        _str(item, "subject"),
        _str(item, "message"),
        _str(item, "fix"),
    )


def read_document(text: str, host: str, interner: dict[Any, Any] | None = None) -> HostPreflight:
    """A host's document checked and read back, filed under ``host`` (the name the
    transport reached, whatever the document claims). Documents read through one
    ``interner`` share equal findings and facts (most hosts of a fleet send the same),
    so the merge can take equal hosts together."""
    if len(text) > MAX_DOC_BYTES:
        raise DocumentError(f"the document is larger than {MAX_DOC_BYTES} bytes")
    try:
        data = json.loads(text)
    except ValueError:
        raise DocumentError("the document is not JSON") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise DocumentError(f"the document is not {SCHEMA}")
    items, facts = data.get("findings"), data.get("facts")
    if not isinstance(items, list) or len(items) > MAX_FINDINGS:
        raise DocumentError(f"'findings' is not a list of at most {MAX_FINDINGS}")
    if not isinstance(facts, dict) or len(facts) > MAX_FACTS:
        raise DocumentError(f"'facts' is not an object of at most {MAX_FACTS} keys")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in facts.items()):
        raise DocumentError("a fact is not a string")
    clock = data.get("clock")
    if not isinstance(clock, (int, float)) or isinstance(clock, bool) or not math.isfinite(clock):
        raise DocumentError("'clock' is not a time")
    table = {} if interner is None else interner
    key = ("findings", json.dumps(items, sort_keys=True))
    found = table.get(key)
    if found is None:
        found = table[key] = tuple(_finding(i) for i in items)
    fkey = ("facts", tuple(sorted(facts.items())))
    known = table.get(fkey)
    if known is None:
        known = table[fkey] = {k[:MAX_TEXT]: v[:MAX_TEXT] for k, v in fkey[1]}
    return HostPreflight(
        host, found, known, float(clock), _str(data, "version"), _str(data, "lane")
    )
