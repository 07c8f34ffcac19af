"""Host preflights -> one fleet report: a pure function, testable on recorded documents.

Every finding (by check and subject) and every fact (by key) takes one value per
answering host; a host without it has the value ``absent``/``unset``. A key with
one value on every host *holds everywhere* and is reported once. Otherwise the
*norm* is the value most hosts share (a tie goes to the value of the host named
first) and every other value is an *outlier group*: the hosts that differ, and
how. A finding's difference is as severe as the worst value any group has (one
between passes and notes is information; a fact's is a warning); the hosts of an
outlier group at fail (at warn too, under ``--strict``) go on the exclude list,
with the hosts that did not answer.

The host's clock is a fact too: the host wrote its document at some instant
between the moment it was asked and the moment its document arrived (both on
this host's clock), so a clock outside that window is off by at least the
distance to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from doctor.fleet.hostdoc import HostPreflight
from doctor.model import Finding, Severity
from doctor.remote.hosts import fold

SCHEMA = "nccl-doctor/fleet-preflight/v1"
CLOCK_TOLERANCE_S = 1.0
"""A clock further off than this from the login node's is a difference."""
ABSENT = "absent"
UNSET = "unset"


@dataclass(frozen=True)
class HostResult:
    """What one host sent, or why nothing usable came, and when (this host's clock)."""

    host: str
    doc: HostPreflight | None
    reason: str = ""
    sent: float = 0.0
    """Wall-clock time the host was asked."""
    arrived: float | None = None
    """Wall-clock time its document was complete."""


@dataclass(frozen=True)
class Group:
    """Hosts that share one value of a key."""

    value: str
    hosts: tuple[str, ...]
    severity: Severity = Severity.WARN


@dataclass(frozen=True)
class Difference:
    """A key whose value is not the same on every answering host."""

    kind: str
    """``finding`` or ``fact``."""
    key: str
    norm: Group
    outliers: tuple[Group, ...]
    severity: Severity


@dataclass(frozen=True)
class FleetReport:
    """The fleet: what holds everywhere, who differs and how, who did not answer."""

    asked: tuple[str, ...]
    answered: tuple[str, ...]
    everywhere: tuple[Finding, ...]
    differences: tuple[Difference, ...]
    unreachable: Mapping[str, str]
    clock_offsets: Mapping[str, float]
    findings: tuple[Finding, ...]
    """What the exit code is judged from: the everywhere findings, one per difference,
    one per reason hosts did not answer (and the benchmark's)."""
    exclude: tuple[str, ...] = ()
    """Set by ``exclude_list`` once the strictness (and the benchmark) is known."""

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)


def clock_offset(result: HostResult) -> float:
    """How far the host's clock is outside the window it must have written in (0 inside)."""
    if result.doc is None or result.arrived is None:
        return 0.0
    clock = result.doc.clock
    return clock - min(max(clock, result.sent), result.arrived)


def _finding_values(doc: HostPreflight) -> dict[str, tuple[str, Severity]]:
    found: dict[str, list[Finding]] = {}
    for f in doc.findings:
        found.setdefault(f"{f.check} · {f.subject}", []).append(f)
    out = {}
    for key, items in found.items():
        worst = min((f.severity for f in items), key=lambda s: s.rank)
        out[key] = (" | ".join(sorted(f"{f.severity.value}: {f.message}" for f in items)), worst)
    return out


def _groups(
    classes: Iterable[tuple[Sequence[str], Mapping[str, tuple[str, Severity]]]],
    index: Mapping[str, int],
) -> dict[str, dict[str, Group]]:
    """key -> value -> the hosts with it (in ``index`` order), from classes of hosts with
    equal values."""
    table: dict[str, dict[str, list[str]]] = {}
    severity: dict[tuple[str, str], Severity] = {}
    for hosts, values in classes:
        for key, (value, sev) in values.items():
            table.setdefault(key, {}).setdefault(value, []).extend(hosts)
            severity[key, value] = sev
    return {
        key: {v: Group(v, _ordered(h, index), severity[key, v]) for v, h in values.items()}
        for key, values in table.items()
    }


def _ordered(hosts: list[str], index: Mapping[str, int]) -> tuple[str, ...]:
    return tuple(sorted(hosts, key=index.__getitem__))


def _difference(
    kind: str, key: str, groups: dict[str, Group], hosts: Sequence[str], missing: Group
) -> Difference | None:
    """None when every host has the one value; else the norm and the outliers."""
    seen = sum(len(g.hosts) for g in groups.values())
    if missing.hosts or seen < len(hosts):
        have = {h for g in groups.values() for h in g.hosts}
        gone = tuple(h for h in hosts if h not in have)
        groups = {**groups, missing.value: Group(missing.value, gone, missing.severity)}
    if len(groups) == 1:
        return None
    first = {h: i for i, h in enumerate(hosts)}
    ranked = sorted(groups.values(), key=lambda g: (-len(g.hosts), first[g.hosts[0]]))
    norm, outliers = ranked[0], tuple(ranked[1:])
    if kind == "fact":
        severity = Severity.WARN
    else:  # as bad as the worst host's; a difference between passes is only information
        worst = min((g.severity for g in ranked), key=lambda s: s.rank)
        severity = worst if worst.rank <= Severity.WARN.rank else Severity.INFO
    return Difference(kind, key, norm, outliers, severity)


def _plural(n: int) -> str:
    return f"{n} host" + ("" if n == 1 else "s")


def difference_finding(d: Difference) -> Finding:
    """The difference as one finding: who differs, with what, against what most hosts have."""
    odd = "; ".join(f"{fold(g.hosts)} ({_plural(len(g.hosts))}): {g.value}" for g in d.outliers)
    message = f"{odd}; the other {_plural(len(d.norm.hosts))}: {d.norm.value}"
    return Finding("fleet.differs", d.severity, d.key, message)


def merge_fleet(asked: Sequence[str], results: Mapping[str, HostResult]) -> FleetReport:
    """The fleet report of ``asked``'s hosts from what each sent (module docstring)."""
    answered = tuple(h for h in asked if (r := results.get(h)) is not None and r.doc is not None)
    unreachable = {
        h: (results[h].reason if h in results else "not asked") or "no answer"
        for h in asked
        if h not in answered
    }
    docs = {h: results[h].doc for h in answered}
    offsets = {h: round(clock_offset(results[h]), 3) for h in answered}
    # hosts with the same findings, facts and clock state are one class: judged once
    classes: dict[tuple[int, int, bool], list[str]] = {}
    for h in answered:
        doc = docs[h]
        assert doc is not None
        ok = abs(offsets[h]) <= CLOCK_TOLERANCE_S
        classes.setdefault((id(doc.findings), id(doc.facts), ok), []).append(h)
    index = {h: i for i, h in enumerate(answered)}
    finding_groups = _groups(
        ((hosts, _finding_values(_doc(docs, hosts[0]))) for hosts in classes.values()), index
    )
    fact_groups = _groups(
        ((hosts, _fact_values(_doc(docs, hosts[0]), ok)) for (_, _, ok), hosts in classes.items()),
        index,
    )
    everywhere: list[Finding] = []
    differences: list[Difference] = []
    for key, groups in finding_groups.items():
        d = _difference("finding", key, groups, answered, Group(ABSENT, (), Severity.PASS))
        if d is not None:
            differences.append(d)
        else:
            everywhere.append(_one(docs, answered[0], key))
    for key, groups in fact_groups.items():
        d = _difference("fact", key, groups, answered, Group(UNSET, ()))
        if d is not None:
            differences.append(d)
    differences.sort(key=lambda d: (d.severity.rank, d.kind, sum(len(g.hosts) for g in d.outliers)))
    findings = [*everywhere, *(difference_finding(d) for d in differences)]
    by_reason: dict[str, list[str]] = {}
    for h, why in unreachable.items():
        by_reason.setdefault(why, []).append(h)
    for why, hosts in by_reason.items():
        findings.append(
            Finding("fleet.unreachable", Severity.FAIL, fold(hosts), f"no preflight: {why}")
        )
    return FleetReport(
        tuple(asked),
        answered,
        tuple(everywhere),
        tuple(differences),
        unreachable,
        offsets,
        tuple(findings),
    )


def _doc(docs: Mapping[str, HostPreflight | None], host: str) -> HostPreflight:
    doc = docs[host]
    assert doc is not None
    return doc


def _fact_values(doc: HostPreflight, clock_ok: bool) -> dict[str, tuple[str, Severity]]:
    values = {k: (v, Severity.WARN) for k, v in doc.facts.items()}
    state = "within 1 s" if clock_ok else "off by more than 1 s"
    values["clock.offset"] = (state, Severity.WARN)
    return values


def _one(docs: Mapping[str, HostPreflight | None], host: str, key: str) -> Finding:
    doc = docs[host]
    assert doc is not None
    return next(f for f in doc.findings if f"{f.check} · {f.subject}" == key)


def exclude_list(
    report: FleetReport, strict: bool, culprits: Iterable[str] = ()
) -> tuple[str, ...]:
    """Hosts to drain or leave out: outliers at fail (or warn, ``strict``), the silent, the
    benchmark's culprits; in the order they were asked."""
    worst = {Severity.FAIL, Severity.WARN} if strict else {Severity.FAIL}
    named = set(report.unreachable) | set(culprits)
    for d in report.differences:
        for g in d.outliers:
            if g.severity in worst:
                named.update(g.hosts)
    return tuple(h for h in report.asked if h in named)
