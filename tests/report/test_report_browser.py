"""The HTML report in a real browser: reports of real bundles render offline; hostile text is text.

Chromium (``browser.open_page``) loads each page once: the dumped DOM must hold the
verdict, the screenshot must not be blank, the network log must show no request from
the page, and markup a job put in a frame name, a log line or a host name must be text
in the DOM, never an element.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from browser import CHROMIUM, SKIP_REASON, open_page
from clitools import run_cli
from hostile_text import HOSTILE
from triage_helpers import hung_evidence, recorded_stack

from doctor.analyze.format import write_bundle
from doctor.analyze.load import load_evidence
from doctor.demo.local import LocalJob
from doctor.evidence import Evidence, LogEvent
from doctor.remote.document import to_document
from doctor.remote.merge import merge
from doctor.remote.transport import HostAnswer
from doctor.report import html
from doctor.report.content import build
from doctor.verdict.classify import Analysis, analyse, classify

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)

MARKUP = '</details></table></svg><script>alert("pwned")</script><b id="pwn">x</b>'
"""Markup that, unescaped, would close the report's own elements and run a script."""
EVIL = MARKUP + HOSTILE
EVIL_HOST = "node9<script>alert(1)</script>\x1b[2J"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A real 4-rank gloo job hung by a sub-group mismatch (rank 2), triaged once with
    ``--bundle`` and ``--report``; the job is stopped before the tests look at the files."""
    tmp = tmp_path_factory.mktemp("live")
    job = LocalJob(f"report-{uuid.uuid4().hex[:6]}", "subgroup-mismatch", tmp, launch="agent")
    out = {"bundle": tmp / "triage.tar.gz", "triage_report": tmp / "triage.html"}
    with job:
        job.triage("--once", "--json", timeout=60)  # a rank's first Flight Recorder dump is slow
        done = job.triage(
            "--once",
            "--bundle",
            str(out["bundle"]),
            "--report",
            str(out["triage_report"]),
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    assert f"report written: {out['triage_report']}" in done.stdout
    yield out


def test_the_report_of_a_real_hung_job_renders_offline(live: dict[str, Path], tmp_path) -> None:
    # GIVEN the bundle triage wrote of the real hung job
    page = tmp_path / "incident.html"
    # WHEN nccl-doctor report turns it into a page, and Chromium opens that page
    done = run_cli("report", str(live["bundle"]), "-o", str(page))
    assert done.returncode == 0, done.stderr
    shown = open_page(page, tmp_path / "chromium")
    # THEN the verdict is on the page, with the culprit, as analyze gives it
    verdict = analyse(load_evidence([live["bundle"]])).verdict
    assert (verdict.hang_class.value, verdict.culprit_ranks) == ("collective_mismatch", (2,))
    assert '<h1 id="verdict">verdict: collective_mismatch</h1>' in shown.dom
    assert "all_gather" in shown.dom and "Next steps: Collective mismatch" in shown.dom
    # AND the stack tree is drawn, the Flight Recorder grid and the rank table are there
    assert shown.dom.count("<rect ") >= 2 and 'class="hot"' in shown.dom
    assert "Flight Recorder grid" in shown.dom and 'class="cell-scheduled odd"' in shown.dom
    assert "4 ranks in" in shown.dom
    # AND it rendered (not a blank page), with no request from the page
    assert shown.colours() > 50, "the screenshot is blank"
    assert shown.requests == []
    # AND the policy let our own style and script run (a wrong hash is a console error)
    assert shown.console == []
    # AND triage --report wrote the same verdict
    assert '<h1 id="verdict">verdict: collective_mismatch</h1>' in live["triage_report"].read_text()


def _multi_host_bundle(tmp: Path) -> Path:
    """A 6-rank job over three hosts (two answered, one silent), rank 2 in its data loader,
    with hostile text in a frame name, a log line and the silent host's name."""
    stacks = [recorded_stack("dataloader", min(r, 3) if r != 2 else 2) for r in range(6)]
    stacks = [replace(s, rank=r) for r, s in enumerate(stacks)]
    whole = hung_evidence(stacks, world=6)
    hosts = ["h1", "h2", EVIL_HOST]
    answers = {EVIL_HOST: HostAnswer(EVIL_HOST, None, None, f"cannot connect: {EVIL}")}
    for i, host in enumerate(hosts[:2]):
        mine = {2 * i, 2 * i + 1}
        part = replace(
            whole,
            processes=tuple(p for p in whole.processes if p.rank in mine),
            stacks=tuple(s for s in whole.stacks if s.rank in mine),
            progress=tuple(s for s in whole.progress if s.rank in mine),
        )
        answers[host] = HostAnswer(host, json.dumps(to_document(part, host, 6, sorted(mine))), 1.2)
    evidence = merge("7", hosts, answers, 2.0)
    evil_stacks = []
    for s in evidence.stacks:
        main = s.main
        if s.rank == 2 and main is not None:
            frames = (replace(main.frames[0], name=EVIL), *main.frames[1:])
            threads = tuple(replace(t, frames=frames) if t is main else t for t in s.threads)
            s = replace(s, threads=threads)
        evil_stacks.append(s)
    log = LogEvent(0, "exception", f"RuntimeError: {EVIL}", host="h1", origin="train.log:12")
    evidence = replace(evidence, stacks=tuple(evil_stacks), logs=(log,))
    return write_bundle(tmp / "multi.tar.gz", evidence, classify(evidence))


def test_hostile_text_from_a_multi_host_job_stays_text(tmp_path) -> None:
    # GIVEN a multi-host bundle with markup and control characters in a frame, a log, a host
    bundle = _multi_host_bundle(tmp_path)
    page = tmp_path / "multi.html"
    assert run_cli("report", str(bundle), "-o", str(page)).returncode == 0
    # WHEN Chromium opens its report
    shown = open_page(page, tmp_path / "chromium")
    # THEN the hosts table names every host, the silent one not reached
    assert "3 hosts, 1 not reached" in shown.dom and "<td>NO</td>" in shown.dom
    verdict = analyse(load_evidence([bundle])).verdict.hang_class.value
    assert f"verdict: {verdict}</h1>" in shown.dom
    # AND the markup is text: no element of the job's, one script (ours), details intact
    assert shown.dom.count("<script") == 1 and 'id="pwn"' not in shown.dom.replace(
        '&lt;b id="pwn"&gt;', ""
    )
    assert shown.dom.count('&lt;script&gt;alert("pwned")&lt;/script&gt;') >= 3  # frame, log, host
    assert "node9&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J" in shown.dom
    assert shown.dom.count("<details") == page.read_text().count("<details")
    # AND control characters are shown, not passed: no raw ESC in the document
    assert "\x1b" not in shown.dom and "\\x1b]52;c;" in shown.dom
    assert shown.colours() > 50 and shown.requests == [] and shown.console == []


def test_the_detectors_see_a_page_that_fetches_and_a_blocked_style(tmp_path) -> None:
    # GIVEN a report whose policy allows any source but names another hash for the style,
    # with an image and a frame from the network added
    text = html.render(build(*_gloo()))
    text = text.replace("default-src 'none'", "default-src *", 1)
    text = text.replace("style-src 'sha256-", "style-src 'sha256-AAAA", 1)
    text = text.replace(
        "<main>",
        '<main><img src="http://example.invalid/x.png">'
        '<iframe src="https://cdn.example.invalid/a.html"></iframe>',
        1,
    )
    page = tmp_path / "leaky.html"
    page.write_text(text)
    # WHEN Chromium opens it
    shown = open_page(page, tmp_path / "chromium", size="400,300")
    # THEN both requests are seen, and the console says the style was blocked: the report
    # tests' empty lists mean something
    assert sorted(shown.requests) == [
        "http://example.invalid/x.png",
        "https://cdn.example.invalid/a.html",
    ]
    assert any("violates the following Content Security Policy" in line for line in shown.console)


def _gloo() -> tuple[Evidence, Analysis]:
    evidence = load_evidence(
        [Path(__file__).parents[1] / "fixtures" / "fr" / "gloo-wrong-collective"]
    )
    return evidence, analyse(evidence)
