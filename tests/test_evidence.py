"""Evidence serialises as it is: reduced dumps included, checked against the type hints."""

from __future__ import annotations

import json
import re
from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path

import pytest

from doctor.analyze.load import load_evidence
from doctor.codec import DecodeError, builder, decode
from doctor.evidence import Evidence, ProgressSample
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


@dataclass(frozen=True)
class _Checked:
    n: int
    seen: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.n < 0:
            raise DecodeError("n is negative")


@dataclass(frozen=True)
class _Plain:
    n: int | None
    ratio: float | None = None
    tags: list[str] = field(default_factory=list)
    name: str = "x"


def test_decode_builds_the_object_the_constructor_builds() -> None:
    # GIVEN a plain frozen dataclass, built without its __init__ (as pickle builds it),
    # and one whose __post_init__ checks its values
    one = decode(_Plain, {"n": 3, "ratio": 2})
    two = decode(_Plain, {"n": None})
    # THEN each is the object the constructor makes: every default set, a fresh list each,
    # an int for a float field converted, a bool for an int refused
    assert (one, two) == (_Plain(3, 2.0), _Plain(None))
    assert type(one.ratio) is float and vars(one) == vars(_Plain(3, 2.0))
    assert one.tags == [] and one.tags is not two.tags
    with pytest.raises(DecodeError, match=r"\$\.n"):
        decode(_Plain, {"n": True})
    with pytest.raises(FrozenInstanceError):
        one.n = 4  # type: ignore[misc]
    # AND a __post_init__ still runs
    assert decode(_Checked, {"n": 1}) == _Checked(1)
    with pytest.raises(DecodeError, match="negative"):
        decode(_Checked, {"n": -1})
    # AND a builder is the constructor, for every field given or not
    build = builder(ProgressSample)
    sample = {"rank": 3, "time_s": 0.5, "last_enqueued_seq": None}
    full = {**sample, "last_completed_seq": 2, "stack_signature": "s", "state": "w"}
    assert build(sample) == ProgressSample(3, 0.5)
    assert build(full) == ProgressSample(3, 0.5, None, 2, "s", "w")
