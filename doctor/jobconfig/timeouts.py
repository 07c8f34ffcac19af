"""The timeout chain: every timeout between a hang and its recovery, resolved once.

The layers, and who sets them:

    watchdog   collective timeout: init_process_group(timeout=), [distributed] timeout,
               else PyTorch's default (10m for nccl, 30m for gloo or mixed backends)
    heartbeat  TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC (480s); with TORCH_NCCL_ENABLE_MONITORING=0
               the heartbeat monitor still runs and still dumps Flight Recorder, but no
               longer ends the process (ProcessGroupNCCL.cpp, HeartbeatMonitor::runLoop)
    dump       Flight Recorder grace after a timeout: 4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC
    soft/hard  the restart wrapper ([restart]), with its grace and restart barrier
    warmup     the worst expected torch.compile warmup ([compile] warmup)

Preflight (``doctor.checks.timeouts``) judges the whole chain before launch; the
restart wrapper (``doctor.restart.timeouts``) judges, inside the rank, the
process group it was really given (``pg_timeout``). Both need the chain and the
``timeout.watchdog-vs-hard`` rule, so they live here, below both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from doctor.jobconfig.config import Config
from doctor.jobconfig.durations import format_duration
from doctor.model import Finding, Severity
from doctor.torchjob.backends import DEFAULT_COLLECTIVE_TIMEOUT_S
from doctor.torchjob.torchenv import torch_bool, torch_int

DEFAULT_WATCHDOG = DEFAULT_COLLECTIVE_TIMEOUT_S
DEFAULT_HEARTBEAT = 480.0
DEFAULT_DUMP_WAIT_MS = 15000


@dataclass(frozen=True)
class Layer:
    """One timeout of the chain, with where its value came from (for messages and fixes)."""

    key: str
    """Stable JSON key: ``watchdog``, ``heartbeat``, ``dump``, ``soft``, ``hard``, ``grace``,
    ``barrier``, ``warmup``."""
    title: str
    seconds: float | None
    """None: the layer is off or not in use."""
    source: str

    def to_json(self) -> dict[str, Any]:
        """One ``timeouts.layers`` entry of preflight's JSON."""
        return {"title": self.title, "seconds": self.seconds, "source": self.source}


@dataclass(frozen=True)
class TimeoutChain:
    """Every layer resolved once, and what they add up to: preflight judges and prints it."""

    layers: tuple[Layer, ...]
    restart: bool
    """Whether the in-process restart wrapper is on."""
    detect: float | None
    """Worst-case seconds from a hang until something acts; None = never."""
    recover: float | None
    """Worst-case seconds until the job runs again (in-process) or can be restarted."""
    recover_how: str

    def __getitem__(self, key: str) -> Layer:
        return next(layer for layer in self.layers if layer.key == key)

    def seconds(self, key: str) -> float | None:
        """Seconds of layer ``key``; None when that layer is off."""
        return self[key].seconds

    def to_json(self) -> dict[str, Any]:
        """The ``timeouts`` object of preflight's JSON."""
        return {
            "layers": {layer.key: layer.to_json() for layer in self.layers},
            "detect_seconds": self.detect,
            "recover_seconds": self.recover,
            "recover_how": self.recover_how,
        }


def _watchdog(config: Config, backend: str, pg_timeout: float | None) -> Layer:
    title = "collective timeout (watchdog)"
    if pg_timeout is not None:
        return Layer("watchdog", title, pg_timeout, "process group timeout")
    if config.distributed.timeout is not None:
        return Layer(
            "watchdog",
            title,
            config.distributed.timeout,
            f"[distributed] timeout in {config.source}",
        )
    return Layer(
        "watchdog",
        title,
        DEFAULT_WATCHDOG.get(backend, DEFAULT_WATCHDOG["mixed"]),
        f"PyTorch default for {backend} (10m nccl, 30m gloo or mixed)",
    )


def _env_layers(env: Mapping[str, str]) -> tuple[Layer, Layer]:
    monitoring = torch_bool(env, "TORCH_NCCL_ENABLE_MONITORING", True)
    beat = torch_int(env, "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC")
    heartbeat = Layer(
        "heartbeat",
        "heartbeat monitor",
        (beat if beat is not None else DEFAULT_HEARTBEAT) if monitoring else None,
        "TORCH_NCCL_ENABLE_MONITORING=0"
        if not monitoring
        else "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"
        if beat is not None
        else "PyTorch default",
    )
    buffer = torch_int(env, "TORCH_NCCL_TRACE_BUFFER_SIZE")
    dumps = torch_bool(env, "TORCH_NCCL_DUMP_ON_TIMEOUT", True) and (buffer is None or buffer > 0)
    wait_ms = torch_int(env, "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC") or DEFAULT_DUMP_WAIT_MS
    dump = Layer(
        "dump",
        "Flight Recorder dump grace",
        4 * wait_ms / 1000 if dumps else None,
        "4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC" if dumps else "no dump on timeout",
    )
    return heartbeat, dump


def resolve_timeouts(
    config: Config, env: Mapping[str, str], backend: str = "nccl", pg_timeout: float | None = None
) -> TimeoutChain:
    """Resolve every layer; ``pg_timeout`` (seconds) overrides the config's collective timeout."""
    watchdog = _watchdog(config, backend, pg_timeout)
    heartbeat, dump = _env_layers(env)
    r = config.restart
    on = r.enabled

    def restart_layer(key: str, title: str, field: str) -> Layer:
        if not on:
            return Layer(key, title, None, "restart wrapper off")
        source = (
            f"[restart] {field} in {config.source}"
            if f"restart.{field}" in config.explicit
            else "[restart] default"
        )
        return Layer(key, title, getattr(r, field), source)

    warmup = config.compile.warmup
    layers = (
        watchdog,
        heartbeat,
        dump,
        restart_layer("soft", "wrapper soft timeout", "soft_timeout"),
        restart_layer("hard", "wrapper hard timeout", "hard_timeout"),
        restart_layer("grace", "wrapper termination grace", "termination_grace_time"),
        restart_layer("barrier", "wrapper restart barrier", "barrier_timeout"),
        Layer(
            "warmup",
            "compile warmup",
            warmup,
            f"[compile] warmup in {config.source}" if warmup is not None else "no compile",
        ),
    )
    assert watchdog.seconds is not None
    if on:
        detect: float | None = r.soft_timeout
        recover: float | None = max(
            r.soft_timeout + r.barrier_timeout, r.hard_timeout + r.termination_grace_time
        )
        how = (
            "in-process restart: soft timeout + restart barrier; a rank stuck past the "
            "hard timeout is killed after the grace time"
        )
    else:
        detect = watchdog.seconds
        handling = torch_int(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING")
        if handling == 0:
            recover, how = None, "never: TORCH_NCCL_ASYNC_ERROR_HANDLING=0 leaves ranks hanging"
        else:
            recover = watchdog.seconds + (dump.seconds or 0)
            how = "a job restart: the watchdog ends the process, torchrun or the scheduler restarts"
    return TimeoutChain(layers, on, detect, recover, how)


def seconds_above(seconds: float | None) -> float:
    """A round number of minutes comfortably above ``seconds``, for fixes."""
    return math.ceil((seconds or 0) * 1.25 / 60) * 60


def watchdog_vs_hard(chain: TimeoutChain) -> Finding:
    """``timeout.watchdog-vs-hard``: the collective timeout must outlast the wrapper's hard
    timeout, or the NCCL watchdog kills the rank before the wrapper can restart it."""
    f = format_duration
    watchdog, hard = chain.seconds("watchdog"), chain.seconds("hard")
    check, subject = "timeout.watchdog-vs-hard", "watchdog"
    if hard is None:
        return Finding(check, Severity.PASS, subject, "the restart wrapper is off.")
    if watchdog is not None and watchdog > hard:
        return Finding(
            check, Severity.PASS, subject, f"watchdog {f(watchdog)} > hard timeout {f(hard)}."
        )
    return Finding(
        check,
        Severity.FAIL,
        subject,
        f"the collective timeout ({f(watchdog or 0)}, {chain['watchdog'].source}) is not longer "
        f"than the wrapper's hard timeout ({f(hard)}): the NCCL watchdog kills the process "
        "before the wrapper can restart it in place.",
        # a fix the environment cannot make is a shell comment (doctor.checks.fixes)
        f'# [distributed] timeout = "{f(seconds_above(hard))}"  (nccl-doctor.toml, '
        "and pass it to init_process_group)",
    )
