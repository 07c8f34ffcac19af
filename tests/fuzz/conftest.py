"""Fuzzing as a test: hypothesis profiles, and the count of inputs every run tried.

``make test`` runs the ``default`` profile (a few dozen inputs per reader, seconds);
``make fuzz`` runs ``fuzz`` (a thousand per test) and prints the figures docs/security.md
quotes: inputs tried, failures, time. A run in one process prints them; ``make test`` runs
these tests in two (pytest-xdist), whose counts stay in each worker, and prints none.
"""

from __future__ import annotations

import time

import pytest
from fuzz_counter import TRIED
from hypothesis import HealthCheck, settings

MAKE_TEST = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("default", MAKE_TEST)
settings.register_profile("ci", MAKE_TEST)
"""Where CI is set (.ci/run), hypothesis loads its own ``ci`` profile (100 inputs a test, 2.5
times make test's count: 42 s in the fresh-clone run's tests/fuzz); make test's there too."""
settings.register_profile(
    "fuzz",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

_STARTED = time.monotonic()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TRIED:
        return
    # the fuzz tests' own failures: in a whole-suite run, other tests fail for other reasons
    failed = sum("fuzz/" in r.nodeid for r in terminalreporter.stats.get("failed", []))
    seconds = time.monotonic() - _STARTED
    terminalreporter.write_line(
        f"fuzz: {sum(TRIED.values())} inputs tried, {failed} failures, {seconds:.0f}s "
        f"({', '.join(f'{k} {v}' for k, v in sorted(TRIED.items()))})"
    )
