"""NVIDIA's labelled Flight Recorder sets: every faulty rank named, the class honest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import run_cli

from doctor.analyze.load import load_evidence
from doctor.model import Confidence, HangClass
from doctor.verdict.classify import classify

NVRX = Path(__file__).resolve().parent.parent / "fixtures" / "fr-nvrx"
SETS = {
    "gpu_error_1st": (12, 14),
    "gpu_error_2nd": (9, 14),
    "lock_gil_1st": (9, 14),
    "lock_gil_2nd": (10, 15),
}


def _labelled(name: str) -> tuple[int, ...]:
    line = next(
        ln
        for ln in (NVRX / name / "fault_injection.log").read_text().splitlines()
        if ln.startswith("Fault ranks:")
    )
    return tuple(json.loads(line.split(":", 1)[1]))


@pytest.mark.parametrize("name", sorted(SETS))
def test_all_faulty_ranks_are_named(name: str) -> None:
    # GIVEN a set whose fault_injection.log names the faulty ranks
    assert _labelled(name) == SETS[name]
    # WHEN classified from its dumps alone
    verdict = classify(load_evidence([NVRX / name]))
    # THEN exactly those ranks are the culprits (NVIDIA's analyzer misses 14 in gpu_error_1st)
    assert verdict.culprit_ranks == SETS[name]


@pytest.mark.parametrize("name", sorted(SETS))
def test_fr_alone_does_not_pretend_to_know_gpu_from_gil(name: str) -> None:
    verdict = classify(load_evidence([NVRX / name]))
    assert verdict.hang_class is HangClass.UNKNOWN
    assert verdict.confidence is Confidence.LOW
    missing = " ".join(verdict.missing_evidence)
    assert "py-spy stacks" in missing and "NVML" in missing


def test_cli_json_on_a_real_set() -> None:
    res = run_cli("analyze", str(NVRX / "gpu_error_1st"), "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 1
    assert doc["schema"] == "nccl-doctor/triage/v1"
    assert doc["verdict"]["culprit_ranks"] == [12, 14]
    assert doc["collected"] == {
        "ranks_expected": 16,
        "ranks_found": 16,
        "seconds": doc["collected"]["seconds"],
    }
    assert {g["process_group"] for g in doc["groups"]} >= {"41", "42"}
