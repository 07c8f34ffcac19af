"""Hostile values in the environment and the config: bounded, linear, never a crash, never
a silent pass (issue 14, items 8 and 9)."""

from __future__ import annotations

import time

import pytest
from preflight_helpers import facts, triples

from doctor.checks import diag, timeouts
from doctor.checks.registry import run_checks
from doctor.errors import ConfigError
from doctor.jobconfig.config import parse_config
from doctor.model import Severity


def test_a_128_kb_duration_value_is_judged_at_once() -> None:
    # GIVEN a 128 KB value where a duration in seconds is expected
    huge = "1" * (128 * 1024)
    env = {"NCCL_IB_TIMEOUT": huge, "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": huge + "m"}
    # WHEN every check runs THEN it takes well under a second (it took 24 s, quadratic)
    start = time.monotonic()
    report = run_checks(facts(env))
    assert time.monotonic() - start < 2.0
    assert not [f for f in report.findings if f.check.endswith("internal-error")]


def test_a_value_over_4300_digits_does_not_switch_the_env_checks_off() -> None:
    # GIVEN a 5,000-digit integer beside a misspelt variable
    env = {"NCCL_BUFFSIZE": "9" * 5000, "NCCL_SOCKET_IFNAM": "eth0", "WORLD_SIZE": "9" * 5000}
    # WHEN preflight runs THEN the env family still reports both, and nothing crashed
    found = triples(run_checks(facts(env)).findings)
    assert ("env.invalid-value", "fail", "NCCL_BUFFSIZE") in found
    assert ("env.unknown", "warn", "NCCL_SOCKET_IFNAM") in found
    assert not [t for t in found if t[0].endswith("internal-error")]


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ("[distributed]\ntimeout = inf\n", "at most"),
        ("[distributed]\ntimeout = nan\n", "not nan"),
        ("[restart]\nhard_timeout = -inf\n", "negative"),
        ('[distributed]\ntimeout = "0ms"\n', "timeout of 0"),
        ("[restart]\nsoft_timeout = 0\n", "timeout of 0"),
        ('[compile]\nwarmup = "' + "1" * 5000 + 's"\n', "at most 64 characters"),
        ("[distributed]\ntimeout = 1e400\n", "at most"),
        ("[distributed]\ntimeout = 100000000000000000000000\n", "at most"),
    ],
)
def test_durations_that_are_not_durations_are_config_errors(toml: str, words: str) -> None:
    import tomllib

    with pytest.raises(ConfigError, match=words):
        parse_config(tomllib.loads(toml), toml, "nccl-doctor.toml")


def test_monitoring_off_does_not_claim_the_dump_is_off() -> None:
    # GIVEN Flight Recorder on and the heartbeat monitor's kill switch off
    env = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_ENABLE_MONITORING": "0"}
    # WHEN the diagnostics checks run THEN Flight Recorder passes: the monitor still dumps
    (finding,) = diag.check_flight_recorder(facts(env))
    assert finding.severity is Severity.PASS, finding.message
    # AND the timeout chain keeps the dump layer, and says only that nothing ends the rank
    chain = facts(env).timeouts  # the chain the facts resolved (doctor.jobconfig.timeouts)
    assert chain.seconds("dump") is not None
    (warn,) = [f for f in timeouts.run(facts(env)) if f.check == "timeout.monitoring-disabled"]
    assert "still dumps" in warn.message and ("timeout.monitoring-disabled", "warn") == (
        warn.check,
        warn.severity.value,
    )


@pytest.mark.parametrize("path", ["/dev/zero", "fifo"])
def test_an_nccl_conf_file_that_is_not_a_file_is_not_read(tmp_path, path: str) -> None:
    import os

    from doctor.checks.ncclconf import read_conf_files

    # GIVEN NCCL_CONF_FILE naming an endless device or a FIFO nobody writes
    if path == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    # WHEN preflight reads it THEN at once, as absent (it was a MemoryError or a hang)
    start = time.monotonic()
    (conf,) = read_conf_files([path])
    assert conf.text is None and time.monotonic() - start < 1.0
