"""``stack.versions`` (info): the versions a bug report and a playbook need first;
``stack.nccl-ras`` (warn): an NCCL whose RAS subsystem is known to crash the job.

RAS runs in every NCCL process from 2.24 on unless ``NCCL_RAS_ENABLE=0``; the versions
in which it is known to crash, and where that is stated, are ``data/ras_crashes.toml``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from doctor.checks import fixes
from doctor.checks.facts import Facts
from doctor.model import Finding, Severity

ORDER = ("torch", "nccl", "cuda", "driver", "python")
RAS_FIRST = (2, 24, 0)
"""The first NCCL with RAS."""

Version = tuple[int, ...]


@dataclass(frozen=True)
class RasCrash:
    first: Version
    fixed: Version | None
    reported: tuple[Version, ...]
    what: str
    sources: tuple[str, ...]

    def affects(self, version: Version) -> bool:
        if self.reported and not self.fixed:
            return version in self.reported
        return version >= self.first and (self.fixed is None or version < self.fixed)


def parse_version(text: str) -> Version | None:
    """``2.27.7`` (or ``2.27.7+cuda12.9``, ``2.27.7-1``) -> (2, 27, 7)."""
    m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g or 0) for g in m.groups()) if m else None


@cache
def ras_crashes() -> tuple[RasCrash, ...]:
    data = tomllib.loads(
        resources.files("doctor.checks").joinpath("data/ras_crashes.toml").read_text()
    )
    return tuple(
        RasCrash(
            parse_version(c["first"]) or RAS_FIRST,
            parse_version(c["fixed"]) if "fixed" in c else None,
            tuple(v for r in c.get("reported", ()) if (v := parse_version(r))),
            c["what"],
            tuple(c["sources"]),
        )
        for c in data["crash"]
    )


def run(facts: Facts) -> list[Finding]:
    v = facts.versions
    text = ", ".join(f"{name} {v.get(name, 'unknown')}" for name in ORDER)
    return [Finding("stack.versions", Severity.INFO, "versions", text + "."), ras(facts)]


def ras(facts: Facts) -> Finding:
    nccl = facts.versions.get("nccl", "")
    version = parse_version(nccl)
    if version is None:
        return Finding("stack.nccl-ras", Severity.SKIP, "NCCL_RAS_ENABLE", "NCCL version unknown.")
    if version < RAS_FIRST:
        return Finding(
            "stack.nccl-ras", Severity.PASS, "NCCL_RAS_ENABLE", f"NCCL {nccl} has no RAS."
        )
    if facts.env.get("NCCL_RAS_ENABLE", "").strip() == "0":
        return Finding(
            "stack.nccl-ras", Severity.PASS, "NCCL_RAS_ENABLE", "RAS is off (NCCL_RAS_ENABLE=0)."
        )
    known = [c for c in ras_crashes() if c.affects(version)]
    if not known:
        return Finding(
            "stack.nccl-ras",
            Severity.PASS,
            "NCCL_RAS_ENABLE",
            f"no RAS crash is known in NCCL {nccl}.",
        )
    facts_text = "; ".join(f"{c.what} ({'; '.join(c.sources)})" for c in known)
    return Finding(
        "stack.nccl-ras",
        Severity.WARN,
        "NCCL_RAS_ENABLE",
        f"NCCL {nccl} runs RAS (on by default), which is known to crash jobs in this "
        f"version: {facts_text}. Turn RAS off, or move to an NCCL without these reports "
        "(nccl-doctor reads RAS where it runs; without it, logs and dumps still judge).",
        fixes.export("NCCL_RAS_ENABLE", "0"),
    )
