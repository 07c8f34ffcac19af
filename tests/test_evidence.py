"""Evidence serialises as it is: reduced dumps included, checked against the type hints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from doctor.analyze.load import load_evidence
from doctor.codec import DecodeError
from doctor.evidence import Evidence
from doctor.verdict.classify import analyse

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CASES = [
    FIXTURES / "fr" / "gloo-wrong-collective",
    FIXTURES / "fr" / "gloo-subgroup-mismatch",
    *sorted(p for p in (FIXTURES / "fr-nvrx").iterdir() if p.is_dir()),
]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_evidence_with_dumps_round_trips_to_the_same_analysis(path: Path) -> None:
    # GIVEN the raw evidence of real Flight Recorder dumps
    evidence = load_evidence([path])
    # WHEN it goes through JSON text and back
    again = Evidence.from_json(json.loads(json.dumps(evidence.to_json())))
    # THEN it is equal, and judged the same (alignment included)
    assert again == evidence
    assert analyse(again) == analyse(evidence)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"job": 3}, "$.job: expected str, not int"),
        ({"ranks_expected": "4"}, "$.ranks_expected: expected int, not str"),
        ({"dumps": [{"rank": 0}]}, "$.dumps[0]: RankDump needs 'source'"),
        ({"skipped": [{"rank": None, "probe": "p", "reason": ["x"]}]}, "$.skipped[0].reason"),
        ({"progress": {"rank": 0}}, "$.progress: expected a list"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_with_its_path(change: dict, where: str) -> None:
    doc = {**Evidence(job="j", ranks_expected=2).to_json(), **change}
    with pytest.raises(DecodeError, match=re.escape(where)):
        Evidence.from_json(doc)


def test_an_unknown_schema_is_refused_and_unknown_fields_are_ignored() -> None:
    doc = Evidence(job="j", ranks_expected=2).to_json()
    with pytest.raises(DecodeError, match="unknown evidence schema"):
        Evidence.from_json({**doc, "schema": "nccl-doctor/evidence/v9"})
    assert Evidence.from_json({**doc, "added_later": [1]}) == Evidence(job="j", ranks_expected=2)
