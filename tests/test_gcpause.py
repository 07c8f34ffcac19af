"""The cyclic collector is paused while many hosts are merged and judged, and only then."""

from __future__ import annotations

import gc

import pytest

from doctor.evidence import Evidence
from doctor.gcpause import collector_paused
from doctor.remote import merge as merge_module
from doctor.remote.transport import HostAnswer
from doctor.verdict import classify


def test_the_collector_is_off_inside_and_as_it_was_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pass leaves it to the outer
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_merge_and_judge_run_with_the_collector_paused(monkeypatch) -> None:
    seen = []
    read = merge_module.read_answers
    monkeypatch.setattr(
        merge_module, "read_answers", lambda *a: seen.append(gc.isenabled()) or read(*a)
    )
    judge = classify.judge
    monkeypatch.setattr(classify, "judge", lambda *a: seen.append(gc.isenabled()) or judge(*a))
    silent = {"h0": HostAnswer("h0", None, None, "no answer within 6s")}
    evidence = merge_module.merge("j", ["h0"], silent, 1.0)
    classify.analyse(evidence)
    assert seen == [False, False]
    assert gc.isenabled()
    assert isinstance(evidence, Evidence) and evidence.hosts[0].reached is False
