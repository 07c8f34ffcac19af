"""The ``timeout.*`` checks: the layers of the timeout chain must nest.

The chain (``doctor.jobconfig.timeouts``) is resolved once, when the facts are built
(``Facts.timeouts``). Its layers must nest: soft < hard < watchdog, and
warmup < watchdog and heartbeat, or one layer kills the process before the
next can recover it. ``timeout.watchdog-vs-hard`` is ``doctor.jobconfig.timeouts``'s,
shared with the restart wrapper, which judges the process group it is given.
"""

from __future__ import annotations

import math

from doctor.checks import fixes
from doctor.checks.facts import Facts
from doctor.jobconfig.durations import format_duration
from doctor.jobconfig.timeouts import TimeoutChain, seconds_above, watchdog_vs_hard
from doctor.model import Finding, Severity


def _above(seconds: float) -> str:
    return format_duration(seconds_above(seconds))


def _ok(check: str, subject: str, message: str) -> Finding:
    return Finding(check, Severity.PASS, subject, message)


def timeout_findings(chain: TimeoutChain) -> list[Finding]:
    """The ``timeout.*`` findings of a resolved chain, one per check id, in DESIGN order."""
    f = format_duration
    watchdog = chain.seconds("watchdog")
    assert watchdog is not None
    soft, hard, warmup = chain.seconds("soft"), chain.seconds("hard"), chain.seconds("warmup")
    heartbeat = chain.seconds("heartbeat")
    out = [watchdog_vs_hard(chain)]
    if soft is None or hard is None:
        out.append(_ok("timeout.soft-vs-hard", "restart", "the restart wrapper is off."))
    elif soft >= hard:
        out.append(
            Finding(
                "timeout.soft-vs-hard",
                Severity.FAIL,
                "restart",
                f"the wrapper's soft timeout ({f(soft)}) is not shorter than its hard timeout "
                f"({f(hard)}): the process is killed before the in-process restart is tried.",
                fixes.config_change(f'[restart] soft_timeout = "{f(math.floor(hard * 2 / 3))}"'),
            )
        )
    else:
        out.append(_ok("timeout.soft-vs-hard", "restart", f"soft {f(soft)} < hard {f(hard)}."))
    out.append(
        _warmup_vs(
            "timeout.heartbeat-vs-warmup",
            "heartbeat",
            heartbeat,
            warmup,
            Severity.WARN,
            fixes.export("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", str(int(seconds_above(warmup)))),
        )
    )
    out.append(
        _warmup_vs(
            "timeout.watchdog-vs-warmup",
            "watchdog",
            watchdog,
            warmup,
            Severity.FAIL,
            fixes.config_change(f'[distributed] timeout = "{_above(warmup or 0)}"'),
        )
    )
    if heartbeat is None:
        out.append(
            Finding(
                "timeout.monitoring-disabled",
                Severity.WARN,
                "TORCH_NCCL_ENABLE_MONITORING",
                "TORCH_NCCL_ENABLE_MONITORING=0: the heartbeat monitor still dumps Flight "
                "Recorder, but nothing ends a rank whose watchdog is itself stuck, so a real "
                "hang looks like a slow compile forever.",
                fixes.export("TORCH_NCCL_ENABLE_MONITORING", "1"),
            )
        )
    else:
        out.append(
            _ok(
                "timeout.monitoring-disabled",
                "TORCH_NCCL_ENABLE_MONITORING",
                f"heartbeat monitor on ({f(heartbeat)}).",
            )
        )
    return out


def _warmup_vs(
    check: str,
    layer: str,
    seconds: float | None,
    warmup: float | None,
    severity: Severity,
    fix: str,
) -> Finding:
    f = format_duration
    if warmup is None:
        return _ok(check, layer, "no compile warmup configured ([compile] warmup).")
    if seconds is None:
        return _ok(check, layer, f"the {layer} is off.")
    if seconds <= warmup:
        return Finding(
            check,
            severity,
            layer,
            f"the {layer} timeout ({f(seconds)}) is not longer than the expected "
            f"compile warmup ({f(warmup)}): ranks still compiling are killed as hung.",
            fix,
        )
    return _ok(check, layer, f"{layer} {f(seconds)} > compile warmup {f(warmup)}.")


def run(facts: Facts) -> list[Finding]:
    """The ``timeout.*`` findings of the chain resolved with the facts."""
    return timeout_findings(facts.timeouts)
