"""A --once look that proves neither a hang nor progress looks again, longer, by itself."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from doctor.analyze.format import read_bundle_json
from doctor.model import Confidence, HangClass, Verdict
from doctor.verdict.progress import NO_PROOF, needs_longer_look


def test_only_a_verdict_without_proof_either_way_asks_for_a_longer_look() -> None:
    no_proof = Verdict(HangClass.UNKNOWN, (), Confidence.LOW, "nothing proved", (), (), NO_PROOF)
    hang = Verdict(HangClass.CPU_STUCK, (2,), Confidence.HIGH, "rank 2 is stuck")
    other = Verdict(HangClass.UNKNOWN, (1,), Confidence.LOW, "rank 1 never reached", (), (), ())
    assert needs_longer_look(no_proof)
    assert not needs_longer_look(hang) and not needs_longer_look(other)


def _triage(pid: int, *args: str) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "doctor", "triage", "--pids", str(pid), "--once", "--json", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=60,
    )
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout), done.stderr


def test_an_idle_rank_is_looked_at_again_over_three_seconds_unless_told(
    sleepers, tmp_path: Path
) -> None:
    # GIVEN a lone rank that sleeps: nothing waits in a collective, nothing moves
    rank = sleepers({"RANK": "0", "WORLD_SIZE": "1"}, "idle")
    # WHEN triage looks with its default window
    doc, said = _triage(rank.pid, "--bundle", str(tmp_path / "bundle.tgz"))
    # THEN it says it looks again over 3 s, and the second look is the one judged
    assert "looking again over 3 s (15 stack samples)" in said
    assert doc["collected"]["seconds"] >= 3.0
    assert doc["verdict"]["hang_class"] == "unknown"
    # AND that look took three times the first one's 5 stack samples
    evidence, _verdict = read_bundle_json(tmp_path / "bundle.tgz")
    assert evidence is not None and len(evidence["progress"]) == 15
    # AND a window the user chose is kept as it is
    doc, said = _triage(rank.pid, "--interval", "0.5")
    assert "looking again" not in said and doc["collected"]["seconds"] < 3.0


def test_a_job_that_ends_before_the_second_look_keeps_the_first(monkeypatch, capsys) -> None:
    from doctor.errors import NoSuchJobError

    cli = importlib.import_module("doctor.cli.triage")  # the package exports the command

    # GIVEN a first look, and a job whose ranks are gone when triage looks again
    first = object()

    def gone(*_args: object, **_kwargs: object) -> object:
        raise NoSuchJobError("no rank of job 'j' runs on this host")

    monkeypatch.setattr(cli, "_look", gone)
    # WHEN triage looks again (a slow native dump, or no proof either way)
    kept = cli._look_again(first, None, None, None, 6.0, spinner=False)  # type: ignore[arg-type]
    # THEN the first look is the answer, and the user is told why
    assert kept is first
    assert "ended before the second look" in capsys.readouterr().err
