"""The config contract: durations, known keys, and errors that name the key and line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from doctor.errors import ConfigError
from doctor.jobconfig.config import Config, find_config, load_config, parse_config
from doctor.jobconfig.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("2h", 7200),
        ("1h30m", 5400),
        ("500ms", 0.5),
        (45, 45),
        (2.5, 2.5),
        ("120", 120),
        (" 3 m ", 180),
        ("1d", 86400),
    ],
)
def test_parse_duration_accepts_units_and_numbers(raw: object, seconds: float) -> None:
    assert parse_duration(raw) == seconds


@pytest.mark.parametrize("raw", ["", "abc", "10x", "10m extra", True, -1, [1], "m10"])
def test_parse_duration_rejects_garbage(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(raw)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(600, "10m"), (90, "90s"), (7200, "2h"), (0.5, "0.5s"), (3600 + 60, "61m")],
)
def test_format_duration_is_the_shortest_exact_spelling(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


FULL = """\
[distributed]
timeout = "10m"
[restart]
enabled = true
soft_timeout = "60s"
hard_timeout = "90s"
heartbeat_timeout = "30s"
barrier_timeout = "120s"
completion_timeout = "120s"
last_call_wait = "1s"
termination_grace_time = "5s"
max_iterations = 10
[compile]
warmup = "20m"
[lane]
kind = "auto"
"""


def test_the_design_example_parses_to_seconds() -> None:
    # GIVEN the config file of DESIGN.md WHEN parsed THEN every duration is in seconds
    config = parse_config(tomllib.loads(FULL), FULL, "nccl-doctor.toml")
    assert config.distributed.timeout == 600
    assert config.restart.enabled is True
    assert (config.restart.soft_timeout, config.restart.hard_timeout) == (60, 90)
    assert config.restart.max_iterations == 10
    assert config.compile.warmup == 1200
    assert config.lane.kind == "auto"
    assert "restart.hard_timeout" in config.explicit
    assert "restart.enabled" in config.explicit


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            '[restart]\nenabled = true\nhard_timout = "90s"\n',
            "line 3): unknown key 'restart.hard_timout'",
        ),
        ("[restarts]\nenabled = true\n", "line 1): unknown section [restarts]"),
        ('[restart]\nsoft_timeout = "soon"\n', "line 2): restart.soft_timeout"),
        ('[restart]\nenabled = "yes"\n', "line 2): restart.enabled: must be true or false"),
        ("[restart]\nmax_iterations = 0\n", "line 2): restart.max_iterations"),
        ('[lane]\nkind = "two-node"\n', "line 2): lane.kind: must be one of"),
        ("lane = 3\n", "line 1): [lane] must be a table"),
    ],
)
def test_bad_config_names_key_and_line(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(tomllib.loads(text), text, "x.toml")
    assert needle in str(info.value)


def test_malformed_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "nccl-doctor.toml"
    path.write_text("[restart\nenabled = true\n")
    with pytest.raises(ConfigError, match="not valid TOML.*line 1"):
        load_config(path)


def test_pyproject_tool_table_is_found_and_its_lines_named(tmp_path: Path) -> None:
    # GIVEN a pyproject.toml whose [tool.nccl-doctor.restart] has a typo on line 5
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n\n[tool.nccl-doctor.restart]\nsoft_timout = '1s'\n"
    )
    # WHEN the config is loaded from that directory THEN the error names line 5
    with pytest.raises(ConfigError, match=r"line 5\): unknown key 'restart.soft_timout'"):
        load_config(None, {}, tmp_path)


def test_pyproject_without_our_table_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert find_config(None, {}, tmp_path) is None
    assert load_config(None, {}, tmp_path) == Config()


def test_explicit_and_env_config_win_over_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "nccl-doctor.toml").write_text("[lane]\nkind = 'multi-node'\n")
    other = tmp_path / "other.toml"
    other.write_text("[lane]\nkind = 'single-node'\n")
    assert load_config(None, {}, tmp_path).lane.kind == "multi-node"
    from_env = load_config(None, {"NCCL_DOCTOR_CONFIG": str(other)}, tmp_path)
    assert from_env.lane.kind == "single-node"
    assert load_config(other, {}, tmp_path).lane.kind == "single-node"


def test_missing_explicit_config_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", {}, tmp_path)
