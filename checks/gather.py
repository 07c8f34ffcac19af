"""Build the real ``Facts`` of this host: the only place preflight touches the outside world."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path

from doctor.checks import host, ncclconf, plugin
from doctor.checks.facts import Facts
from doctor.checks.lane import resolve_lane
from doctor.config import Config


def home_dir() -> str | None:
    """The passwd home directory, as NCCL finds ``~/.nccl.conf`` (not ``$HOME``)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return None


def gather(
    env: Mapping[str, str],
    config: Config,
    lane_flag: str | None = None,
    run_bench: bool = False,
    cwd: Path | None = None,
    home: str | None = None,
) -> Facts:
    """Merge NCCL's config files into ``env``, resolve the lane, and probe the host."""
    merged = ncclconf.merge(
        env,
        ncclconf.read_conf_files(
            ncclconf.conf_paths(env, home if home is not None else home_dir())
        ),
    )
    lane, lane_source = resolve_lane(lane_flag, config, merged.env)
    libraries = host.resolve_libraries(
        sorted(plugin.library_names(merged.env)), merged.env, cwd or Path.cwd()
    )
    return Facts(
        env=merged.env,
        config=config,
        lane=lane,
        lane_source=lane_source,
        run_bench=run_bench,
        env_sources=merged.sources,
        conf_files=merged.files_read,
        interfaces=host.interfaces(),
        ib_devices=host.ib_devices(),
        libraries=libraries,
        ptrace=host.probe_ptrace(),
        versions=host.versions(),
    )
