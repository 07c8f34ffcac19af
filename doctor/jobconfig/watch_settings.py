"""``[watch]`` and ``[watch.actions]`` of ``nccl-doctor.toml``: what the watcher does, per verdict.

The defaults are what a careful operator would choose (docs/watch.md explains each):

=====================  ============  =================================================
hang class             action        why
=====================  ============  =================================================
collective_mismatch    stop          a bug in the code: a restart hangs at the same step
unsupported_op         stop          the backend refuses the op: it fails the same way
cpu_stuck              restart       a loader, a filesystem, a lock: often passes once
network                restart       a transient link error usually clears on reconnect
straggler              restart       only reached once the job stalled past the limit
gpu_hang               exclude       an Xid/ECC GPU hangs again on the next iteration
rank_loss              exclude       a lost host does not come back in place
unknown                restart-once  one try is cheap; a second unknown needs a person
bootstrap              restart-once  a rendezvous race clears, a wrong interface does not
compile_warmup         none          still compiling: the stall clock starts again
healthy                none          the job moved while it was looked at: a false alarm
=====================  ============  =================================================

Bounds on top of the table: at most ``max_restarts`` restarts in ``repeat_window``,
and the same verdict at the same place again within the window stops the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from doctor.jobconfig.durations import parse_duration
from doctor.model import HangClass


class Action(StrEnum):
    """What the watcher may do about a verdict."""

    STOP = "stop"
    """Stop every rank, exit 93 (do not requeue), print the playbook."""
    RESTART = "restart"
    """Restart in place through the wrapper (bounded by ``max_restarts``)."""
    RESTART_ONCE = "restart-once"
    """Restart in place the first time this class is seen, stop the second time."""
    EXCLUDE = "exclude"
    """Take the culprit's failure domain out (a spare takes its place), else stop with 94."""
    NONE = "none"
    """Record the event, do nothing."""


DEFAULT_ACTIONS: Mapping[str, Action] = MappingProxyType(
    {
        cls.value: action
        for cls, action in (
            (HangClass.COLLECTIVE_MISMATCH, Action.STOP),
            (HangClass.UNSUPPORTED_OP, Action.STOP),
            (HangClass.CPU_STUCK, Action.RESTART),
            (HangClass.NETWORK, Action.RESTART),
            (HangClass.STRAGGLER, Action.RESTART),
            (HangClass.GPU_HANG, Action.EXCLUDE),
            (HangClass.RANK_LOSS, Action.EXCLUDE),
            (HangClass.UNKNOWN, Action.RESTART_ONCE),
            (HangClass.BOOTSTRAP, Action.RESTART_ONCE),
            (HangClass.COMPILE_WARMUP, Action.NONE),
            (HangClass.HEALTHY, Action.NONE),
        )
    }
)


@dataclass(frozen=True)
class WatchConfig:
    """``[watch]``: detection from progress and the policy table."""

    enabled: bool = False
    """Turn the watcher on for every ``launch`` (same as ``launch --watch``)."""
    stall_factor: float = 2.5
    """A stall is no progress for this many of the job's own (learned) step times."""
    min_stall: float = 5.0
    """...but never less than this (seconds): the floor under very short steps."""
    sample_interval: float = 2.0
    """How often ranks that do not ``ping()`` are sampled (Flight Recorder, /proc)."""
    max_restarts: int = 3
    """Restarts the watcher may make within ``repeat_window``; one more stop the job."""
    repeat_window: float = 3600.0
    """How long a verdict is remembered for ``max_restarts`` and repeats (seconds)."""
    actions: Mapping[str, Action] = field(default_factory=lambda: DEFAULT_ACTIONS)
    """Hang class -> action; a table in the file overrides only the classes it names."""

    def action_for(self, hang_class: HangClass) -> Action:
        return self.actions.get(hang_class.value, Action.NONE)


class SubkeyError(ValueError):
    """A bad entry inside a nested table; ``key`` is its dotted name (for the line number)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def coerce(key: str, raw: Any) -> Any:
    """The validated value of ``watch.<key>``; ValueError (or SubkeyError) says what is wrong."""
    if key == "enabled":
        if not isinstance(raw, bool):
            raise ValueError("must be true or false")
        return raw
    if key in ("min_stall", "sample_interval", "repeat_window"):
        seconds = parse_duration(raw)
        if seconds <= 0:
            raise ValueError("must be longer than zero")
        return seconds
    if key == "stall_factor":
        if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 1:
            raise ValueError("must be a number of step times, at least 1")
        return float(raw)
    if key == "max_restarts":
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise ValueError("must be a whole number, 0 or more")
        return raw
    if key == "actions":
        return _actions(raw)
    raise AssertionError(key)  # every field of WatchConfig is handled above


def _actions(raw: Any) -> Mapping[str, Action]:
    if not isinstance(raw, Mapping):
        raise ValueError('must be a table: [watch.actions] with hang_class = "action" lines')
    classes = [c.value for c in HangClass]
    table = dict(DEFAULT_ACTIONS)
    for name, value in raw.items():
        dotted = f"watch.actions.{name}"
        if name not in classes:
            raise SubkeyError(dotted, f"unknown hang class {name!r}; known: {', '.join(classes)}")
        if value not in [a.value for a in Action]:
            raise SubkeyError(
                dotted,
                f"must be one of {', '.join(a.value for a in Action)}, not {value!r}",
            )
        table[name] = Action(value)
    return MappingProxyType(table)
