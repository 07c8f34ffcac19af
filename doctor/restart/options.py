"""The wrapper's timeouts: NVIDIA's argument names, seconds or timedelta, config defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import timedelta

from doctor.config import RestartConfig, parse_duration


@dataclass(frozen=True)
class RestartOptions:
    """Every duration in seconds; ``max_iterations`` None means no retry limit."""

    soft_timeout: float = 60.0
    hard_timeout: float = 90.0
    heartbeat_timeout: float = 30.0
    barrier_timeout: float = 120.0
    completion_timeout: float = 120.0
    last_call_wait: float = 1.0
    termination_grace_time: float = 5.0
    max_iterations: int | None = None
    monitor_thread_interval: float = 0.05
    """How long a monitor thread blocks in one store wait; faults wake it at once."""
    monitor_process_interval: float = 0.1
    """The clock of the monitor process (hard timeout precision)."""
    heartbeat_interval: float = 0.5
    progress_watchdog_interval: float = 0.2
    """How often the automatic heartbeat is scheduled into the main thread."""

    @classmethod
    def build(cls, config: RestartConfig | None = None,
              **overrides: float | timedelta | str | int | None) -> RestartOptions:
        """Config defaults, then explicit arguments; raises ValueError on an impossible set."""
        base = config or RestartConfig()
        known = {f.name for f in fields(cls)}
        values = {f.name: getattr(base, f.name) for f in fields(base) if f.name in known}
        options = replace(cls(), **values)
        changes: dict[str, float | int | None] = {}
        for name, value in overrides.items():
            if name not in known:
                raise TypeError(f"unknown restart option {name!r}")
            if value is None:
                continue
            if name == "max_iterations":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError("max_iterations must be a positive integer")
                changes[name] = value
            else:
                changes[name] = _seconds(name, value)
        options = replace(options, **changes)
        options.validate()
        return options

    def validate(self) -> None:
        """The orderings that make the timeouts meaningful (NVIDIA enforces the same)."""
        rules = [
            (self.soft_timeout < self.hard_timeout,
             "soft_timeout must be shorter than hard_timeout"),
            (self.hard_timeout < self.barrier_timeout,
             "hard_timeout must be shorter than barrier_timeout"),
            (self.heartbeat_interval < self.heartbeat_timeout,
             "heartbeat_interval must be shorter than heartbeat_timeout"),
            (self.progress_watchdog_interval < self.soft_timeout,
             "progress_watchdog_interval must be shorter than soft_timeout"),
            (self.monitor_process_interval < self.soft_timeout,
             "monitor_process_interval must be shorter than soft_timeout"),
        ]
        for ok, message in rules:
            if not ok:
                raise ValueError(message)


def _seconds(name: str, value: object) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
