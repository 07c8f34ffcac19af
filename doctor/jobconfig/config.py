"""The one config file read by preflight, launch and the restart wrapper.

``nccl-doctor.toml`` (or ``[tool.nccl-doctor]`` in ``pyproject.toml``) in the
working directory, or the file named by ``--config`` / ``NCCL_DOCTOR_CONFIG``.
Unknown keys, wrong types and malformed files raise ``ConfigError`` naming the
key and its line, because a typo in a timeout is exactly the silent
misconfiguration this tool exists to catch.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from doctor.errors import ConfigError
from doctor.jobconfig import watch_settings
from doctor.jobconfig.durations import parse_duration
from doctor.jobconfig.watch_settings import WatchConfig

CONFIG_NAME = "nccl-doctor.toml"
CONFIG_ENV = "NCCL_DOCTOR_CONFIG"
LANES = ("auto", "single-node", "multi-node")


@dataclass(frozen=True)
class DistributedConfig:
    timeout: float | None = None
    """The collective timeout passed to init_process_group; None = PyTorch's default."""


@dataclass(frozen=True)
class RestartConfig:
    enabled: bool = False
    soft_timeout: float = 60.0
    hard_timeout: float = 90.0
    heartbeat_timeout: float = 30.0
    barrier_timeout: float = 120.0
    completion_timeout: float = 120.0
    last_call_wait: float = 1.0
    termination_grace_time: float = 5.0
    max_iterations: int | None = None
    spares: int = 0
    """Ranks kept in reserve by ``launch --wrap``: one takes the place of an excluded rank."""


@dataclass(frozen=True)
class CompileConfig:
    warmup: float | None = None
    """Worst expected torch.compile warmup; None = no compile."""


@dataclass(frozen=True)
class LaneConfig:
    kind: str = "auto"


@dataclass(frozen=True)
class Config:
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    restart: RestartConfig = field(default_factory=RestartConfig)
    compile: CompileConfig = field(default_factory=CompileConfig)
    lane: LaneConfig = field(default_factory=LaneConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    source: str | None = None
    """The file it came from; None when every value is a default."""
    explicit: frozenset[str] = frozenset()
    """Dotted keys the file set (``restart.hard_timeout``), so checks can tell set from default."""


_SECTIONS: dict[str, type] = {
    "distributed": DistributedConfig,
    "restart": RestartConfig,
    "compile": CompileConfig,
    "lane": LaneConfig,
    "watch": WatchConfig,
}
_DURATION_KEYS = {
    "distributed.timeout",
    "restart.soft_timeout",
    "restart.hard_timeout",
    "restart.heartbeat_timeout",
    "restart.barrier_timeout",
    "restart.completion_timeout",
    "restart.last_call_wait",
    "restart.termination_grace_time",
    "compile.warmup",
}


def find_config(explicit: str | Path | None, env: Mapping[str, str], cwd: Path) -> Path | None:
    """The config file in force: --config, then $NCCL_DOCTOR_CONFIG, then the working directory."""
    chosen = explicit or env.get(CONFIG_ENV)
    if chosen:
        path = Path(chosen)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        return path
    for name in (CONFIG_NAME, "pyproject.toml"):
        path = cwd / name
        if path.is_file() and (name == CONFIG_NAME or _has_tool_table(path)):
            return path
    return None


def load_config(
    explicit: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """Find and parse the config; the defaults when there is none."""
    path = find_config(explicit, env if env is not None else {}, cwd or Path.cwd())
    return parse_config_file(path) if path else Config()


def parse_config_file(path: Path) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    prefix: tuple[str, ...] = ()
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("nccl-doctor", {})
        prefix = ("tool", "nccl-doctor")
    return parse_config(data, text, str(path), prefix)


def parse_config(
    data: Mapping[str, Any], text: str = "", source: str = "<config>", prefix: tuple[str, ...] = ()
) -> Config:
    """Validate a parsed TOML mapping into a ``Config``; ``text`` lets errors name lines."""

    def fail(key: str, problem: str) -> ConfigError:
        where = _line_of(text, prefix, key)
        at = f" (line {where})" if where else ""
        return ConfigError(f"{source}{at}: {problem}")

    sections: dict[str, Any] = {}
    explicit: set[str] = set()
    for name, table in data.items():
        if name not in _SECTIONS:
            raise fail(name, f"unknown section [{name}]; known: {', '.join(_SECTIONS)}")
        if not isinstance(table, Mapping):
            raise fail(name, f"[{name}] must be a table")
        cls = _SECTIONS[name]
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in table.items():
            dotted = f"{name}.{key}"
            if key not in known:
                raise fail(dotted, f"unknown key {dotted!r}; known in [{name}]: {', '.join(known)}")
            try:
                values[key] = _coerce(dotted, raw)
            except ValueError as exc:
                where = getattr(exc, "key", dotted)  # a nested table names its own entry
                raise fail(where, f"{where}: {exc}") from None
            explicit.add(dotted)
        sections[name] = cls(**values)
    return Config(**sections, source=source, explicit=frozenset(explicit))


def _coerce(dotted: str, raw: Any) -> Any:
    if dotted in _DURATION_KEYS:
        seconds = parse_duration(raw)
        if seconds == 0 and dotted.endswith("timeout"):
            raise ValueError("a timeout of 0 would end every wait at once; give a positive one")
        return seconds
    if dotted == "restart.enabled":
        if not isinstance(raw, bool):
            raise ValueError("must be true or false")
        return raw
    if dotted.startswith("watch."):
        return watch_settings.coerce(dotted.removeprefix("watch."), raw)
    if dotted == "restart.spares":
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise ValueError("must be a whole number, 0 or more")
        return raw
    if dotted == "restart.max_iterations":
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            raise ValueError("must be a positive integer")
        return raw
    if dotted == "lane.kind":
        if raw not in LANES:
            raise ValueError(f"must be one of {', '.join(LANES)}, not {raw!r}")
        return raw
    raise AssertionError(dotted)  # every key of every section is handled above


def _has_tool_table(pyproject: Path) -> bool:
    try:
        return "nccl-doctor" in tomllib.loads(pyproject.read_text()).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False


def _line_of(text: str, prefix: tuple[str, ...], dotted: str) -> int | None:
    """The 1-based line where ``dotted`` (``section`` or ``section.key``) is written."""
    section, _, key = dotted.partition(".")
    header = ".".join((*prefix, section))
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        table = re.fullmatch(r"\[\s*([^\]]+?)\s*\]", stripped)
        if table:
            current = table.group(1).replace('"', "")
            if not key and current == header:
                return number
            continue
        name = re.match(r"([A-Za-z0-9_.\"-]+)\s*=", stripped)
        if not name:
            continue
        written = name.group(1).replace('"', "")
        full = f"{current}.{written}" if current else written
        if full in (f"{header}.{key}" if key else header,) or (
            not key and full.startswith(header + ".")
        ):
            return number
    return None
