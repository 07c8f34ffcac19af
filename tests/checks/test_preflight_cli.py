"""Every check id through the real CLI: real environments, real config files, a subprocess each."""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest
from clitools import clean_env, run_cli
from preflight_helpers import H100_MULTINODE_ENV

RESTART = "[restart]\nenabled = true\n"


def preflight(
    extra: dict[str, str] | None = None,
    *args: str,
    toml: str | None = None,
    cwd: Path | None = None,
) -> tuple[int, dict]:
    """Run ``preflight --json`` (writing ``nccl-doctor.toml`` into ``cwd`` when given)."""
    if toml is not None:
        assert cwd is not None
        (cwd / "nccl-doctor.toml").write_text(toml)
    done = run_cli("preflight", "--json", *args, env=clean_env(extra), cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def bad(report: dict) -> set[tuple[str, str, str]]:
    return {
        (f["check"], f["severity"], f["subject"])
        for f in report["findings"]
        if f["severity"] in ("warn", "fail")
    }


def finding(report: dict, check: str, subject: str | None = None) -> dict:
    return next(
        f
        for f in report["findings"]
        if f["check"] == check and (subject is None or f["subject"] == subject)
    )


def test_clean_environment_has_no_warning(tmp_path):
    # GIVEN no NCCL/torch variables and no config WHEN preflight runs THEN nothing warns
    code, report = preflight(cwd=tmp_path)
    assert (code, bad(report)) == (0, set())
    assert report["lane"] == "single-node"
    assert report["summary"]["fail"] == report["summary"]["warn"] == 0


@pytest.mark.parametrize("lane_args", [("--lane", "multi-node"), ()])
def test_real_multinode_h100_environment_has_no_warning(tmp_path, lane_args):
    # GIVEN every tuning variable a multi-node H100 job sets (auto: WORLD_SIZE > LOCAL_WORLD_SIZE)
    code, report = preflight(H100_MULTINODE_ENV, *lane_args, cwd=tmp_path)
    # THEN the multi-node lane and not one warn/fail
    assert (code, report["lane"], bad(report)) == (0, "multi-node", set())


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"NCCL_SOCKET_IFNAM": "eth0"}, ("env.unknown", "warn", "NCCL_SOCKET_IFNAM")),
        ({"NCCL_TIMEOUT": "1800"}, ("env.unknown", "warn", "NCCL_TIMEOUT")),
        (
            {"NCCL_ASYNC_ERROR_HANDLING": "1"},
            ("env.deprecated", "warn", "NCCL_ASYNC_ERROR_HANDLING"),
        ),
        ({"NCCL_IB_DISABLE": "true"}, ("env.invalid-value", "fail", "NCCL_IB_DISABLE")),
        ({"NCCL_BUFFSIZE": "16k"}, ("env.invalid-value", "fail", "NCCL_BUFFSIZE")),
        (
            {"TORCH_NCCL_BLOCKING_WAIT": "on"},
            ("env.invalid-value", "fail", "TORCH_NCCL_BLOCKING_WAIT"),
        ),
        ({"NCCL_DEBUG": "INFO"}, ("env.debug-in-production", "warn", "NCCL_DEBUG")),
        ({"NCCL_IB_HCA": "mlx5_0"}, ("lane.ib-leak", "warn", "NCCL_IB_HCA")),
        ({"NCCL_NET": "IB"}, ("lane.ib-leak", "fail", "NCCL_NET")),
        (
            {"NCCL_IB_DISABLE": "1", "SLURM_JOB_NUM_NODES": "2"},
            ("lane.ib-disabled-multinode", "fail", "NCCL_IB_DISABLE"),
        ),
        ({"NCCL_SOCKET_IFNAME": "ib"}, ("net.socket-ifname", "fail", "NCCL_SOCKET_IFNAME")),
        ({"NCCL_SOCKET_IFNAME": "=eth"}, ("net.socket-ifname", "fail", "NCCL_SOCKET_IFNAME")),
        ({"NCCL_NET_PLUGIN": "no-such-fabric"}, ("plugin.missing", "fail", "NCCL_NET_PLUGIN")),
        (
            {"TORCH_NCCL_ENABLE_MONITORING": "0"},
            ("timeout.monitoring-disabled", "warn", "TORCH_NCCL_ENABLE_MONITORING"),
        ),
        (
            {"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"},
            ("diag.flight-recorder", "warn", "TORCH_NCCL_TRACE_BUFFER_SIZE"),
        ),
    ],
)
def test_environment_findings(tmp_path, extra, expected):
    code, report = preflight(extra, cwd=tmp_path)
    assert expected in bad(report)
    assert code == (1 if expected[1] == "fail" else 0)


@pytest.mark.parametrize(
    ("toml", "extra", "expected"),
    [
        (RESTART, {}, ("nvls.restart", "fail", "NCCL_NVLS_ENABLE")),
        (
            RESTART,
            {"NCCL_NVLS_ENABLE": "0", "NCCL_NET_PLUGIN": "aws-ofi"},
            ("plugin.restart", "fail", "NCCL_NET_PLUGIN"),
        ),
        (
            '[distributed]\ntimeout = "60s"\n' + RESTART,
            {"NCCL_NVLS_ENABLE": "0"},
            ("timeout.watchdog-vs-hard", "fail", "watchdog"),
        ),
        (
            RESTART + 'soft_timeout = "2m"\nhard_timeout = "90s"\n',
            {"NCCL_NVLS_ENABLE": "0"},
            ("timeout.soft-vs-hard", "fail", "restart"),
        ),
        (
            '[compile]\nwarmup = "20m"\n[distributed]\ntimeout = "30m"\n',
            {},
            ("timeout.heartbeat-vs-warmup", "warn", "heartbeat"),
        ),
        (
            # the collective timeout is set: PyTorch's default depends on this host's backend
            '[compile]\nwarmup = "20m"\n[distributed]\ntimeout = "10m"\n',
            {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "3600"},
            ("timeout.watchdog-vs-warmup", "fail", "watchdog"),
        ),
        (
            '[lane]\nkind = "single-node"\n',
            {"NCCL_CROSS_NIC": "1", "SLURM_NNODES": "4"},
            ("lane.ib-leak", "warn", "NCCL_CROSS_NIC"),
        ),
    ],
)
def test_config_file_findings(tmp_path, toml, extra, expected):
    # GIVEN a real nccl-doctor.toml in the working directory
    code, report = preflight(extra, toml=toml, cwd=tmp_path)
    assert expected in bad(report)


def test_restart_config_that_is_right_passes(tmp_path):
    code, report = preflight(
        {"NCCL_NVLS_ENABLE": "0", "NCCL_NET_PLUGIN": "none"},
        toml=RESTART + '[distributed]\ntimeout = "10m"\n',
        cwd=tmp_path,
    )
    assert (code, bad(report)) == (0, set())
    chain = report["timeouts"]
    assert chain["detect_seconds"] == 60 and chain["layers"]["hard"]["seconds"] == 90


def test_plugin_found_on_ld_library_path_passes(tmp_path):
    (tmp_path / "libnccl-net-fake.so").write_bytes(b"")
    code, report = preflight(
        {"NCCL_NET_PLUGIN": "fake", "LD_LIBRARY_PATH": str(tmp_path)},
        "--lane",
        "multi-node",
        cwd=tmp_path,
    )
    assert bad(report) == set()
    assert str(tmp_path / "libnccl-net-fake.so") in finding(report, "plugin.missing")["message"]


def test_nccl_conf_file_values_are_checked_and_their_source_named(tmp_path):
    # GIVEN a value only in the file NCCL_CONF_FILE names, and one the environment overrides
    conf = tmp_path / "nccl.conf"
    conf.write_text("# site defaults\nNCCL_IB_DISABLE=yes\nNCCL_DEBUG=INFO\n")
    code, report = preflight({"NCCL_CONF_FILE": str(conf), "NCCL_DEBUG": "WARN"}, cwd=tmp_path)
    invalid = finding(report, "env.invalid-value", "NCCL_IB_DISABLE")
    assert f"set in {conf}:2" in invalid["message"] and invalid["severity"] == "fail"
    assert ("env.debug-in-production", "warn", "NCCL_DEBUG") not in bad(report)


def test_passing_checks_and_versions_are_reported(tmp_path):
    code, report = preflight({"NCCL_SOCKET_IFNAME": "lo"}, cwd=tmp_path)
    assert finding(report, "net.socket-ifname")["severity"] == "pass"
    assert finding(report, "diag.ptrace")["severity"] in ("pass", "warn")
    versions = finding(report, "stack.versions")
    assert versions["severity"] == "info" and f"torch {version('torch')}" in versions["message"]
    checks = {f["check"] for f in report["findings"]}
    assert {"gpu", "bench"} <= {c.split(".")[0] for c in checks}


def test_strict_fails_on_warnings(tmp_path):
    env = clean_env({"NCCL_DEBUG": "INFO"})
    assert run_cli("preflight", env=env, cwd=tmp_path).returncode == 0
    assert run_cli("preflight", "--strict", env=env, cwd=tmp_path).returncode == 1


def test_human_output_has_table_chain_and_summary(tmp_path):
    done = run_cli(
        "preflight", "--lane", "single-node", env=clean_env({"NCCL_TIMEOUT": "5"}), cwd=tmp_path
    )
    assert done.returncode == 0
    assert "env.unknown" in done.stdout and "timeout chain" in done.stdout
    assert "time to detect a hang" in done.stdout and "preflight WARN" in done.stdout


def test_emit_env_snippet_makes_the_environment_pass(tmp_path):
    # GIVEN a broken environment WHEN the snippet is eval'ed THEN --strict preflight passes
    broken = {
        "NCCL_IB_DISABLE": "true",
        "NCCL_SOCKET_IFNAM": "eth0",
        "NCCL_TIMEOUT": "1800",
        "NCCL_BUFFSIZE": "16k",
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_HCA": "mlx5_0",
        "NCCL_NET_PLUGIN": "aws-ofi",
        "NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    script = (
        'eval "$(python -m doctor preflight --emit-env)" && '
        "python -m doctor preflight --strict --json"
    )
    env = clean_env(broken)
    env["PATH"] = f"{Path(__import__('sys').executable).parent}:{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-c", script],
        env=env,
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert bad(json.loads(done.stdout)) == set()


def test_emit_env_exits_1_when_a_failure_needs_a_config_change(tmp_path):
    (tmp_path / "nccl-doctor.toml").write_text(RESTART + 'soft_timeout = "2m"\n')
    done = run_cli("preflight", "--emit-env", env=clean_env({}), cwd=tmp_path)
    assert done.returncode == 1
    assert "export NCCL_NVLS_ENABLE=0" in done.stdout
    assert '# [restart] soft_timeout = "1m"  [timeout.soft-vs-hard]' in done.stdout


@pytest.mark.parametrize(
    ("toml", "args", "message"),
    [
        ("[restart]\nsoft_timout = 5\n", (), "line 2"),
        ('[lane]\nkind = "two-node"\n', (), "lane.kind"),
        ("[distributed\n", (), "not valid TOML"),
        (None, ("--config", "/nonexistent.toml"), "does not exist"),
        (None, ("--lane", "bogus"), "bogus"),
        (None, ("--json", "--emit-env"), "choose one"),
    ],
)
def test_input_errors_exit_2_without_traceback(tmp_path, toml, args, message):
    if toml is not None:
        (tmp_path / "nccl-doctor.toml").write_text(toml)
    done = run_cli("preflight", *args, env=clean_env({}), cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
