"""Fixtures shared by every test directory (importable helpers live in ``clitools``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import session_guard
from clitools import run_cli

# Every TCPStore connection reverse-resolves both ends (torch's formatSockAddr calls
# getnameinfo; ::ffff:127.0.0.1 is not in /etc/hosts, so the query goes to DNS). A dropped
# query stalls glibc for 5 s, twice: longer than the jobs' 2 s soft timeouts. Measured in
# this sandbox: 3 to 5 of 100 connections stalled 5.0 s. One 1 s try bounds the stall and,
# as it fails, makes torch stop resolving for the rest of the process.
os.environ.setdefault("RES_OPTIONS", "timeout:1 attempts:1")


@pytest.fixture
def cli():
    """The real ``nccl-doctor`` in a fresh interpreter (see ``clitools.run_cli``)."""
    return run_cli


_ROOT: Path | None = None


@pytest.fixture(autouse=True)
def _reap_orphans():
    """After each test, reap the orphans it left (see ``session_guard.reap_orphans``)."""
    yield
    if _ROOT is not None:
        session_guard.reap_orphans()


def pytest_configure(config: pytest.Config) -> None:
    """Run in a private temporary root (``session_guard``), pytest's basetemp included."""
    global _ROOT
    if _ROOT is None and not hasattr(config, "workerinput"):
        _ROOT = session_guard.start()
        if config.option.basetemp is None:
            config.option.basetemp = str(_ROOT / "pytest")


@pytest.hookimpl(trylast=True)  # after the plugins' own clean-up (textual-snapshot's temp dir)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when it leaves a process running or a file in its TMPDIR."""
    if _ROOT is None:
        return
    leaks = session_guard.finish(_ROOT, passed=exitstatus == 0)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if leaks:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if reporter is not None and (leaks or exitstatus != 0):
        for leak in leaks:
            reporter.write_line(f"LEAK: {leak}", red=True)
        reporter.write_line(f"test run files kept in {_ROOT}")
