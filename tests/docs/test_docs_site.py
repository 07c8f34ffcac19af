"""The docs site in a real browser: the built index renders and asks nothing of the network.

The site is built as ``make lint`` builds it (``mkdocs build --strict``), into a temporary
folder, and opened once in headless Chromium (``browser.open_page``): no web font, CDN or
other request may leave the page, which a reader on an air-gapped cluster opens from disk.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser import CHROMIUM, SKIP_REASON, open_page

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
pytest.importorskip("mkdocs", reason="mkdocs is not installed (make install: the docs extra)")

REPO = Path(__file__).resolve().parents[2]


def test_the_built_site_renders_offline(tmp_path: Path) -> None:
    # GIVEN the site, built strictly (a broken link or anchor fails the build)
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-2000:]
    # WHEN Chromium opens its first page from disk
    page = open_page(site / "index.html", tmp_path / "chromium")
    # THEN it renders, with the navigation to every command's page
    assert "Quick start" in page.dom and 'href="preflight.html"' in page.dom
    assert page.colours() > 8
    # AND it asked the network for nothing (its own files are read from disk)
    assert page.requests == []
