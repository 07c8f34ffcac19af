"""Fixtures of the triage tests; the helpers live in ``triage_helpers``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from triage_helpers import SLEEPER, start_sleeper

from doctor.demo.local import LocalJob
from doctor.trust.subproc import stop_all


@pytest.fixture
def sleepers(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start cheap rank processes; all are stopped after the test."""
    started: list[subprocess.Popen[bytes]] = []

    def start(env: Mapping[str, str], name: str, code: str = SLEEPER) -> subprocess.Popen[bytes]:
        proc = start_sleeper(tmp_path, env, name, code)
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        stop_all(started)


@pytest.fixture(scope="module")
def kept_jobs() -> Iterator[dict[str, LocalJob]]:
    """Real jobs a module's cases share, keyed as the module likes; every one that is still
    kept is stopped by the module's end."""
    jobs: dict[str, LocalJob] = {}
    try:
        yield jobs
    finally:
        for job in jobs.values():
            job.stop()
