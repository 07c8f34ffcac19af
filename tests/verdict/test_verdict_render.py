"""Renderers: verdict first, then the divergence table, the stack, the unreadable ranks."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

from rich.console import Console

from doctor.analyze.load import load_evidence
from doctor.model import HangClass
from doctor.verdict.classify import analyse
from doctor.verdict.render import SCHEMA, render, to_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fr"


def _text(evidence, analysis) -> str:
    console = Console(file=StringIO(), width=120, color_system=None)
    console.print(render(evidence, analysis))
    return console.file.getvalue()


def test_sections_in_order_with_an_unreadable_rank(tmp_path: Path) -> None:
    # GIVEN the wrong-collective dumps with rank 3's dump truncated
    for r in (0, 1, 2):
        shutil.copy(FIXTURES / "gloo-wrong-collective" / f"rank_{r}", tmp_path / f"rank_{r}")
    shutil.copy(FIXTURES / "truncated_rank_1", tmp_path / "rank_3")
    evidence = load_evidence([tmp_path])
    text = _text(evidence, analyse(evidence))
    # THEN the verdict comes first, then the group table, the culprit's stack, what failed
    order = [
        text.index(s)
        for s in (
            "verdict: collective_mismatch",
            "process groups that diverge",
            "rank 2 stack",
            "could not read",
        )
    ]
    assert order == sorted(order)
    assert "sync_gradients" in text and "truncated or corrupt" in text


def test_json_has_the_design_fields() -> None:
    evidence = load_evidence([FIXTURES / "gloo-wrong-collective"])
    analysis = analyse(evidence)
    verdict = analysis.verdict
    doc = to_json(evidence, analysis)
    assert doc["schema"] == SCHEMA
    assert set(doc) >= {"schema", "job", "collected", "verdict", "ranks", "evidence"}
    assert set(doc["verdict"]) >= {
        "hang_class",
        "culprit_ranks",
        "confidence",
        "summary",
        "collective",
        "playbook",
    }
    assert doc["verdict"]["collective"] == {"process_group": "0", "seq": 7, "op": "all_gather"}
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
