"""Headless Chromium opens a report as a person's browser would, and says what it did.

One start per page: ``--dump-dom`` gives the document after parsing (so markup that
escaped the renderer would be an element there), ``--screenshot`` the pixels,
``--log-net-log`` every request the network stack was asked to make, and the console
(``--enable-logging``) what the Content-Security-Policy blocked. The browser's own
background requests (update checks, the clock) have no page as their isolation key;
a request the page made has ``file://`` as its key. Every host name resolves to
nothing (``--host-resolver-rules``), so even a request made leaves no packet.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

CHROMIUM = shutil.which("chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--hide-scrollbars",
)
SKIP_REASON = "chromium is not installed (apt-get install chromium; make install does as root)"


@dataclass(frozen=True)
class Page:
    dom: str
    screenshot: Path
    requests: list[str]
    """URLs the page asked the network for."""
    console: list[str]
    """What the page wrote to the console: a style or script the Content-Security-Policy
    blocked is reported there ("Applying inline style violates ...")."""

    def colours(self) -> int:
        """Distinct colours in the screenshot: a blank page has one."""
        with Image.open(self.screenshot) as img:
            found = img.convert("RGB").getcolors(maxcolors=1 << 16)
        return len(found) if found is not None else 1 << 16


def page_requests(netlog: Path) -> list[str]:
    """URLs of the requests a ``file://`` page started (its network isolation key)."""
    doc = json.loads(netlog.read_text())
    start = doc["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        e["params"]["url"]
        for e in doc["events"]
        if e.get("type") == start
        and "file://" in e.get("params", {}).get("network_isolation_key", "")
    ]


def open_page(page: Path, out: Path, size: str = "1280,1600") -> Page:
    """Load ``page`` in a fresh profile; the DOM, a screenshot and the page's requests."""
    assert CHROMIUM is not None, SKIP_REASON
    out.mkdir(parents=True, exist_ok=True)
    shot, netlog = out / "screenshot.png", out / "netlog.json"
    done = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={out / 'profile'}",
            f"--window-size={size}",
            f"--screenshot={shot}",
            f"--log-net-log={netlog}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return Page(done.stdout, shot, page_requests(netlog), console)
