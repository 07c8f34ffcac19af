"""The real TUI in a real terminal: tmux runs ``run_tui``, sends keys and reads the screen back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
DRIVER = Path(__file__).with_name("drive_tui.py")
ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.environ.get("HOME", "/tmp"),
    "LANG": "C.UTF-8",
    "TERM": "xterm-256color",
}
"""The tmux server's environment, which the TUI inherits: a 256-colour UTF-8 terminal."""

pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not installed (apt-get install tmux); it is the real terminal"
)


class Terminal:
    """One tmux server of our own (its own socket), one 160x48 window."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        assert TMUX is not None
        done = subprocess.run(
            [TMUX, "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=ENV,
        )
        done.check_returncode()
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "tui")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "tui", *keys)

    def wait_for(self, condition: Callable[[str], bool], what: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if condition(screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"the terminal never showed {what}; it shows:\n{self.screen()}")


@pytest.fixture
def terminal(tmp_path: Path):
    term = Terminal(tmp_path / "tmux.sock")
    command = (
        f"cd {tmp_path} && {sys.executable} {DRIVER} --interval 0.5; "
        f"echo $? > {tmp_path}/exit-code; sleep 60"
    )
    term.tmux("new-session", "-d", "-s", "tui", "-x", "160", "-y", "48", command)
    try:
        yield term
    finally:
        term.tmux("kill-server")


def test_the_tui_runs_in_a_real_terminal(terminal: Terminal, tmp_path: Path):
    # GIVEN the TUI on a job where rank 3 is in its data loader
    screen = terminal.wait_for(lambda s: "odd one out" in s, "the first snapshot")
    # THEN the verdict, the culprit's row and its stack are on screen
    assert "verdict: cpu_stuck" in screen and "culprit ranks: 3" in screen
    assert "missing at #1842" in screen
    assert "__next__ (dataloader.py:733)" in screen
    assert "rank 3 · data_loading · pid 41233" in screen
    # WHEN the person moves to rank 4, the stack pane follows
    terminal.keys("Down")
    terminal.wait_for(lambda s: "rank 4 · in_collective · pid 41234" in s, "rank 4's stack")
    # WHEN paused, the screen says so while collection goes on
    terminal.keys("p")
    terminal.wait_for(lambda s: "PAUSED (newer data waiting)" in s, "the pause")
    terminal.keys("p")
    terminal.wait_for(lambda s: "PAUSED" not in s, "the resume")
    # WHEN a bundle is asked for, it is written to the current directory
    terminal.keys("b")
    terminal.wait_for(lambda s: "bundle written" in s, "the bundle notice")
    (bundle,) = tmp_path.glob("nccl-doctor-llm-pretrain-0412-*.tar.gz")
    with tarfile.open(bundle) as tar:
        assert tar.getnames() == ["triage.json"]
    # WHEN recovery is asked for and confirmed
    terminal.keys("r")
    terminal.wait_for(lambda s: "in-process restart?" in s, "the confirmation")
    terminal.keys("y")
    terminal.wait_for(lambda s: "restart requested for every rank" in s, "the recovery answer")
    # WHEN the person quits, the exit code is the hang's
    terminal.keys("q")
    exit_code = tmp_path / "exit-code"
    terminal.wait_for(lambda s: exit_code.exists(), "the exit")
    assert exit_code.read_text().strip() == "1"
