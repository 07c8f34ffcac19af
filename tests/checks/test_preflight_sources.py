"""NCCL config files, the timeout chain and the --emit-env snippet (pure functions)."""

from __future__ import annotations

import pytest
from preflight_helpers import config, facts

from doctor.checks import fixes, ncclconf
from doctor.checks.ncclconf import ConfFile
from doctor.checks.timeouts import timeout_findings
from doctor.jobconfig.timeouts import resolve_timeouts
from doctor.model import Finding, Severity


def test_conf_paths_follow_nccl():
    assert ncclconf.conf_paths({}, "/home/u") == ["/home/u/.nccl.conf", "/etc/nccl.conf"]
    assert ncclconf.conf_paths({"NCCL_CONF_FILE": "/x.conf"}, "/home/u") == [
        "/x.conf",
        "/etc/nccl.conf",
    ]
    assert ncclconf.conf_paths({"NCCL_CONF_FILE": ""}, None) == ["/etc/nccl.conf"]


def test_parse_conf_keeps_what_nccl_keeps():
    text = "# comment\nNCCL_DEBUG=WARN\nnot a setting\nNCCL_X= spaced \n=empty\n"
    assert ncclconf.parse_conf(text) == [
        ("NCCL_DEBUG", "WARN", 2),
        ("NCCL_X", " spaced ", 4),
        ("", "empty", 5),
    ]


def test_environment_wins_then_first_file_wins():
    # GIVEN a value in the environment, in the user file and in /etc/nccl.conf
    merged = ncclconf.merge(
        {"NCCL_DEBUG": "WARN", "NCCL_EMPTY": ""},
        [
            ConfFile("/u.conf", "NCCL_DEBUG=INFO\nNCCL_IB_HCA=mlx5_0\nNCCL_EMPTY=1\n"),
            ConfFile("/etc/nccl.conf", "NCCL_IB_HCA=mlx5_9\nNCCL_PROTO=Simple\n"),
            ConfFile("/missing.conf", None),
        ],
    )
    # THEN setenv(..., 0) semantics: env (even empty) wins, then the first file
    assert merged.env == {
        "NCCL_DEBUG": "WARN",
        "NCCL_EMPTY": "",
        "NCCL_IB_HCA": "mlx5_0",
        "NCCL_PROTO": "Simple",
    }
    assert merged.sources == {
        "NCCL_DEBUG": "environment",
        "NCCL_EMPTY": "environment",
        "NCCL_IB_HCA": "/u.conf:2",
        "NCCL_PROTO": "/etc/nccl.conf:2",
    }
    assert merged.files_read == ("/u.conf", "/etc/nccl.conf")


@pytest.mark.parametrize(
    ("toml", "env", "detect", "recover"),
    [
        ("", {}, 600, 660),
        ("", {"TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}, 600, 600),
        ("", {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}, 600, None),
        (
            '[distributed]\ntimeout = "30m"\n',
            {"TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "5000"},
            1800,
            1820,
        ),
        ("[restart]\nenabled = true\n", {}, 60, 180),
        ('[restart]\nenabled = true\nhard_timeout = "10m"\n', {}, 60, 605),
    ],
)
def test_chain_detect_and_recover(toml, env, detect, recover):
    chain = resolve_timeouts(config(toml), env)
    assert (chain.detect, chain.recover) == (detect, recover)


def test_chain_sources_and_backend_defaults():
    chain = resolve_timeouts(config(""), {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "900"}, "gloo")
    assert (
        chain.seconds("watchdog") == 1800 and "PyTorch default for gloo" in chain["watchdog"].source
    )
    assert (chain.seconds("heartbeat"), chain["heartbeat"].source) == (
        900,
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
    )
    assert chain.seconds("soft") is None
    assert set(chain.to_json()["layers"]) == {
        "watchdog",
        "heartbeat",
        "dump",
        "soft",
        "hard",
        "grace",
        "barrier",
        "warmup",
    }


def test_runtime_pg_timeout_overrides_the_config():
    # GIVEN the wrapper's real process-group timeout, shorter than its hard timeout
    chain = resolve_timeouts(
        config('[distributed]\ntimeout = "1h"\n[restart]\nenabled = true\n'), {}, pg_timeout=60
    )
    [finding] = [f for f in timeout_findings(chain) if f.check == "timeout.watchdog-vs-hard"]
    assert finding.severity is Severity.FAIL and "process group timeout" in finding.message
    assert (
        finding.fix == '# [distributed] timeout = "2m"  (nccl-doctor.toml, and pass it to '
        "init_process_group)"
    )


def test_timeout_findings_cover_every_timeout_id_once():
    ids = [f.check for f in timeout_findings(resolve_timeouts(config(""), {}))]
    assert ids == [
        "timeout.watchdog-vs-hard",
        "timeout.soft-vs-hard",
        "timeout.heartbeat-vs-warmup",
        "timeout.watchdog-vs-warmup",
        "timeout.monitoring-disabled",
    ]


def test_emit_env_prefers_export_and_keeps_config_changes_as_comments():
    findings = [
        Finding("lane.ib-leak", Severity.WARN, "NCCL_NET_PLUGIN", "m", "unset NCCL_NET_PLUGIN"),
        Finding(
            "plugin.missing",
            Severity.FAIL,
            "NCCL_NET_PLUGIN",
            "m",
            "# add it to LD_LIBRARY_PATH, or\nexport NCCL_NET_PLUGIN=none",
        ),
        Finding("env.unknown", Severity.WARN, "NCCL_TIMEOUT", "m", "unset NCCL_TIMEOUT"),
        Finding(
            "timeout.soft-vs-hard",
            Severity.FAIL,
            "restart",
            "m",
            '# [restart] soft_timeout = "60s"',
        ),
        Finding("env.unknown", Severity.PASS, "environment", "m", "unset IGNORED"),
    ]
    snippet, unfixed = fixes.emit_env(findings)
    assert snippet.splitlines() == [
        "export NCCL_NET_PLUGIN=none",
        "unset NCCL_TIMEOUT",
        '# [restart] soft_timeout = "60s"  [timeout.soft-vs-hard]',
    ]
    assert [f.check for f in unfixed] == ["timeout.soft-vs-hard"]


def test_unset_shadows_values_from_config_files():
    f = facts({"A": "1", "B": "2"}, env_sources={"B": "/etc/nccl.conf:1"})
    assert fixes.unset(f, "A", "B") == "unset A\nexport B=  # shadows /etc/nccl.conf:1"
    assert fixes.export("X", "a b") == "export X='a b'"


def test_restart_layers_say_whether_the_file_or_the_default_set_them():
    chain = resolve_timeouts(config('[restart]\nenabled = true\nhard_timeout = "2m"\n'), {})
    assert chain["hard"].source == "[restart] hard_timeout in nccl-doctor.toml"
    assert chain["soft"].source == "[restart] default"


def test_gather_reads_the_user_conf_file_unless_nccl_conf_file_is_set(tmp_path):
    from doctor.checks.gather import gather
    from doctor.jobconfig.config import Config

    # GIVEN a ~/.nccl.conf in a home directory and another file named by NCCL_CONF_FILE
    (tmp_path / ".nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    other = tmp_path / "site.conf"
    other.write_text("NCCL_PROTO=Simple\n")
    # WHEN facts are gathered THEN the home file is read only without NCCL_CONF_FILE
    facts_home = gather({}, Config(), home=str(tmp_path), cwd=tmp_path)
    assert facts_home.env["NCCL_DEBUG"] == "INFO"
    assert facts_home.source("NCCL_DEBUG") == f"{tmp_path}/.nccl.conf:1"
    facts_site = gather({"NCCL_CONF_FILE": str(other)}, Config(), home=str(tmp_path), cwd=tmp_path)
    assert "NCCL_DEBUG" not in facts_site.env and facts_site.env["NCCL_PROTO"] == "Simple"
    assert str(other) in facts_site.conf_files


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  "
            "Tue Mar  5 22:23:55 UTC 2024\n"
            "GCC version:  gcc version 12.3.0\n",
            "550.54.15",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build\n",
            "570.124.06",
        ),
    ],
)
def test_driver_version_parsing(text, expected):
    from doctor.checks.host import driver_version

    assert driver_version(text) == expected


@pytest.mark.parametrize(
    ("local", "expected"),
    [("cu128", "12.8"), ("cu130", "13.0"), ("cpu", None), ("", None), ("rocm6.2", None)],
)
def test_cuda_version_from_torch_local_version(local, expected):
    from doctor.checks.host import cuda_version

    assert cuda_version(local) == expected


def test_real_ptrace_probe_attaches_to_a_non_child_process():
    from doctor.checks.host import probe_ptrace

    # GIVEN this host WHEN the probe seizes an orphaned sleep it started THEN it gets an answer
    probe = probe_ptrace()
    assert probe.probe_error is None
    if probe.cap_sys_ptrace and probe.scope in (None, 0, 1, 2):
        assert probe.attach_error is None  # CAP_SYS_PTRACE overrides Yama scopes 1 and 2


def test_ptrace_probe_that_cannot_start_in_time_is_a_skip_not_a_warning(monkeypatch):
    import subprocess

    from doctor.checks import host

    # GIVEN a shell that answers only after the probe's time is up (a bare tiny timeout raced
    # a fast shell, which sometimes answered first), and answers no pid (were the timeout
    # ignored, nothing would be seized or killed)
    real = subprocess.Popen
    monkeypatch.setattr(
        host.subprocess, "Popen", lambda args, **kw: real(["sh", "-c", "sleep 5; echo x"], **kw)
    )
    probe = host.probe_ptrace(timeout=0.05)
    assert probe.attach_error is None and "did not start within" in (probe.probe_error or "")
