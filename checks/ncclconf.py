"""NCCL's own config files, read the way NCCL reads them.

At init NCCL loads ``$NCCL_CONF_FILE`` (or, when that is unset or empty,
``~/.nccl.conf`` of the user's passwd entry), then ``/etc/nccl.conf``. Each
``NAME=value`` line goes through ``setenv(name, value, 0)``: the environment
wins over any file and the first file wins over the second. Lines starting
with ``#`` and lines without ``=`` are skipped; nothing is trimmed. A
variable set only in a file is invisible to ``env | grep NCCL``, which is why
every finding names the source that set its value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from doctor.trust.safeio import UnsafePath, open_regular

ENVIRONMENT = "environment"
SYSTEM_FILE = "/etc/nccl.conf"


@dataclass(frozen=True)
class ConfFile:
    """One config file NCCL would read, with its text (None when absent or unreadable)."""

    path: str
    text: str | None


@dataclass(frozen=True)
class MergedEnv:
    env: dict[str, str]
    """The environment NCCL ends up with."""
    sources: dict[str, str]
    """Variable -> ``environment`` or ``FILE:LINE``."""
    files_read: tuple[str, ...]


def conf_paths(env: Mapping[str, str], home: str | None) -> list[str]:
    """The files NCCL reads, in precedence order."""
    user = env.get("NCCL_CONF_FILE", "")
    first = user if user else (f"{home}/.nccl.conf" if home else None)
    return [p for p in (first, SYSTEM_FILE) if p]


def parse_conf(text: str) -> list[tuple[str, str, int]]:
    """``(name, value, line)`` for each line NCCL would apply (names and values kept verbatim)."""
    entries = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        entries.append((name[:1023], value[:1023], number))
    return entries


def merge(env: Mapping[str, str], files: Sequence[ConfFile]) -> MergedEnv:
    """Apply ``files`` under ``env`` with ``setenv(..., overwrite=0)`` semantics."""
    merged = dict(env)
    sources = dict.fromkeys(env, ENVIRONMENT)
    for conf in files:
        if conf.text is None:
            continue
        for name, value, line in parse_conf(conf.text):
            if name and name not in merged:
                merged[name] = value
                sources[name] = f"{conf.path}:{line}"
    return MergedEnv(merged, sources, tuple(c.path for c in files if c.text is not None))


MAX_CONF_BYTES = 1 << 20
"""The bound on one NCCL config file (they hold a few lines)."""


def read_conf_files(paths: Sequence[str]) -> list[ConfFile]:
    """The edge: read each file, treating a missing or unreadable one as absent, as NCCL does.
    Only a regular file within ``MAX_CONF_BYTES`` is read: ``NCCL_CONF_FILE=/dev/zero`` or a
    FIFO would otherwise be read forever."""
    files = []
    for path in paths:
        try:
            fd = open_regular(Path(path), None, MAX_CONF_BYTES, follow=True)
            with os.fdopen(fd, "rb") as f:
                size = min(os.fstat(fd).st_size + 1, MAX_CONF_BYTES)
                text: str | None = f.read(size).decode("utf-8", errors="replace")
        except (OSError, UnsafePath):
            text = None
        files.append(ConfFile(path, text))
    return files
