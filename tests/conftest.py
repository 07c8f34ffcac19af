"""Fixtures shared by every test directory (importable helpers live in ``clitools``)."""

from __future__ import annotations

import os

import pytest
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
