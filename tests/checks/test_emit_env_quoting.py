"""`preflight --emit-env` goes to eval: names and values another user wrote must stay data
(issue 14, item 4)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from clitools import clean_env

from doctor.checks.facts import Facts
from doctor.checks.fixes import emit_env, export, unset
from doctor.model import Finding, Severity


def _eval(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``eval "$(nccl-doctor preflight --emit-env)"`` in bash, in ``tmp_path``."""
    script = f'eval "$({sys.executable} -m doctor preflight --emit-env)"; echo evaluated'
    return subprocess.run(
        ["bash", "-c", script],
        env=clean_env(env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_name_in_an_nccl_conf_line_never_runs(tmp_path: Path) -> None:
    # GIVEN an NCCL config file whose variable name carries a command substitution
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_HCA`touch pwned`=mlx5\nNCCL_IB_HCA$(touch pwned2)=mlx5\n")
    # WHEN its --emit-env snippet is eval'ed
    done = _eval(tmp_path, {"NCCL_CONF_FILE": str(conf)})
    # THEN nothing ran, and the snippet still evaluated
    assert "evaluated" in done.stdout, done.stderr
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_a_value_with_a_newline_never_runs(tmp_path: Path) -> None:
    # GIVEN an environment value that hides a second command after a newline
    env = {"NCCL_IB_DISABLE": "true\nexport X=$(touch pwned)", "NCCL_SOCKT_IFNAME": "a\n`touch b`"}
    done = _eval(tmp_path, env)
    assert "evaluated" in done.stdout, done.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "fix",
    [
        export("NCCL_X`id`", "1"),
        export("NCCL_X", "a\nexport Y=$(id)"),
        unset(Facts(env={}), "A;id"),
        "export A=$(id)",
        "unset A;id",
        "export A='x'\nid",
        "# ok\x1cexport A=$(id)",
    ],
)
def test_every_snippet_line_is_inert_or_a_comment(fix: str) -> None:
    # GIVEN a finding whose fix text is hostile WHEN the snippet is assembled
    snippet, _ = emit_env([Finding("env.x", Severity.WARN, "A", "m", fix)])
    # THEN every line is a comment, or an export/unset of a plain name with a quoted value
    for line in snippet.split("\n"):
        assert line.startswith(("# ", "export ", "unset ")), line
        assert "$(" not in line.split("#")[0] and "`" not in line.split("#")[0], line
        assert "\x1c" not in line
