"""Hostile Flight Recorder dumps: bounded in time, memory, ranks and numbers; one bad dump
is a skip with its reason, never the end of the analysis nor exit 1 (issue 14, item 5)."""

from __future__ import annotations

import os
import pickle
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from clitools import clean_env, run_cli

from doctor.flight.reader import rank_of, read_flight

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fr"
GLOO = FIXTURES / "gloo-wrong-collective"


def _real() -> dict[str, Any]:
    return pickle.loads((GLOO / "rank_0").read_bytes())


def _write(path: Path, doc: object) -> Path:
    path.write_bytes(pickle.dumps(doc))
    return path


def _shared_nest(levels: int = 10, width: int = 10) -> list[Any]:
    """One list referenced ``width`` times at each of ``levels`` levels: a few hundred
    bytes pickled, 10**10 leaves to anything that walks it."""
    node: list[Any] = [0]
    for _ in range(levels):
        node = [node] * width
    return node


@pytest.mark.parametrize(
    "field", ["version", "profiling_name", "input_sizes", "state", "process_group", "frames"]
)
def test_a_shared_reference_bomb_is_bounded(tmp_path: Path, field: str) -> None:
    # GIVEN a dump whose field is a nest of shared references (306 bytes took 39 s, 2.4 GB)
    doc = _real()
    if field == "version":
        doc["version"] = _shared_nest()
    else:
        doc["entries"][0][field] = _shared_nest()
    path = _write(tmp_path / "rank_0", doc)
    assert path.stat().st_size < 4096
    # WHEN it is read THEN at once: read or skipped, never walked
    start = time.monotonic()
    read = read_flight([path])
    assert time.monotonic() - start < 5.0
    assert len(read.dumps) + len(read.skipped) == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("collective_seq_id", float("inf")),
        ("time_created_ns", 2**64),
        ("record_id", 10**5000),
        ("collective_seq_id", "9" * 5000),
        ("frames", [{"name": "f", "filename": "x.py", "line": float("inf")}]),
        ("process_group", ["\x1b]52;c;cHduZWQ=\x07", "\x00" * 3]),
    ],
    ids=["inf-seq", "2**64-time", "5000-digit-id", "5000-digit-text", "inf-line", "escapes"],
)
def test_hostile_numbers_and_names_are_a_skip_or_a_value(
    tmp_path: Path, field: str, value: object
) -> None:
    doc = _real()
    doc["entries"][0][field] = value
    read = read_flight([_write(tmp_path / "rank_0", doc)])
    assert len(read.dumps) + len(read.skipped) == 1
    for skipped in read.skipped:
        assert skipped.reason and "Traceback" not in skipped.reason


def test_a_huge_rank_number_is_not_a_rank(tmp_path: Path) -> None:
    # GIVEN a zero-byte rank_9999999 beside one dump without pg_config (3 GB of range())
    assert rank_of("rank_9999999") is None and rank_of("rank_" + "9" * 5000) is None
    doc = _real()
    doc.pop("pg_config", None)
    _write(tmp_path / "rank_0", doc)
    (tmp_path / "rank_9999999").write_bytes(b"")
    # WHEN analyze reads the folder THEN it answers, exit 0/1 as the dumps say, no traceback
    out = run_cli("analyze", str(tmp_path), env=clean_env())
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_device_as_a_dump_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "rank_1"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    start = time.monotonic()
    read = read_flight([path])
    assert time.monotonic() - start < 2.0
    assert not read.dumps and len(read.skipped) == 1


def test_one_bad_dump_in_a_large_folder_does_not_end_the_analysis(tmp_path: Path) -> None:
    # GIVEN 70 good dumps (the parallel path) and one whose numbers overflow
    for rank in range(70):
        shutil.copy(GLOO / "rank_0", tmp_path / f"rank_{rank}")
    doc = _real()
    doc["entries"][0]["collective_seq_id"] = float("inf")
    doc["entries"][1]["record_id"] = [[1]]
    _write(tmp_path / "rank_70", doc)
    # WHEN the folder is read THEN the 70 are read and the bad one is skipped with a reason
    read = read_flight([tmp_path])
    assert len(read.dumps) == 70 and [s.rank for s in read.skipped] == [70]


def test_escapes_in_a_dump_never_reach_the_terminal(tmp_path: Path) -> None:
    # GIVEN a dump whose process group name and frame carry OSC 52 and clear-screen escapes
    doc = _real()
    for entry in doc["entries"]:
        entry["process_group"] = ("0", "\x1b]52;c;cHduZWQ=\x07\x1b[2J")
        for frame in entry.get("frames", []):
            frame["name"] = "f\x1b[2J"
    _write(tmp_path / "rank_0", doc)
    shutil.copy(GLOO / "rank_1", tmp_path / "rank_1")
    (tmp_path / "rank_\n9 verdict: healthy").write_bytes(b"x")
    # WHEN analyze renders the verdict THEN no control character is printed
    out = run_cli("analyze", str(tmp_path), env=clean_env())
    assert "Traceback" not in out.stderr, out.stderr
    printed = out.stdout + out.stderr
    assert "\x1b" not in printed and "\x07" not in printed
