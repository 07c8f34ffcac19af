"""The README is the landing page on GitHub, outside the site that ``mkdocs build --strict``
checks (``make lint``): it stays short, and every relative link in it names a file of the
repository and, after a ``#``, a heading of that file as GitHub spells its anchor."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"#{1,6} (.+)")


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (code blocks skipped)."""
    anchors, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := HEADING.fullmatch(line)):
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return anchors


def test_the_readme_is_a_short_landing_page() -> None:
    # GIVEN the README; THEN it is the landing page, the detail lives in docs/
    assert len((REPO / "README.md").read_text().splitlines()) <= 300


def test_every_relative_link_of_the_readme_names_a_file_and_a_heading_there() -> None:
    # GIVEN the README's links that stay in the repository
    links = [u for u in LINK.findall((REPO / "README.md").read_text()) if "://" not in u]
    assert len(links) >= 14  # one per docs page at least
    # WHEN each is followed as GitHub follows it
    broken = []
    for url in links:
        path, _, anchor = url.partition("#")
        target = REPO / (path or "README.md")
        if not target.is_file() or (anchor and anchor not in _anchors(target.read_text())):
            broken.append(url)
    # THEN none is broken
    assert broken == []
