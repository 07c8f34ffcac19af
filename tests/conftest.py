"""Fixtures shared by every test directory (importable helpers live in ``clitools``)."""

from __future__ import annotations

import pytest
from clitools import run_cli


@pytest.fixture
def cli():
    """The real ``nccl-doctor`` in a fresh interpreter (see ``clitools.run_cli``)."""
    return run_cli
