"""The catalogue's generator reads a framework's message at the place a person listed, and
leaves the place out when the source no longer prints what was listed there."""

from __future__ import annotations

import ast
from pathlib import Path

from clitools import load_tool

SOURCE = """\
def start(world):
    if world % 8:
        raise RuntimeError(
            f"world_size ({world}) is not divisible by 8"
        )
    assert world > 0, f"world size {world} must be positive"
    logger.info("started")
"""


def test_the_message_of_the_call_at_or_near_a_listed_line_is_read() -> None:
    tool = load_tool("gen_message_catalogue")
    tree = ast.parse(SOURCE)
    # GIVEN a raise spanning lines 3-5 WHEN line 4 (inside it) or 2 (one before) is asked
    # THEN its f-string's literal pieces are the message, at the call's first line
    assert tool._message_near(tree, 4) == (3, ["world_size (", ") is not divisible by 8"])
    assert tool._message_near(tree, 2) == (3, ["world_size (", ") is not divisible by 8"])
    # AND an assert's message is one too; a line far from any call reads nothing
    assert tool._message_near(tree, 6) == (6, ["world size", "must be positive"])
    assert tool._message_near(tree, 40) is None


def test_a_listed_place_whose_source_moved_is_left_out_and_said(tmp_path: Path, capsys) -> None:
    tool = load_tool("gen_message_catalogue")
    # GIVEN two places in the installed torch: one whose example is what it prints, one
    # whose example is not (the source changed since it was listed)
    places = tmp_path / "places.tsv"
    places.write_text(
        "# class\trepository\tplace\texample\n"
        "collective_mismatch\ttorch\ttorch/distributed/algorithms/join.py:296\t"
        "RuntimeError: Rank 3 exhausted all inputs.\n"
        "bootstrap\ttorch\ttorch/distributed/algorithms/join.py:296\t"
        "RuntimeError: something else entirely happened here\n"
    )
    messages, commits = tool.framework_messages(tmp_path, places)
    # THEN the first is read with its class and place, the second left out and reported
    assert [m["class"] for m in messages] == ["collective_mismatch"]
    assert messages[0]["source"] == "torch" and "join.py:" in messages[0]["at"]
    assert commits == {}
    assert "left out: torch torch/distributed/algorithms/join.py:296" in capsys.readouterr().out
