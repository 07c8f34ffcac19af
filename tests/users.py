"""Real ordinary users for the security tests: a job's owner and another user.

Tests that play an attacker need users that exist (``useradd``), not only a uid:
``/proc`` ownership, ``setpriv`` and file ownership all go by them. Created once per
machine, left in place (other test runs use the same names).
"""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    def run(self, argv: list[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """``argv`` as this user (its uid and gid, no other group)."""
        return subprocess.Popen(
            ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", *argv],
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def own(self, *paths: os.PathLike[str] | str) -> None:
        """Give ``paths`` (links themselves, not what they point at) to this user."""
        for path in paths:
            os.lchown(path, self.uid, self.gid)


def ordinary_user(name: str) -> User:
    """The local user ``name``, created without a home or a login shell if missing."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=False,
            capture_output=True,
        )
        entry = pwd.getpwnam(name)  # created here, or by a test run beside this one
    return User(name, entry.pw_uid, entry.pw_gid)
