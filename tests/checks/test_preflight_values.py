"""The env catalogue and value parsing: tables of (variable, value, expected problem)."""

from __future__ import annotations

import re

import pytest

from doctor.checks.catalogue import catalogue, in_checked_namespace, suggest, unread
from doctor.checks.values import check_value, strtoll


@pytest.mark.parametrize(
    ("text", "value", "rest", "base"),
    [
        ("16", 16, "", 10),
        ("16k", 16, "k", 10),
        ("true", 0, "true", 10),
        ("010", 8, "", 8),
        ("0x10", 16, "", 16),
        ("  -2", -2, "", 10),
        ("0", 0, "", 8),
        ("1.5", 1, ".5", 10),
        ("0xg", 0, "xg", 8),
    ],
)
def test_strtoll_matches_glibc_base_0(text, value, rest, base):
    # GIVEN a value NCCL reads with strtoll(str, NULL, 0) WHEN parsed THEN same as glibc
    parsed = strtoll(text)
    assert (parsed.value, parsed.rest, parsed.base) == (value, rest, base)


def test_strtoll_overflow_is_flagged():
    assert strtoll("99999999999999999999").overflow


@pytest.mark.parametrize(
    ("name", "value", "expected", "fixed"),
    [
        ("NCCL_IB_DISABLE", "true", "as 0", "1"),
        ("NCCL_IB_DISABLE", "yes", "as 0", "1"),
        ("NCCL_IB_DISABLE", "1", None, None),
        ("NCCL_BUFFSIZE", "16k", "as 16 and silently ignores 'k'", "16384"),
        ("NCCL_BUFFSIZE", "4MB", "as 4", "4194304"),
        ("NCCL_BUFFSIZE", "010", "octal 8", "10"),
        ("NCCL_BUFFSIZE", "0x400000", None, None),
        ("NCCL_BUFFSIZE", "99999999999999999999", "overflows", None),
        ("NCCL_IB_QPS_PER_CONNECTION", "256", "outside the allowed values", None),
        ("NCCL_IB_QPS_PER_CONNECTION", "4", None, None),
        ("NCCL_CROSS_NIC", "3", "outside", None),
        ("NCCL_CUMEM_ENABLE", "-2", None, None),
        ("NCCL_DEBUG", "DEBUG", "not one of", None),
        ("NCCL_DEBUG", "info", None, None),
        ("NCCL_NET_GDR_LEVEL", "PHB", None, None),
        ("NCCL_NET_GDR_LEVEL", "3", None, None),
        ("NCCL_NET_GDR_LEVEL", "PHX", "not one of", None),
        ("NCCL_PROTO", "^LL128", None, None),
        ("NCCL_PROTO", "LL129", "ll129 not in", None),
        ("NCCL_ALGO", "allreduce:tree;allgather:ring", None, None),
        ("NCCL_P2P_DISABLE", "2", "not 0 or 1", "1"),
        ("TORCH_NCCL_BLOCKING_WAIT", "on", "raises", "1"),
        ("TORCH_NCCL_BLOCKING_WAIT", "False", None, None),
        ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "10m", "not an integer", "600"),
        ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "900", None, None),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "5", "outside", None),
        ("TORCH_DISTRIBUTED_DEBUG", "detail", None, None),
        ("TORCH_DISTRIBUTED_DEBUG", "VERBOSE", "not one of", None),
        ("NCCL_SOCKET_RETRY_SLEEP_MSEC", "1s", "ignores 's'", "1000"),
        ("TORCHELASTIC_USE_AGENT_STORE", "True", None, None),
        ("GLOO_LOG_LEVEL", "ERROR", None, None),
        ("CUDA_DEVICE_MAX_CONNECTIONS", "1", None, None),
        ("CUDA_DEVICE_MAX_CONNECTIONS", "64", "outside", None),
        ("NCCL_PARAM_DUMP_ALL", "TRUE", None, None),
    ],
)
def test_value_table(name, value, expected, fixed):
    # GIVEN a catalogued variable WHEN its value is judged like its reader judges it
    problem = check_value(catalogue()[name], value)
    # THEN the problem (or none) and the corrected value are as expected
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem.message
        assert problem.fixed == fixed


def test_every_catalogued_default_is_valid():
    # GIVEN every variable with a plain default WHEN the default is checked THEN no false alarm
    for spec in catalogue().values():
        default = spec.default.strip()
        if spec.type and spec.read and re.fullmatch(r"-?\d+|[A-Z_]+", default):
            assert check_value(spec, default) is None, spec.name


@pytest.mark.parametrize(
    ("typo", "real"),
    [
        ("NCCL_SOCKET_IFNAM", "NCCL_SOCKET_IFNAME"),
        ("NCCL_IB_HCAS", "NCCL_IB_HCA"),
        ("NCCL_NVLS_ENABLED", "NCCL_NVLS_ENABLE"),
        ("NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"),
        ("TORCH_NCCL_HEARTBEAT_TIMEOUT", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLNG", "TORCH_NCCL_ASYNC_ERROR_HANDLING"),
        ("NCCL_COMPLETELY_MADE_UP", None),
    ],
)
def test_did_you_mean(typo, real):
    assert suggest(typo) == real


def test_catalogue_covers_both_sources_and_the_unread_list():
    specs = catalogue()
    assert specs["NCCL_ASYNC_ERROR_HANDLING"].alias_of == "TORCH_NCCL_ASYNC_ERROR_HANDLING"
    assert specs["NCCL_ASYNC_ERROR_HANDLING"].type == "enum"
    assert "CUDA_DEVICE_MAX_CONNECTIONS" in specs and "PYTORCH_CUDA_ALLOC_CONF" in specs
    for name in ("NCCL_TIMEOUT", "NCCL_TIMEOUT_MS", "TORCH_DISTRIBUTED_DEFAULT_TIMEOUT"):
        assert "init_process_group" in unread()[name].instead
    assert unread()["NCCL_IB_GDR_LEVEL"].instead == "use NCCL_NET_GDR_LEVEL"
    assert not in_checked_namespace("NCCL_DOCTOR_CONFIG")
