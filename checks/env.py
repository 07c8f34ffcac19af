"""``env.*``: unread names, deprecated aliases, values parsed into something else, debug logs.

Neither NCCL nor PyTorch warns about an unknown variable, and NCCL parses
integers with ``strtoll`` without checking what is left, so a typo in a name or
a value is silently a different configuration. Variables with an empty value
are skipped: NCCL treats them as unset.
"""

from __future__ import annotations

from doctor.checks import fixes
from doctor.checks.catalogue import (
    STILL_READ_ALIASES,
    catalogue,
    in_checked_namespace,
    suggest,
    unread,
)
from doctor.checks.facts import Facts
from doctor.checks.values import check_value
from doctor.model import Finding, Severity

DEBUG_LEVELS = {
    "NCCL_DEBUG": (
        ("INFO", "TRACE"),
        "logs on every rank (TRACE: every call), which slows "
        "communicator setup and buries the one line that matters; use WARN, with "
        "NCCL_DEBUG_FILE, in production",
    ),
    "TORCH_DISTRIBUTED_DEBUG": (
        ("DETAIL",),
        "wraps every process group with collective "
        "consistency checks and desync debug: extra collectives every "
        "step; unset it in production",
    ),
}


def _set(facts: Facts) -> list[tuple[str, str]]:
    return sorted((k, v) for k, v in facts.env.items() if v != "")


def _where(facts: Facts, name: str) -> str:
    return f" (set in {facts.source(name)})" if facts.from_file(name) else ""


def _passed(check: str, message: str) -> list[Finding]:
    return [Finding(check, Severity.PASS, "environment", message)]


def check_unknown(facts: Facts) -> list[Finding]:
    """``env.unknown``: a name in NCCL's or c10d's namespace that nothing reads."""
    specs, removed = catalogue(), unread()
    found = []
    for name, _ in _set(facts):
        if not in_checked_namespace(name):
            continue
        if name in removed:
            gone = removed[name]
            message = f"{name} is read by nothing ({gone.why}); instead: {gone.instead}."
            fix = fixes.unset(facts, name)
        elif name not in specs:
            near = suggest(name)
            hint = f"; did you mean {near}?" if near else ""
            message = f"{name} is not read by NCCL 2.30 or PyTorch 2.13{hint}"
            fix = (fixes.export(near, facts.env[name]) + "\n" if near else "") + fixes.unset(
                facts, name
            )
        else:
            continue
        found.append(
            Finding("env.unknown", Severity.WARN, name, message + _where(facts, name), fix)
        )
    return found or _passed(
        "env.unknown",
        "every NCCL_*/TORCH_NCCL_*/TORCH_DISTRIBUTED_*/"
        "TORCH_FR_* variable set is read by NCCL or PyTorch",
    )


def check_deprecated(facts: Facts) -> list[Finding]:
    """``env.deprecated``: an alias that still works but loses to, or hides, its current name."""
    specs = catalogue()
    found = []
    for name, value in _set(facts):
        spec = specs.get(name)
        if spec is None or not spec.read:
            continue
        if spec.alias_of and name not in STILL_READ_ALIASES:
            current = spec.alias_of
            shadow = (
                f"; {current} is also set and wins"
                if facts.env.get(current)
                else "; it is only read while the current name is unset"
            )
            fix = fixes.unset(facts, name)
            if not facts.env.get(current):
                same_meaning = current in specs and check_value(specs[current], value) is None
                fix = (
                    (
                        fixes.export(current, value)
                        if same_meaning
                        else fixes.config_change(
                            f"set {current} to the equivalent of {name}={value}"
                        )
                    )
                    + "\n"
                    + fix
                )
            found.append(
                Finding(
                    "env.deprecated",
                    Severity.WARN,
                    name,
                    f"{name} is a deprecated alias of {current}{shadow}." + _where(facts, name),
                    fix,
                )
            )
        elif spec.deprecated_no_op:
            found.append(
                Finding(
                    "env.deprecated",
                    Severity.INFO,
                    name,
                    f"{name} no longer does anything: {spec.meaning}.",
                    fixes.unset(facts, name),
                )
            )
    return found or _passed("env.deprecated", "no deprecated alias is set")


def check_values(facts: Facts) -> list[Finding]:
    """``env.invalid-value``: a value outside its type or allowed set, judged like its reader."""
    specs = catalogue()
    found = []
    for name, value in _set(facts):
        spec = specs.get(name)
        problem = check_value(spec, value) if spec and spec.read else None
        if problem is None or spec is None:
            continue
        fix = (
            fixes.export(name, problem.fixed)
            if problem.fixed is not None
            else fixes.config_change(f"{name} accepts: {spec.allowed or spec.type}")
            + "\n"
            + fixes.unset(facts, name)
        )
        severity = Severity.FAIL if problem.severe else Severity.WARN
        found.append(
            Finding(
                "env.invalid-value",
                severity,
                name,
                f"{name}={value}: {problem.message}." + _where(facts, name),
                fix,
            )
        )
    return found or _passed(
        "env.invalid-value", "every catalogued variable has a value its reader parses as written"
    )


def check_debug(facts: Facts) -> list[Finding]:
    """``env.debug-in-production``: verbose NCCL/c10d logging that slows and floods every rank."""
    found = []
    for name, (levels, why) in DEBUG_LEVELS.items():
        value = facts.env.get(name, "")
        if value.upper() in levels:
            fix = fixes.export(name, "WARN") if name == "NCCL_DEBUG" else fixes.unset(facts, name)
            found.append(
                Finding(
                    "env.debug-in-production",
                    Severity.WARN,
                    name,
                    f"{name}={value} {why}." + _where(facts, name),
                    fix,
                )
            )
    return found or _passed("env.debug-in-production", "no debug-level NCCL or c10d logging")


def run(facts: Facts) -> list[Finding]:
    """The ``env.*`` findings."""
    return [
        *check_unknown(facts),
        *check_deprecated(facts),
        *check_values(facts),
        *check_debug(facts),
    ]
