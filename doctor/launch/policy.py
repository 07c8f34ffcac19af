"""The environment a rank runs with: a pure function of the inherited env, the lane and --wrap.

* single-node: multi-node IB/net tuning leaked from the shell is unset (the
  list is ``doctor.jobconfig.lanes``'s, shared with preflight's ``lane.ib-leak`` rule),
  IB is disabled and the external net plugin is off;
* multi-node: IB is kept as it is (preflight reports a disabled IB);
* ``--wrap``: NVLS off and net plugin ``none`` (NVLS and external net plugins
  keep resources that an in-process restart cannot release);
* always: Flight Recorder on (dumps land in the job directory) and a per-rank
  ``NCCL_DEBUG_FILE`` there, unless the user chose otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from doctor.jobconfig.lanes import MULTI, SINGLE, leaked_multinode_vars
from doctor.jobdir.registry import JOB_DIR_ENV

FR_BUFFER = "2000"


@dataclass(frozen=True)
class EnvPolicy:
    env: dict[str, str]
    unset: list[str] = field(default_factory=list)
    changed: dict[str, str] = field(default_factory=dict)
    """Variables set or overridden by the policy (not the defaults filled in)."""


def apply_policy(
    env: Mapping[str, str], lane: str, wrap: bool, job: str, directory: Path, rank: int
) -> EnvPolicy:
    """The rank's environment and what the policy changed, for the prologue to print."""
    out = dict(env)
    unset: list[str] = []
    changed: dict[str, str] = {}

    def force(name: str, value: str) -> None:
        if out.get(name) != value:
            changed[name] = value
        out[name] = value

    if lane == SINGLE:
        for name in leaked_multinode_vars(out):
            unset.append(name)
            del out[name]
        force("NCCL_IB_DISABLE", "1")
        force("NCCL_NET_PLUGIN", "none")
    elif lane != MULTI:
        raise ValueError(f"lane must be {SINGLE} or {MULTI}, not {lane!r}")
    if wrap:
        force("NCCL_NVLS_ENABLE", "0")
        force("NCCL_NET_PLUGIN", "none")
    defaults = {
        "TORCH_FR_BUFFER_SIZE": FR_BUFFER,
        "TORCH_FR_DUMP_TEMP_FILE": str(directory / "fr" / "rank_"),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "NCCL_DEBUG": "WARN",
        "NCCL_DEBUG_FILE": str(directory / f"nccl-{rank}.log"),
    }
    for name, value in defaults.items():
        out.setdefault(name, value)
    out[JOB_DIR_ENV] = str(directory)
    out["NCCL_DOCTOR_JOB"] = job
    return EnvPolicy(out, unset, changed)
