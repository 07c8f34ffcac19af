"""``[watch]`` and ``[watch.actions]``: validated like the rest of the config (key and line)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from clitools import clean_env, run_cli

from doctor.errors import ConfigError
from doctor.jobconfig.config import parse_config
from doctor.jobconfig.watch_settings import Action

GOOD = """\
[watch]
enabled = true
stall_factor = 3
min_stall = "2s"
sample_interval = "500ms"
max_restarts = 1
repeat_window = "30m"

[watch.actions]
cpu_stuck = "stop"
unknown = "none"
"""


def parse(text: str):  # noqa: ANN201 - the Config
    return parse_config(tomllib.loads(text), text, "nccl-doctor.toml")


def test_every_key_is_read_and_the_table_overrides_only_what_it_names() -> None:
    watch = parse(GOOD).watch
    assert (watch.enabled, watch.stall_factor, watch.min_stall) == (True, 3.0, 2.0)
    assert (watch.sample_interval, watch.max_restarts, watch.repeat_window) == (0.5, 1, 1800.0)
    assert watch.actions["cpu_stuck"] is Action.STOP
    assert watch.actions["unknown"] is Action.NONE
    assert watch.actions["collective_mismatch"] is Action.STOP  # a default kept


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[watch]\nstall_factr = 2\n", "(line 2): unknown key 'watch.stall_factr'"),
        ("[watch]\nstall_factor = 0.5\n", "(line 2): watch.stall_factor: must be a number"),
        ('[watch]\nmin_stall = "soon"\n', "(line 2): watch.min_stall: 'soon' is not a duration"),
        ("[watch]\nmin_stall = 0\n", "(line 2): watch.min_stall: must be longer than zero"),
        ('[watch]\nenabled = "yes"\n', "(line 2): watch.enabled: must be true or false"),
        ("[watch]\nmax_restarts = -1\n", "(line 2): watch.max_restarts: must be a whole number"),
        (
            '[watch]\nenabled = true\n[watch.actions]\ncpu_stuck = "reboot"\n',
            "(line 4): watch.actions.cpu_stuck: must be one of stop, restart, restart-once",
        ),
        (
            '[watch.actions]\n\ncpu_stick = "stop"\n',
            "(line 3): watch.actions.cpu_stick: unknown hang class 'cpu_stick'",
        ),
        ("[restart]\nspares = 1.5\n", "(line 2): restart.spares: must be a whole number"),
    ],
)
def test_a_bad_entry_names_its_key_and_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    assert message in str(caught.value)


def test_the_cli_exits_2_with_one_sentence(tmp_path: Path) -> None:
    # GIVEN a config with a typo in the policy table
    config = tmp_path / "nccl-doctor.toml"
    config.write_text('[watch.actions]\ngpu_hang = "exclude-host"\n')
    # WHEN launch reads it
    out = run_cli(
        "launch",
        "--watch",
        "--config",
        str(config),
        "--job",
        "j",
        "--",
        "true",
        env=clean_env({"NCCL_DOCTOR_HOME": str(tmp_path)}),
    )
    # THEN it refuses with exit 2, naming key and line, without a traceback
    assert out.returncode == 2, out.stderr
    assert "line 2" in out.stderr and "watch.actions.gpu_hang" in out.stderr
    assert "Traceback" not in out.stderr
