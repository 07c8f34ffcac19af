"""Shared builders for the preflight tests (a plain module: test files import it by name)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doctor.checks.facts import Facts, PtraceFacts
from doctor.jobconfig.config import parse_config
from doctor.model import Finding, Severity

HOST_INTERFACES = {"lo": True, "eth0": True, "ifb0": False}
PTRACE_OK = PtraceFacts(scope=None, cap_sys_ptrace=True, attach_error=None, pyspy="/usr/bin/py-spy")

# Every real tuning variable a multi-node H100 job over InfiniBand sets, at valid values.
H100_MULTINODE_ENV = {
    "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1",
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_NET_GDR_LEVEL": "PHB",
    "NCCL_NET_GDR_READ": "1",
    "NCCL_CROSS_NIC": "0",
    "NCCL_IB_QPS_PER_CONNECTION": "4",
    "NCCL_IB_SPLIT_DATA_ON_QPS": "0",
    "NCCL_IB_TIMEOUT": "22",
    "NCCL_IB_RETRY_CNT": "7",
    "NCCL_IB_SL": "0",
    "NCCL_IB_TC": "106",
    "NCCL_IB_ADAPTIVE_ROUTING": "1",
    "NCCL_IB_DISABLE": "0",
    "NCCL_NVLS_ENABLE": "1",
    "NCCL_P2P_LEVEL": "NVL",
    "NCCL_BUFFSIZE": "8388608",
    "NCCL_P2P_NET_CHUNKSIZE": "524288",
    "NCCL_MIN_NCHANNELS": "32",
    "NCCL_NCHANNELS_PER_NET_PEER": "4",
    "NCCL_PROTO": "LL,LL128,Simple",
    "NCCL_ALGO": "Ring,Tree",
    "NCCL_DEBUG": "WARN",
    "NCCL_DEBUG_SUBSYS": "INIT,NET",
    "NCCL_DEBUG_FILE": "/tmp/nccl.%h.%p.log",
    "NCCL_NET_PLUGIN": "none",
    "NCCL_COLLNET_ENABLE": "0",
    "NCCL_CUMEM_ENABLE": "1",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "600",
    "TORCH_NCCL_ENABLE_MONITORING": "1",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
    "TORCH_FR_BUFFER_SIZE": "2000",
    "TORCH_NCCL_BLOCKING_WAIT": "0",
    "TORCH_DISTRIBUTED_DEBUG": "OFF",
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "OMP_NUM_THREADS": "8",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
    "WORLD_SIZE": "16",
    "LOCAL_WORLD_SIZE": "8",
    "RANK": "0",
    "LOCAL_RANK": "0",
    "TORCHELASTIC_RUN_ID": "job-42",
    "TORCHELASTIC_USE_AGENT_STORE": "True",
}


def config(toml: str = "") -> Any:
    import tomllib

    return parse_config(tomllib.loads(toml), toml, "nccl-doctor.toml")


def facts(env: Mapping[str, str] | None = None, toml: str = "", **overrides: Any) -> Facts:
    base: dict[str, Any] = {
        "env": dict(env or {}),
        "config": config(toml),
        "interfaces": HOST_INTERFACES,
        "ptrace": PTRACE_OK,
        "versions": {"python": "3.11.7", "torch": "2.13.0+cpu"},
    }
    base.update(overrides)
    return Facts(**base)


def triples(findings: list[Finding], *, include_pass: bool = False) -> set[tuple[str, str, str]]:
    """(check, severity, subject) of the findings that matter (not pass/skip/info by default)."""
    return {
        (f.check, f.severity.value, f.subject)
        for f in findings
        if include_pass or f.severity in (Severity.FAIL, Severity.WARN)
    }
