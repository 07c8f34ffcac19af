"""The real CLI in a subprocess, with a controlled environment: what most tests drive."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment with no NCCL/torch variables from the developer's shell."""
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "USER",
        "SYSTEMROOT",
        "RES_OPTIONS",
        "NCCL_DOCTOR_HOME",
    )
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(extra or {})
    return env


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``nccl-doctor ARGS`` in a fresh interpreter, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "doctor", *args],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else clean_env(),
        cwd=cwd,
        timeout=timeout,
    )
