"""The wrapper's timeouts: NVIDIA's argument names, seconds or timedelta, config defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from datetime import timedelta
from typing import Any

from doctor.jobconfig.config import RestartConfig
from doctor.jobconfig.durations import parse_duration


@dataclass(frozen=True)
class RestartOptions(RestartConfig):
    """The ``[restart]`` config (seconds; ``max_iterations`` None = no limit) plus intervals."""

    monitor_thread_interval: float = 0.05
    """How often a rank that finished polls the completion barrier (faults wake at once)."""
    monitor_process_interval: float = 0.1
    """The clock of the monitor process (hard timeout precision)."""
    heartbeat_interval: float = 0.5
    progress_watchdog_interval: float = 0.2
    """How often the automatic heartbeat is scheduled into the main thread."""

    @classmethod
    def build(
        cls, config: RestartConfig | None = None, **overrides: float | timedelta | str | int | None
    ) -> RestartOptions:
        """Config defaults, then explicit arguments; raises ValueError on an impossible set."""
        known = {f.name for f in fields(cls)}
        options = cls(**asdict(config or RestartConfig()))
        changes: dict[str, Any] = {}  # checked one by one below, per field
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
            (
                self.soft_timeout < self.hard_timeout,
                "soft_timeout must be shorter than hard_timeout",
            ),
            (
                self.hard_timeout < self.barrier_timeout,
                "hard_timeout must be shorter than barrier_timeout",
            ),
            (
                self.heartbeat_interval < self.heartbeat_timeout,
                "heartbeat_interval must be shorter than heartbeat_timeout",
            ),
            (
                self.progress_watchdog_interval < self.soft_timeout,
                "progress_watchdog_interval must be shorter than soft_timeout",
            ),
            (
                self.monitor_process_interval < self.soft_timeout,
                "monitor_process_interval must be shorter than soft_timeout",
            ),
        ]
        for ok, message in rules:
            if not ok:
                raise ValueError(message)


def _seconds(name: str, value: object) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
