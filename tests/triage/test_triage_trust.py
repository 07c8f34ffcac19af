"""Triage as root must not be turned against its user by a rank's environment (issue 14,
item 1, the file half) nor print another user's text raw (item 7, error messages)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from clitools import clean_env

from doctor.triage.export import _read
from doctor.triage.sources.flight import trigger_pipe

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's file needs root")


def test_the_debug_pipe_trigger_never_writes_through_a_link_or_into_a_file(
    tmp_path: Path,
) -> None:
    # GIVEN TORCH_NCCL_DEBUG_INFO_PIPE_FILE naming a link to a victim file, and a plain file
    victim = tmp_path / "root-only"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    (tmp_path / "x0.pipe").symlink_to(victim)
    (tmp_path / "y0.pipe").write_text("")
    # WHEN triage triggers the dumps THEN nothing is written anywhere
    assert trigger_pipe(tmp_path / "x0.pipe", tmp_path / "dump0", 0.1) is None
    assert trigger_pipe(tmp_path / "y0.pipe", tmp_path / "dump0", 0.1) is None
    assert victim.read_text() == "secret\n" and (tmp_path / "y0.pipe").read_text() == ""


@needs_root
def test_a_bundle_copies_only_files_of_the_job_owner(tmp_path: Path) -> None:
    # GIVEN NCCL_DEBUG_FILE naming a file the job's owner (uid 65534) does not own
    theirs, other = tmp_path / "theirs.log", tmp_path / "root-only.log"
    theirs.write_text("NCCL WARN x\n")
    os.chown(theirs, 65534, 65534)
    other.write_text("secret\n")
    link = tmp_path / "link.log"
    link.symlink_to(theirs)
    # WHEN the bundle reads them THEN only the owner's own file, never through a link
    assert _read(str(theirs), 1024, tail=True, owners={65534}) == b"NCCL WARN x\n"
    assert _read(str(other), 1024, tail=True, owners={65534}) is None
    assert _read(str(link), 1024, tail=True, owners={65534}) is None


def test_bundles_are_private(tmp_path: Path) -> None:
    from doctor.analyze.format import write_bundle
    from doctor.evidence import Evidence
    from doctor.verdict.classify import classify

    evidence = Evidence(job="j", ranks_expected=None)
    out = write_bundle(tmp_path / "b.tar.gz", evidence, classify(evidence))
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_newline_in_a_file_name_cannot_forge_a_line(tmp_path: Path, cli) -> None:
    # GIVEN a path whose name carries a newline, a fake verdict and a clear-screen escape
    name = tmp_path / "x\nverdict: healthy\x1b[2J"
    # WHEN analyze refuses it THEN the error is one line with the characters escaped
    out = cli("analyze", str(name), env=clean_env())
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "\x1b" not in out.stderr, out.stderr
    assert "\\nverdict: healthy\\x1b[2J" in out.stderr
