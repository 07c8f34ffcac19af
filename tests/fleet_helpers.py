"""Emulated fleets: host preflight documents as real hosts write them (a plain module).

Each document is what ``nccl-doctor fleet-host --preflight`` prints: the real checks
run over ``Facts`` of an H100 multi-node host (``preflight_helpers``), written by
``doctor.fleet.hostdoc.to_document``. Odd hosts get another environment, another
torch, fewer GPUs or a clock off by minutes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from preflight_helpers import H100_MULTINODE_ENV, facts

from doctor.checks.registry import run_checks
from doctor.fleet.hostdoc import read_document, to_document
from doctor.fleet.merge import HostResult
from doctor.gpu.nvml import Fleet, GpuState

NOW = 1_800_000_000.0
GPUS = Fleet(gpus=tuple(GpuState(i, "NVIDIA H100 80GB HBM3") for i in range(8)), driver="570.86")


def host_text(
    host: str,
    env: Mapping[str, str] | None = None,
    lane: str = "multi-node",
    fleet: Fleet = GPUS,
    torch: str = "2.13.0+cu130",
    clock: float = NOW,
) -> str:
    """One host's document as JSON text."""
    f = facts(
        {**H100_MULTINODE_ENV, **(env or {})},
        lane=lane,
        fleet=fleet,
        versions={"python": "3.11.7", "torch": torch},
        libraries={"libnccl-net.so": None},
    )
    return json.dumps(to_document(run_checks(f), f, host, clock, "1.0"), separators=(",", ":"))


def results(
    texts: Mapping[str, str], sent: float = NOW - 1, arrived: float = NOW + 1
) -> dict[str, HostResult]:
    """Host results as the sweep makes them from answered documents."""
    shared: dict[object, object] = {}
    return {
        h: HostResult(h, read_document(t, h, shared), "", sent, arrived) for h, t in texts.items()
    }


def fleet(n: int, odd: Mapping[str, str] | None = None) -> dict[str, str]:
    """``n`` hosts ``node0001``..; ``odd``: host -> the text of its document instead."""
    base = host_text("node0001")
    texts = {f"node{i:04d}": base for i in range(1, n + 1)}
    texts.update(odd or {})
    return texts
