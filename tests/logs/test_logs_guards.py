"""The cheap word checks that let most lines skip a costly pattern never skip a line the
pattern would match: every text the pattern matches holds one of its words."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.logs import c10d, launcher, shm, verbs

GUARDS: dict[str, tuple[re.Pattern[str], Callable[[str], bool]]] = {
    "c10d watchdog": (c10d._WATCHDOG, lambda t: any(w in t for w in c10d._WATCHDOG_WORDS)),
    "c10d refusals": (c10d._REJECTED, lambda t: any(w in t for w in c10d._REJECTED_WORDS)),
    "verbs completions": (verbs._COMPLETION, verbs._may_complete),
    "shm no space": (shm._NO_SPACE, lambda t: any(w in t for w in shm.NO_SPACE_WORDS)),
    "slurm cancelled": (launcher._CANCELLED, lambda t: "CANCELLED" in t),
}


@pytest.mark.parametrize("name", sorted(GUARDS))
def test_a_guard_lets_through_every_line_its_pattern_matches(name: str) -> None:
    pattern, guard = GUARDS[name]

    @settings(max_examples=300, deadline=None)
    @given(st.from_regex(pattern))
    def matched_text_passes(text: str) -> None:
        # GIVEN any text the pattern matches THEN the guard lets it through
        if pattern.search(text):
            assert guard(text), text

    matched_text_passes()
