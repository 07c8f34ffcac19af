"""The Markdown report fits an issue body at 2,048 ranks and quotes the job as text; the CLI.

An issue body is rendered by GitHub as Markdown with raw HTML allowed, so the test
renders the body with markdown-it (CommonMark, HTML on, tables) and reads the HTML that
comes out: every element in it must be one the report writes, none from the job.
"""

from __future__ import annotations

import time
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from clitools import run_cli
from hostile_text import HOSTILE
from markdown_it import MarkdownIt
from triage_helpers import hung_evidence, recorded_stack
from typer.testing import CliRunner

from doctor.analyze.load import load_evidence as analyze_load
from doctor.cli import app
from doctor.errors import UsageError
from doctor.evidence import Evidence, HostReach, LogEvent
from doctor.report import html, markdown
from doctor.report.content import build
from doctor.verdict.classify import analyse

WORLD = 2048
PER_HOST = 8
MARKUP = '</details></table><script>alert("pwned")</script><img src=x onerror=alert(1)>'
EVIL = MARKUP + HOSTILE
EVIL_HOST = "node9<script>alert(1)</script>"
ALLOWED = {
    "h2", "h3", "p", "blockquote", "table", "thead", "tbody", "tr", "th", "td", "details",
    "summary", "pre", "code", "ol", "ul", "li", "strong", "em",
}  # fmt: skip


@pytest.fixture(scope="module")
def big() -> Evidence:
    """2,048 ranks on 256 hosts (one not reached, its name hostile), rank 2 in its data
    loader (a hostile frame name), 600 log lines each quoting hostile text."""
    stacks = []
    for r in range(WORLD):
        s = replace(recorded_stack("dataloader", 2 if r == 2 else 0), rank=r)
        if r == 2 and s.main is not None:
            main = s.main
            frames = (replace(main.frames[0], name=EVIL), *main.frames[1:])
            s = replace(
                s, threads=tuple(replace(t, frames=frames) if t is main else t for t in s.threads)
            )
        stacks.append(s)
    evidence = hung_evidence(stacks, world=WORLD)
    names = [f"node{h:03d}" for h in range(WORLD // PER_HOST - 1)] + [EVIL_HOST]
    procs = tuple(replace(p, host=names[p.rank // PER_HOST]) for p in evidence.processes)
    hosts = tuple(
        HostReach(n, n != EVIL_HOST, "" if n != EVIL_HOST else f"timed out: {EVIL}",
                  tuple(range(i * PER_HOST, (i + 1) * PER_HOST)), 1.0)
        for i, n in enumerate(names)
    )  # fmt: skip
    logs = tuple(
        LogEvent(r % WORLD, "exception", f"RuntimeError at step {r}: {EVIL}", origin=f"r.log:{r}")
        for r in range(600)
    )
    return replace(evidence, processes=procs, hosts=hosts, logs=logs)


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.tags.append(tag)


def test_the_issue_body_fits_at_2048_ranks_and_quotes_the_job_as_text(big: Evidence) -> None:
    # GIVEN the report of a 2,048-rank hang with hostile text in frames, logs and a host
    analysis = analyse(big)
    report = build(big, analysis)
    # WHEN written as Markdown
    start = time.monotonic()
    body = markdown.render(report)
    seconds = time.monotonic() - start
    # THEN it fits GitHub's issue body, said where it was cut, and was quick
    assert len(body) < markdown.LIMIT and seconds < 2.0
    assert "left out to fit an issue body" in body
    assert f"## nccl-doctor: `{analysis.verdict.hang_class.value}`" in body
    assert "### Versions" in body and "PyTorch: unknown" in body and "NCCL: unknown" in body
    # AND rendered as GitHub does (raw HTML on), only the report's own elements appear
    page = MarkdownIt("commonmark", {"html": True}).enable("table").render(body)
    tags = Tags()
    tags.feed(page)
    assert set(tags.tags) <= ALLOWED, set(tags.tags) - ALLOWED
    assert tags.tags.count("details") == body.count("<details")
    assert (
        "&lt;script&gt;alert(&quot;pwned&quot;)" in page or '&lt;script&gt;alert("pwned")' in page
    )
    assert "\x1b" not in body and "\\x1b]52;c;" in body
    # AND ranks alike are folded: 256 hosts make the rows, not 2,048 ranks
    ranks = next(t for t in report.tables if t.anchor == "ranks")
    assert len(ranks.rows) < 300 and ranks.summary.startswith("2048 ranks in")


def test_the_html_page_stays_short_at_2048_ranks(big: Evidence) -> None:
    # GIVEN the same 2,048-rank hang
    report = build(big, analyse(big))
    # WHEN written as HTML
    page = html.render(report)
    # THEN long tables are folded, the job's markup is escaped, the page is a few hundred kB
    assert len(page) < 1_000_000
    assert "<details>" in page  # the 256-row tables start closed
    assert "<script>" not in page.replace(f"<script>{html.SCRIPT}</script>", "")
    assert page.count("<img") == 0


def test_report_writes_markdown_to_standard_output(tmp_path) -> None:
    # GIVEN Flight Recorder dumps of a real hung gloo job (rank 2 called all_gather)
    dumps = Path(__file__).resolve().parents[1] / "fixtures" / "fr" / "gloo-wrong-collective"
    # WHEN reported as Markdown to standard output
    done = run_cli("report", str(dumps), "--format", "md", "-o", "-")
    # THEN stdout is the issue body, and nothing is written elsewhere
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("## nccl-doctor: `collective_mismatch` (high confidence)")
    assert "Flight Recorder format: 2.10" in done.stdout
    # AND a wrong format is a usage error (exit 2, one sentence) before anything is read
    bad = CliRunner().invoke(
        app, ["report", str(tmp_path / "absent"), "--format", "pdf", "-o", "-"]
    )
    assert isinstance(bad.exception, UsageError) and bad.exception.exit_code == 2
    assert str(bad.exception) == "--format must be html or md, not 'pdf'"


def test_the_versions_block_quotes_the_nccl_banner_of_a_real_log() -> None:
    # GIVEN the NCCL INFO log of a real communicator on the H200 (NCCL 2.28.9, CUDA 13.0)
    log = Path(__file__).resolve().parents[1] / "fixtures" / "gpu" / "h200" / "nccl-info.log"
    evidence = analyze_load([log])
    # WHEN the report is built
    report = build(evidence, analyse(evidence))
    # THEN the versions block states what NCCL's banner line states
    assert dict(report.versions)["NCCL"] == "2.28.9"
    assert dict(report.versions)["CUDA"] == "13.0"
