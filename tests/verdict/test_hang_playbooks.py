"""Every hang class has exactly one playbook, with the fixed headings."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.model import HangClass

PLAYBOOKS = Path(__file__).resolve().parent.parent.parent / "playbooks"
HEADINGS = [
    "What it means",
    "Why it matters",
    "Evidence that fired",
    "What to do",
    "Known false positives",
    "References",
]


@pytest.mark.parametrize("cls", list(HangClass), ids=[c.value for c in HangClass])
def test_hang_class_has_a_playbook_with_the_fixed_headings(cls: HangClass) -> None:
    text = (PLAYBOOKS / f"{cls.value}.md").read_text()
    assert text.startswith(f"# {cls.value}: ")
    headings = [ln[3:] for ln in text.splitlines() if ln.startswith("## ")]
    assert headings == HEADINGS
