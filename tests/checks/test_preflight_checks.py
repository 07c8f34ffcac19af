"""Each pure check: tables of (facts, expected warn/fail findings)."""

from __future__ import annotations

import pytest
from preflight_helpers import H100_MULTINODE_ENV, facts, triples

from doctor.checks import diag, env, lane, net, nvls, plugin, timeouts
from doctor.checks.facts import PtraceFacts
from doctor.checks.registry import run_checks
from doctor.jobconfig.lanes import leaked_multinode_vars
from doctor.model import Severity

RESTART_ON = "[restart]\nenabled = true\n"


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({}, set()),
        ({"NCCL_SOCKET_IFNAM": "eth0"}, {("env.unknown", "warn", "NCCL_SOCKET_IFNAM")}),
        ({"NCCL_TIMEOUT": "1800"}, {("env.unknown", "warn", "NCCL_TIMEOUT")}),
        (
            {"TORCH_DISTRIBUTED_DEFAULT_TIMEOUT": "3600"},
            {("env.unknown", "warn", "TORCH_DISTRIBUTED_DEFAULT_TIMEOUT")},
        ),
        ({"NCCL_DOCTOR_CONFIG": "x.toml", "NCCL_SOCKET_IFNAM": ""}, set()),
        (
            {"NCCL_ASYNC_ERROR_HANDLING": "1"},
            {("env.deprecated", "warn", "NCCL_ASYNC_ERROR_HANDLING")},
        ),
        ({"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}, set()),
        ({"NCCL_IB_DISABLE": "true"}, {("env.invalid-value", "fail", "NCCL_IB_DISABLE")}),
        ({"NCCL_BUFFSIZE": "16k"}, {("env.invalid-value", "fail", "NCCL_BUFFSIZE")}),
        ({"NCCL_P2P_DISABLE": "2"}, {("env.invalid-value", "warn", "NCCL_P2P_DISABLE")}),
        ({"NCCL_DEBUG": "INFO"}, {("env.debug-in-production", "warn", "NCCL_DEBUG")}),
        ({"NCCL_DEBUG": "WARN"}, set()),
        (
            {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
            {("env.debug-in-production", "warn", "TORCH_DISTRIBUTED_DEBUG")},
        ),
    ],
)
def test_env_checks(environment, expected):
    assert triples(env.run(facts(environment))) == expected


def test_unknown_suggests_and_moves_the_value():
    [finding] = env.check_unknown(facts({"NCCL_SOCKET_IFNAM": "eth0"}))
    assert "did you mean NCCL_SOCKET_IFNAME?" in finding.message
    assert finding.fix == "export NCCL_SOCKET_IFNAME=eth0\nunset NCCL_SOCKET_IFNAM"


@pytest.mark.parametrize(
    ("alias", "value", "fix"),
    [
        (
            "NCCL_ASYNC_ERROR_HANDLING",
            "1",
            "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1\nunset NCCL_ASYNC_ERROR_HANDLING",
        ),
        (
            "NCCL_CHECK_POINTERS",
            "1",
            "# set NCCL_CHECK_MODE to the equivalent of NCCL_CHECK_POINTERS=1\n"
            "unset NCCL_CHECK_POINTERS",
        ),
    ],
)
def test_deprecated_alias_fix_moves_the_value_only_when_it_means_the_same(alias, value, fix):
    [finding] = env.check_deprecated(facts({alias: value}))
    assert finding.fix == fix


def test_value_from_an_nccl_config_file_names_the_file_and_is_shadowed_not_unset():
    f = facts({"NCCL_TIMEOUT": "5"}, env_sources={"NCCL_TIMEOUT": "/etc/nccl.conf:3"})
    [finding] = env.check_unknown(f)
    assert "(set in /etc/nccl.conf:3)" in finding.message
    assert finding.fix == "export NCCL_TIMEOUT=  # shadows /etc/nccl.conf:3"


@pytest.mark.parametrize(
    ("environment", "lane_name", "ib", "expected"),
    [
        ({}, "single-node", (), set()),
        ({"NCCL_IB_HCA": "mlx5_0"}, "single-node", (), {("lane.ib-leak", "warn", "NCCL_IB_HCA")}),
        ({"NCCL_NET": "IB"}, "single-node", (), {("lane.ib-leak", "fail", "NCCL_NET")}),
        ({"NCCL_NET": "IB"}, "single-node", ("mlx5_0",), {("lane.ib-leak", "warn", "NCCL_NET")}),
        (
            {"NCCL_IB_DISABLE": "1", "NCCL_NET_PLUGIN": "none", "NCCL_NET": "Socket"},
            "single-node",
            (),
            set(),
        ),
        ({"NCCL_IB_HCA": "mlx5_0"}, "multi-node", (), set()),
        (
            {"NCCL_IB_DISABLE": "1"},
            "multi-node",
            (),
            {("lane.ib-disabled-multinode", "fail", "NCCL_IB_DISABLE")},
        ),
        ({"NCCL_IB_DISABLE": "true"}, "multi-node", (), set()),  # parsed as 0: invalid-value's job
        (
            {"NCCL_NET": "socket"},
            "multi-node",
            (),
            {("lane.ib-disabled-multinode", "fail", "NCCL_NET")},
        ),
        (H100_MULTINODE_ENV, "multi-node", ("mlx5_0",), set()),
    ],
)
def test_lane_checks(environment, lane_name, ib, expected):
    assert triples(lane.run(facts(environment, lane=lane_name, ib_devices=ib))) == expected


def test_ib_disabled_is_fine_when_an_external_net_plugin_loads():
    f = facts(
        {"NCCL_IB_DISABLE": "1", "NCCL_NET_PLUGIN": "aws-ofi"},
        lane="multi-node",
        libraries={"libnccl-net-aws-ofi.so": "/opt/lib/libnccl-net-aws-ofi.so"},
    )
    assert triples(lane.run(f)) == set()


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"NCCL_SOCKET_IFNAME": "ib0", "NCCL_DEBUG": "WARN"}, []),
        ({"NCCL_IB_DISABLE": "1", "NCCL_COLLNET_ENABLE": "0", "NCCL_NET_PLUGIN": "NONE"}, []),
        (
            {
                "NCCL_NET_GDR_LEVEL": "PHB",
                "NCCL_CROSS_NIC": "1",
                "NCCL_NET_PLUGIN": "aws-ofi",
                "NCCL_IB_HCA": "",
            },
            ["NCCL_CROSS_NIC", "NCCL_NET_GDR_LEVEL", "NCCL_NET_PLUGIN"],
        ),
        (
            H100_MULTINODE_ENV,
            [
                n
                for n in sorted(H100_MULTINODE_ENV)
                if n.startswith(
                    (
                        "NCCL_IB_",
                        "NCCL_NET_GDR",
                        "NCCL_CROSS",
                        "NCCL_P2P_NET",
                        "NCCL_NCHANNELS_PER_NET",
                    )
                )
                and n != "NCCL_IB_DISABLE"
            ],
        ),
    ],
)
def test_leaked_multinode_vars(environment, expected):
    assert leaked_multinode_vars(environment) == expected


@pytest.mark.parametrize(
    ("spec", "selected"),
    [
        ("eth", ["eth0"]),
        ("=eth", []),
        ("=eth0", ["eth0"]),
        ("^lo", ["eth0"]),
        ("^=eth0,lo", []),
        ("^docker", ["eth0", "lo"]),
        ("ib0,eth0:1234", ["eth0"]),
        ("ifb", []),  # ifb0 exists but has no address
    ],
)
def test_socket_ifname_syntax(spec, selected):
    usable = [name for name, has_address in sorted(facts().interfaces.items()) if has_address]
    assert net.matching(spec, usable) == selected


@pytest.mark.parametrize(
    ("value", "severity"),
    [
        (None, "pass"),
        ("eth", "pass"),
        ("lo", "pass"),
        ("ib", "fail"),
        ("=eth", "fail"),
        ("^lo,eth", "fail"),
        ("ifb0", "fail"),
    ],
)
def test_socket_ifname_check(value, severity):
    environment = {"NCCL_SOCKET_IFNAME": value} if value else {}
    [finding] = net.run(facts(environment))
    assert finding.severity.value == severity


def test_socket_ifname_skips_without_interfaces():
    [finding] = net.run(facts({}, interfaces=None))
    assert finding.severity is Severity.SKIP


@pytest.mark.parametrize(
    ("environment", "toml", "expected"),
    [
        ({}, "", set()),
        ({}, RESTART_ON, {("nvls.restart", "fail", "NCCL_NVLS_ENABLE")}),
        ({"NCCL_NVLS_ENABLE": "1"}, RESTART_ON, {("nvls.restart", "fail", "NCCL_NVLS_ENABLE")}),
        ({"NCCL_NVLS_ENABLE": "0"}, RESTART_ON, set()),
        ({"NCCL_NVLS_ENABLE": "1"}, "", set()),
    ],
)
def test_nvls_restart(environment, toml, expected):
    assert triples(nvls.run(facts(environment, toml))) == expected


@pytest.mark.parametrize(
    ("environment", "toml", "libraries", "expected"),
    [
        ({}, "", {}, set()),
        ({"NCCL_NET_PLUGIN": "aws-ofi"}, "", {}, {("plugin.missing", "fail", "NCCL_NET_PLUGIN")}),
        ({"NCCL_NET_PLUGIN": "aws-ofi"}, "", {"libnccl-net-aws-ofi.so": "/x.so"}, set()),
        ({"NCCL_NET_PLUGIN": "none"}, "", {}, set()),
        (
            {"NCCL_TUNER_PLUGIN": "/opt/t.so"},
            "",
            {},
            {("plugin.missing", "warn", "NCCL_TUNER_PLUGIN")},
        ),
        ({"NCCL_PROFILER_PLUGIN": "STATIC_PLUGIN"}, "", {}, set()),
        ({"NCCL_NET_PLUGIN": "none"}, RESTART_ON, {}, set()),
        ({}, RESTART_ON, {}, set()),
        (
            {},
            RESTART_ON,
            {"libnccl-net.so": "/usr/lib/libnccl-net.so"},
            {("plugin.restart", "warn", "NCCL_NET_PLUGIN")},
        ),
        (
            {"NCCL_NET_PLUGIN": "aws-ofi"},
            RESTART_ON,
            {"libnccl-net-aws-ofi.so": "/x.so"},
            {("plugin.restart", "fail", "NCCL_NET_PLUGIN")},
        ),
    ],
)
def test_plugin_checks(environment, toml, libraries, expected):
    assert triples(plugin.run(facts(environment, toml, libraries=libraries))) == expected


def test_plugin_candidates_follow_nccl():
    assert plugin.candidates("libnccl-net", "aws-ofi") == ("aws-ofi", "libnccl-net-aws-ofi.so")
    assert plugin.candidates("libnccl-net", "libnccl-net-x.so") == ("libnccl-net-x.so",)
    assert plugin.candidates("libnccl-net", "/opt/x.so") == ("/opt/x.so",)


@pytest.mark.parametrize(
    ("environment", "toml", "expected"),
    [
        ({}, "", set()),
        ({}, RESTART_ON, set()),
        (
            {},
            RESTART_ON + 'soft_timeout = "90s"\nhard_timeout = "90s"\n',
            {("timeout.soft-vs-hard", "fail", "restart")},
        ),
        (
            {},
            '[distributed]\ntimeout = "60s"\n' + RESTART_ON,
            {("timeout.watchdog-vs-hard", "fail", "watchdog")},
        ),
        (
            {},
            '[compile]\nwarmup = "20m"\n',
            {
                ("timeout.watchdog-vs-warmup", "fail", "watchdog"),
                ("timeout.heartbeat-vs-warmup", "warn", "heartbeat"),
            },
        ),
        (
            {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "1800"},
            '[distributed]\ntimeout = "30m"\n[compile]\nwarmup = "20m"\n',
            set(),
        ),
        (
            {"TORCH_NCCL_ENABLE_MONITORING": "0"},
            "",
            {("timeout.monitoring-disabled", "warn", "TORCH_NCCL_ENABLE_MONITORING")},
        ),
    ],
)
def test_timeout_checks(environment, toml, expected):
    assert triples(timeouts.run(facts(environment, toml))) == expected


@pytest.mark.parametrize(
    ("probe", "severity"),
    [
        (PtraceFacts(None, True, None, "/usr/bin/py-spy"), "pass"),
        (PtraceFacts(1, False, "Operation not permitted", "/usr/bin/py-spy"), "warn"),
        (PtraceFacts(0, False, None, None), "warn"),
        (PtraceFacts(1, False, None, "/usr/bin/py-spy", probe_error="no sh"), "skip"),
        (None, "skip"),
    ],
)
def test_diag_ptrace(probe, severity):
    [finding] = diag.check_ptrace(facts({}, ptrace=probe))
    assert finding.severity.value == severity


@pytest.mark.parametrize(
    ("environment", "severity"),
    [
        ({}, "pass"),
        ({"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}, "warn"),
        ({"TORCH_FR_BUFFER_SIZE": "50"}, "warn"),
        ({"TORCH_NCCL_DUMP_ON_TIMEOUT": "false"}, "warn"),
        ({"TORCH_FR_BUFFER_SIZE": "5000", "TORCH_NCCL_TRACE_BUFFER_SIZE": "5000"}, "pass"),
    ],
)
def test_diag_flight_recorder(environment, severity):
    [finding] = diag.check_flight_recorder(facts(environment))
    assert finding.severity.value == severity


def test_no_false_alarm_for_a_real_multinode_h100_environment():
    # GIVEN every tuning variable a multi-node H100 job sets, on the multi-node lane
    f = facts(H100_MULTINODE_ENV, lane="multi-node", ib_devices=("mlx5_0",))
    # WHEN every family runs THEN nothing warns or fails
    assert triples(list(run_checks(f).findings)) == set()


def test_every_family_reports_something_on_a_clean_environment():
    report = run_checks(facts({}))
    assert triples(list(report.findings)) == set()
    assert {f.check.split(".")[0] for f in report.findings} >= {
        "env",
        "lane",
        "net",
        "nvls",
        "plugin",
        "timeout",
        "diag",
        "stack",
    }
