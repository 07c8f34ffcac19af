"""``plugin.missing`` and ``plugin.restart``: NCCL plugin libraries, looked up as NCCL does.

NCCL ``dlopen``s the value of ``NCCL_<KIND>_PLUGIN`` as given, then, when it is
a bare name (no ``/``, not already ``lib*.so``), ``libnccl-<kind>-<name>.so``.
A bare name is searched by the dynamic loader: ``LD_LIBRARY_PATH``, the
loader cache, the default directories (and libnccl's own RUNPATH, which is the
NCCL wheel's ``lib`` folder). If nothing loads, NCCL logs one INFO line and
carries on without the plugin, so a typo silently drops a cloud fabric back to
TCP sockets. ``none`` (any case) turns a plugin off; unset, NCCL tries the
default ``libnccl-net.so``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from doctor.checks import fixes
from doctor.checks.facts import Facts
from doctor.model import Finding, Severity

PLUGIN_VARS = {
    "NCCL_NET_PLUGIN": "libnccl-net",
    "NCCL_TUNER_PLUGIN": "libnccl-tuner",
    "NCCL_PROFILER_PLUGIN": "libnccl-profiler",
    "NCCL_ENV_PLUGIN": "libnccl-env",
    "NCCL_GIN_PLUGIN": "libnccl-gin",
}
DEFAULT_NET_PLUGIN = "libnccl-net.so"


@dataclass(frozen=True)
class PluginRequest:
    """One plugin name that NCCL will try to load, and the files it tries, in order."""

    variable: str
    name: str
    candidates: tuple[str, ...]


def candidates(prefix: str, name: str) -> tuple[str, ...]:
    """The files ``openPluginLib`` tries for ``name``."""
    if "/" not in name and not (name.startswith("lib") and name.endswith(".so")):
        return (name, f"{prefix}-{name}.so")
    return (name,)


def requests(env: Mapping[str, str]) -> list[PluginRequest]:
    """Every named plugin in ``env`` (``NCCL_NET_PLUGIN`` is a comma list); ``none`` names none."""
    found = []
    for variable, prefix in PLUGIN_VARS.items():
        value = env.get(variable, "")
        if not value or value.lower() == "none":
            continue
        if value.upper() == "STATIC_PLUGIN" and variable == "NCCL_PROFILER_PLUGIN":
            continue
        names = value.split(",") if variable == "NCCL_NET_PLUGIN" else [value]
        found += [PluginRequest(variable, n, candidates(prefix, n)) for n in names if n]
    return found


def library_names(env: Mapping[str, str]) -> set[str]:
    """Every library file the checks will ask about (for ``checks.gather`` to resolve)."""
    return {c for r in requests(env) for c in r.candidates} | {DEFAULT_NET_PLUGIN}


def resolved(facts: Facts, request: PluginRequest) -> str | None:
    """The path NCCL would load for ``request``, or None."""
    return next((p for c in request.candidates if (p := facts.libraries.get(c))), None)


def external_net_plugin(facts: Facts) -> str | None:
    """The external net plugin NCCL will load here, if any (used by the lane checks too)."""
    value = facts.env.get("NCCL_NET_PLUGIN", "")
    if value.lower() == "none":
        return None
    if not value:
        return facts.libraries.get(DEFAULT_NET_PLUGIN)
    nets = [r for r in requests(facts.env) if r.variable == "NCCL_NET_PLUGIN"]
    return next((p for r in nets if (p := resolved(facts, r))), None)


def check_missing(facts: Facts) -> list[Finding]:
    """``plugin.missing``: a named plugin no candidate file of which the loader would find."""
    found = []
    for request in requests(facts.env):
        if resolved(facts, request):
            continue
        net = request.variable == "NCCL_NET_PLUGIN"
        tried = " or ".join(request.candidates)
        found.append(
            Finding(
                "plugin.missing",
                Severity.FAIL if net else Severity.WARN,
                request.variable,
                f"{request.variable} names {request.name!r} but the loader finds no {tried} "
                "(LD_LIBRARY_PATH, the loader cache, default directories, the NCCL wheel): NCCL "
                "logs one INFO line and runs without it"
                + (", falling back to its internal IB/socket transports." if net else "."),
                fixes.comment(
                    f"add the directory holding {request.candidates[-1]} to LD_LIBRARY_PATH, or"
                )
                + "\n"
                + (
                    fixes.export(request.variable, "none")
                    if net
                    else fixes.unset(facts, request.variable)
                ),
            )
        )
    if found:
        return found
    named = ", ".join(f"{r.name} -> {resolved(facts, r)}" for r in requests(facts.env))
    return [
        Finding(
            "plugin.missing",
            Severity.PASS,
            "plugins",
            f"every named plugin loads: {named}" if named else "no NCCL plugin is named",
        )
    ]


def check_restart(facts: Facts) -> list[Finding]:
    """An external net plugin may not implement abort; the in-process wrapper needs abort."""
    if not facts.config.restart.enabled:
        return [
            Finding(
                "plugin.restart",
                Severity.PASS,
                "NCCL_NET_PLUGIN",
                "the restart wrapper is off ([restart] enabled = false).",
            )
        ]
    value = facts.env.get("NCCL_NET_PLUGIN", "")
    fix = fixes.export("NCCL_NET_PLUGIN", "none")
    if value.lower() == "none":
        return [
            Finding(
                "plugin.restart",
                Severity.PASS,
                "NCCL_NET_PLUGIN",
                "NCCL_NET_PLUGIN=none: NCCL's internal transports can be aborted.",
            )
        ]
    if value:
        return [
            Finding(
                "plugin.restart",
                Severity.FAIL,
                "NCCL_NET_PLUGIN",
                f"the restart wrapper is on while NCCL_NET_PLUGIN={value}: an external "
                "net plugin may not support communicator abort, so a restart can hang "
                "in ncclCommAbort instead of recovering.",
                fix,
            )
        ]
    default = facts.libraries.get(DEFAULT_NET_PLUGIN)
    if default:
        return [
            Finding(
                "plugin.restart",
                Severity.WARN,
                "NCCL_NET_PLUGIN",
                f"NCCL_NET_PLUGIN is unset, so NCCL loads {default} while the restart "
                "wrapper is on; that plugin may not support communicator abort.",
                fix,
            )
        ]
    return [
        Finding(
            "plugin.restart",
            Severity.PASS,
            "NCCL_NET_PLUGIN",
            f"NCCL_NET_PLUGIN is unset and no {DEFAULT_NET_PLUGIN} is on the loader "
            "path: only NCCL's internal transports load.",
        )
    ]


def run(facts: Facts) -> list[Finding]:
    return [*check_missing(facts), *check_restart(facts)]
