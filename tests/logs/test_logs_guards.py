"""The cheap word checks that let most lines skip a costly pattern never skip a line the
pattern would match: every text a ``Guarded`` pattern matches holds one of its words."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.logs import c10d, launcher, shm, verbs
from doctor.logs.guarded import Guarded

GUARDED = {
    f"{module.__name__}.{name}": found
    for module in (c10d, launcher, shm, verbs)
    for name, found in vars(module).items()
    if isinstance(found, Guarded)
}


def test_the_parsers_guarded_patterns_are_all_here() -> None:
    assert len(GUARDED) == 5, sorted(GUARDED)


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_a_guard_lets_through_every_line_its_pattern_matches(name: str) -> None:
    guarded = GUARDED[name]

    @settings(max_examples=300, deadline=None)
    @given(st.from_regex(guarded.pattern))
    def matched_text_passes(text: str) -> None:
        # GIVEN any text the pattern matches THEN its words let it through
        if guarded.pattern.search(text):
            assert guarded.may_match(text), text

    matched_text_passes()
