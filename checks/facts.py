"""Everything a preflight check may look at, gathered once at the edge.

Checks are pure functions ``Facts -> list[Finding]``; the CLI (and tests)
build ``Facts`` from the real host or from a table, so no check reads
``os.environ`` or the file system itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from doctor.config import Config


@dataclass(frozen=True)
class Facts:
    env: Mapping[str, str]
    """The environment the job will run with (after NCCL config files are merged in)."""
    config: Config = field(default_factory=Config)
    lane: str = "single-node"
    """Resolved lane: ``single-node`` or ``multi-node``."""
    lane_source: str = "default"
    """Where the lane came from: ``--lane``, the config, or what ``auto`` detected."""
    run_bench: bool = False
    """``preflight --bench``: run the AllReduce benchmark check."""
