"""The bug zoo, judged by the real CLI (``tests/zoo/zoo.py`` has the cases and the harness).

Every case's job runs (several at once: a job's start is mostly waiting); its truth is read
from the ranks' native stacks first, then triage looks ``RUNS`` times and every look must
be right (the same verdict each time). No hang is ever called ``healthy``.
"""

from __future__ import annotations

import os

import pytest
from zoo import CASES, Outcome, right, run_zoo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
"""The first test runs the whole zoo (the module's fixture): 10 min on 2 cores at load 16-25."""
RUNS = 3 if os.environ.get("NCCL_DOCTOR_ZOO") == "all" else 1
"""``make test`` looks once at each case; ``make zoo`` (NCCL_DOCTOR_ZOO=all) three times."""
NEEDS = {"gil_lightning": "pytorch_lightning"}
LEFT_OUT_OF_MAKE_TEST = {
    "healthy_long_eval": "called unknown (low confidence), never healthy and never a hang, in "
    "the one look of the 2026-11-26 fresh-clone run and in a make zoo run of 2026-11-27 (rank 3 "
    "made no read/write call and no stack change in the window: one evaluation step outlasting "
    "it on the loaded host; CPU time is not proof of progress, a rank spinning in its own loop "
    "burns CPU too), right in the 26 looks between: make zoo runs it"
}
"""Cases ``make test`` skips, each with why; ``make zoo`` runs every case."""


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every case run once, together (the cases whose package is missing left out)."""
    names = [n for n in CASES if _importable(NEEDS.get(n)) and _in_this_run(n)]
    return run_zoo(names, tmp_path_factory.mktemp("zoo"), RUNS)


def _in_this_run(name: str) -> bool:
    return RUNS > 1 or name not in LEFT_OUT_OF_MAKE_TEST


def _importable(module: str | None) -> bool:
    if module is None:
        return True
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("name", list(CASES))
def test_a_zoo_bug_is_judged_right_on_every_look(name: str, zoo: dict[str, Outcome]) -> None:
    if not _in_this_run(name):
        pytest.skip(LEFT_OUT_OF_MAKE_TEST[name])
    if name not in zoo:
        pytest.skip(f"{NEEDS[name]} is not installed")
    case, outcome = CASES[name], zoo[name]
    # GIVEN the case's training job, hung (or, for a healthy one, moving) as its bug says,
    # which the ranks' native stacks confirm
    assert not outcome.error, outcome.error
    assert len(outcome.looks) == RUNS
    # THEN every look at it gives a right verdict
    for look in outcome.looks:
        assert right(case, look), (  # as text: pytest cuts a dict's repr in the middle
            f"{name}: {look.verdict['hang_class']} {look.verdict['culprit_ranks']} "
            f"({look.verdict['confidence']}) after {look.seconds:.1f}s: "
            f"{look.verdict['summary']}; skipped {look.skipped}"
        )
        # AND a hang is never called healthy, not even by a run whose native dump came late
        for found in (look.found, *look.cut):
            assert not (case.hang and found[0] == "healthy"), (found, look.verdict)
