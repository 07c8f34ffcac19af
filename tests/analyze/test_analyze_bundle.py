"""Bundles: raw evidence round-trips, analyze re-judges it to the same verdict, old bundles load."""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest
from clitools import run_cli

from doctor.analyze import format as bundle_format
from doctor.analyze.format import write_bundle
from doctor.analyze.load import load_evidence
from doctor.errors import InputError
from doctor.evidence import SCHEMA_V1, LogEvent
from doctor.verdict.classify import analyse, classify
from doctor.verdict.render import to_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fr"
GLOO = FIXTURES / "gloo-wrong-collective"


def _tar(out: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(out, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def test_analyze_of_a_bundle_reproduces_its_verdict(tmp_path: Path) -> None:
    # GIVEN the evidence and verdict of a run, bundled with its raw dumps
    evidence = load_evidence([GLOO])
    analysis = analyse(evidence)
    fr = {p.name: p.read_bytes() for p in GLOO.iterdir()}
    out = write_bundle(
        tmp_path / "triage.tar.gz",
        evidence,
        analysis.verdict,
        fr=fr,
        stacks={2: "[]"},
        logs={"../../escape.log": b"x"},
    )
    # WHEN analyze reads the bundle elsewhere
    res = run_cli("analyze", str(out), "--json", cwd=tmp_path)
    # THEN it reaches the same verdict
    doc = json.loads(res.stdout)
    assert doc["verdict"] == analysis.verdict.to_json() == to_json(evidence, analysis)["verdict"]
    assert doc["verdict"]["hang_class"] == "collective_mismatch"
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert "logs/escape.log" in names and "evidence.json" in names and "fr/rank_2" in names


def test_a_bundle_carries_raw_evidence_that_round_trips(tmp_path: Path) -> None:
    # GIVEN a bundle written without any raw dump file (only evidence.json)
    evidence = load_evidence([GLOO])
    out = write_bundle(tmp_path / "b.tar.gz", evidence, classify(evidence))
    # WHEN it is loaded back
    again = load_evidence([out])
    # THEN the evidence is what was written (reduced dumps included), and judges the same
    assert again == evidence and len(again.dumps) == 4
    assert classify(again) == classify(evidence)


def test_an_old_v1_bundle_still_loads(tmp_path: Path) -> None:
    # GIVEN a bundle of the first format: evidence.json (v1) without dumps, raw dumps in fr/
    v1 = {"schema": SCHEMA_V1, "job": "old", "ranks_expected": 4, "skipped": [], "seconds": 0.5}
    members = {"evidence.json": json.dumps(v1).encode()}
    members |= {f"fr/{p.name}": p.read_bytes() for p in GLOO.iterdir()}
    old = _tar(tmp_path / "old.tar.gz", members)
    # WHEN it is analysed THEN the dumps come from fr/ and the verdict is the same as before
    evidence = load_evidence([old])
    assert evidence.job == "old" and sorted(d.rank for d in evidence.dumps) == [0, 1, 2, 3]
    assert classify(evidence) == classify(load_evidence([GLOO]))


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
    # WHEN it is analysed THEN nothing is written, the link is refused, dumps are used
    evidence = load_evidence([bad])
    assert sorted(d.rank for d in evidence.dumps) == [0, 1, 2, 3]
    assert [s.reason for s in evidence.unreadable_dumps] == [
        "bad.tar.gz: fr/rank_9: not a plain file (a link or a device)"
    ]
    assert not (tmp_path.parent / "evidence.json").exists()
    assert classify(evidence).culprit_ranks == (2,)


def test_a_bound_hit_is_one_sentence_naming_the_bound(tmp_path: Path, monkeypatch) -> None:
    # GIVEN a bundle whose evidence.json is larger than the bound
    big = _tar(tmp_path / "big.tar.gz", {"evidence.json": b" " * 2048 + b"{}"})
    monkeypatch.setattr(bundle_format, "MAX_JSON_BYTES", 1024)
    # WHEN it is analysed THEN the input error says which member and which bound
    with pytest.raises(InputError, match=r"evidence.json: larger than 1024 bytes \(member-bytes"):
        load_evidence([big])


def test_malformed_evidence_is_an_input_error_not_a_traceback(tmp_path: Path) -> None:
    # GIVEN a bundle whose evidence.json has a string where a list of dumps belongs
    doc = {"schema": "nccl-doctor/evidence/v2", "job": "j", "ranks_expected": 2, "dumps": "x"}
    bad = _tar(tmp_path / "bad.tar.gz", {"evidence.json": json.dumps(doc).encode()})
    # WHEN analyze reads it THEN it exits 2 with one sentence that names the field
    res = run_cli("analyze", str(bad), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "evidence.json is malformed ($.dumps: expected a list)" in res.stderr


def test_an_unpacked_bundle_judges_like_the_tar(tmp_path: Path) -> None:
    # GIVEN a bundle whose evidence holds a watchdog log line and the log's tail
    line = (
        "[rank2]:[E ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=7, OpType=ALLGATHER, NumelIn=4, NumelOut=16, Timeout(ms)=5000)"
    )
    evidence = load_evidence([GLOO])
    evidence = replace(evidence, logs=(LogEvent(2, "watchdog_timeout", line, seq=7),))
    out = write_bundle(
        tmp_path / "b.tar.gz", evidence, classify(evidence), logs={"rank_2.log": line.encode()}
    )
    folder = tmp_path / "unpacked"
    with tarfile.open(out) as tar:
        tar.extractall(folder, filter="data")
    # WHEN the tar and the folder it unpacks to are analysed
    # THEN both hold exactly the evidence that was written: no log line read twice
    assert load_evidence([out]) == load_evidence([folder]) == evidence


def test_binary_data_given_is_said_to_be_binary_not_a_dump_without_a_rank(tmp_path: Path) -> None:
    # GIVEN a core file and an executable's bytes (NUL in their first bytes, no pickle), and
    # a pickle that is no dump
    core, exe, odd = tmp_path / "core.1234", tmp_path / "train.bin", tmp_path / "odd.pkl"
    core.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    exe.write_bytes(b"MZ\x90\x00\x03\x00\x00\x00")
    odd.write_bytes(b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01x\x94K\x01s.")
    # WHEN they are given alone, together, and beside the pickle
    said = []
    for paths in ([core], [core, exe], [core, odd]):
        with pytest.raises(InputError) as caught:
            load_evidence(paths)
        said.append(str(caught.value))
    # THEN binary data is named as such, and the pickle still gets the dump reader's reason
    assert said[0] == f"{core} is binary data, neither a log nor a pickled Flight Recorder dump"
    assert said[1] == f"{core}, {exe} are binary data, neither a log nor a pickled Flight " + (
        "Recorder dump"
    )
    assert said[2].endswith(f"{core}, {odd} (core.1234: binary data)")
