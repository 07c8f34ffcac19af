"""Bundles: analyze of a bundle reproduces the verdict stored in it; tar reading is safe."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from clitools import run_cli

from doctor.bundle import load_evidence, write_bundle
from doctor.verdict.classify import classify
from doctor.verdict.render import to_json

GLOO = Path(__file__).resolve().parent / "fixtures" / "fr" / "gloo-wrong-collective"


def test_analyze_of_a_bundle_reproduces_its_verdict(tmp_path: Path) -> None:
    # GIVEN the evidence and verdict of a run, bundled with its raw dumps
    evidence = load_evidence([GLOO])
    verdict = classify(evidence)
    fr = {p.name: p.read_bytes() for p in GLOO.iterdir()}
    out = write_bundle(
        tmp_path / "triage.tar.gz",
        evidence,
        verdict,
        fr=fr,
        stacks={2: "[]"},
        logs={"../../escape.log": b"x"},
    )
    # WHEN analyze reads the bundle elsewhere
    res = run_cli("analyze", str(out), "--json", cwd=tmp_path)
    # THEN it reaches the same verdict
    doc = json.loads(res.stdout)
    assert doc["verdict"] == verdict.to_json() == to_json(evidence, verdict)["verdict"]
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert "logs/escape.log" in names and "evidence.json" in names and "fr/rank_2" in names


def test_hostile_bundle_members_are_ignored(tmp_path: Path) -> None:
    # GIVEN a tar whose members try to escape, link, or pose as evidence
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        for name, data in (("../evidence.json", b"{}"), ("/etc/evidence.json", b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("fr/rank_9")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        for p in GLOO.iterdir():
            tar.add(p, arcname=f"fr/{p.name}")
    # WHEN it is analysed THEN nothing is written, the links are skipped, dumps are used
    evidence = load_evidence([bad])
    assert evidence.flight is not None and evidence.flight.ranks_read == (0, 1, 2, 3)
    assert not (tmp_path.parent / "evidence.json").exists()
    assert classify(evidence).culprit_ranks == (2,)
