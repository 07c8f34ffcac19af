"""A stand-in ssh client (``NCCL_DOCTOR_SSH``) whose hosts behave by the prefix of their
name: ``good*`` answers at once, ``slow*``/``lost*``/``localhost`` never do, ``late*``
answers after 1.2 s, ``nokey*`` refuses the login, ``bare*`` lacks nccl-doctor."""

from __future__ import annotations

import stat

from doctor.remote.frames import encode

FAKE_SSH = """#!/bin/sh
# ClusterShell runs: ssh [options] HOST COMMAND; the host is the next-to-last argument
eval host=\\${$(($#-1))}
case "$host" in
  good*) echo + >> {log}; sleep 0.2; echo - >> {log}; printf '%s\\n' {frames} ;;
  slow*|localhost|lost*) exec sleep 30 ;;  # exec: the transport kills "ssh", the sleeper
  late*) sleep 1.2; printf '%s\\n' {frames} ;;
  nokey*) echo "Permission denied (publickey)." >&2; exit 255 ;;
  bare*) echo "nccl-doctor-missing $host /venv/bin/python"; exit 127 ;;
esac
"""


def fake_ssh(tmp_path) -> dict[str, str]:
    lines = " ".join(f"'{line}'" for line in encode("remote-name", '{"ok": true}'))
    path = tmp_path / "ssh"
    path.write_text(FAKE_SSH.replace("{frames}", lines).replace("{log}", str(tmp_path / "log")))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {"NCCL_DOCTOR_SSH": str(path)}
