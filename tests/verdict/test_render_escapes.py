"""Item 7 of issue 14: untrusted text reaches the verdict on a terminal only as escapes.

Process group names, op names, frame and file names come from dumps; thread names
and frames from py-spy; host names and reasons from remote host documents; reasons
carry file names. Every one is rendered with control characters escaped and never
read as rich markup; ``--json`` keeps the raw text (json.dumps escapes it).
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

from clitools import clean_env, run_cli
from hostile_text import FORGED, HOSTILE, assert_inert, hostile_dumps, hostile_evidence
from rich.console import Console

from doctor.verdict.render import render, to_json


def printed(renderable: object) -> str:
    console = Console(file=StringIO(), force_terminal=True, width=4000, color_system="truecolor")
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_every_untrusted_field_of_the_verdict_is_escaped(tmp_path: Path) -> None:
    # GIVEN dumps, stacks, hosts and skips whose every text field holds OSC 52, a
    # clear-screen, a CR, a newline forging a verdict line, a bidi override and markup
    evidence, analysis = hostile_evidence(tmp_path)
    # WHEN the verdict is rendered on a terminal
    out = printed(render(evidence, analysis))
    # THEN no control character and no markup reached it raw, and each field was shown:
    # summary, collective, missing, evidence, groups (name, role, op), culprit stack
    # (title and frames), the stack tree, hosts (name, reason), skips (probe, reason)
    assert_inert(out, shown_at_least=15)
    for heading in ("verdict:", "process groups that diverge", "hosts", "could not read"):
        assert heading in out


def test_json_keeps_the_raw_text(tmp_path: Path) -> None:
    # GIVEN the same hostile evidence WHEN it is printed as JSON
    evidence, analysis = hostile_evidence(tmp_path)
    text = json.dumps(to_json(evidence, analysis))
    # THEN the text is there as it was (JSON escapes it: no raw control character)
    assert "\x1b" not in text and "\n" not in text
    assert json.loads(text)["verdict"]["summary"] == HOSTILE
    assert any(g["process_group"] == HOSTILE for g in json.loads(text)["groups"])


def test_analyze_cli_prints_hostile_dumps_inert(tmp_path: Path) -> None:
    # GIVEN hostile dumps in a folder whose name and a file name carry escapes too
    name = HOSTILE.replace("/", "_")
    folder = hostile_dumps(tmp_path / f"dumps{name}")
    (folder / f"rank_9{name}").write_bytes(b"not a dump")
    # WHEN analyze prints to a wide terminal (rich forced on, as on a real one)
    out = run_cli("analyze", str(folder), env=clean_env({"FORCE_COLOR": "1", "COLUMNS": "4000"}))
    # THEN it judges (exit 1: a mismatch) and nothing hostile reaches stdout or stderr raw
    assert "Traceback" not in out.stderr and out.returncode == 1, out.stderr
    assert_inert(out.stdout + out.stderr, shown_at_least=3)
    assert FORGED in out.stdout
