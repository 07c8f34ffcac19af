"""The bug zoo, judged by the real CLI (``tests/zoo/zoo.py`` has the cases and the harness).

One job per case: the truth is read from the ranks' native stacks first, then triage
looks ``RUNS`` times and every look must be right (the same verdict each time). No hang
is ever called ``healthy``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from zoo import CASES, right, run_case

pytestmark = pytest.mark.slow
SUITE_CASES = ("gil_ddp", "uneven_buffers", "subgroup_wrong_group", "healthy_long_phase")
"""The cases ``make test`` runs (the issue's misses and a healthy job), one look each: a case
costs 20-40 s of torch imports on 2 cores, and the whole zoo would take the suite past its
20 minutes. ``make zoo`` (NCCL_DOCTOR_ZOO=all) runs every case, three looks each."""
EVERY = os.environ.get("NCCL_DOCTOR_ZOO") == "all"
RUNS = 3 if EVERY else 1


@pytest.mark.parametrize("name", list(CASES) if EVERY else SUITE_CASES)
def test_a_zoo_bug_is_judged_right_on_every_look(name: str, tmp_path: Path) -> None:
    if name == "gil_lightning":
        pytest.importorskip("pytorch_lightning")
    case = CASES[name]
    # GIVEN the case's training job, hung (or, for a healthy one, moving) as its bug says,
    # which the ranks' native stacks confirm
    _settled, looks = run_case(name, tmp_path, RUNS)
    # THEN every look at it gives a right verdict
    for look in looks:
        assert right(case, look), (name, look.verdict)
        # AND a hang is never called healthy
        assert not (case.hang and look.found[0] == "healthy"), look.verdict
