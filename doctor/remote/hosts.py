"""Host lists as people and schedulers write them: ``h1,h2``, ``h[1-128]``, host files.

ClusterShell's ``NodeSet`` parses and folds SLURM-style ranges (``gpu[001-128]``), so a
2,000-host job prints as one short line, as ``scontrol`` and ``pdsh`` print it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from doctor.errors import InputError, UsageError
from doctor.trust.safeio import UnsafePath, open_regular

MAX_HOSTS = 65536
UNREADABLE = (NodeSetParseError, ValueError)
"""What ``NodeSet`` raises on text it cannot read: its own error, or for some bracket
texts (``[----]``) a bare ``ValueError`` from inside its range parser."""
MAX_HOSTFILE_BYTES = 4 * 1024 * 1024
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,252}")
"""A host name as ssh and srun get it: letters, digits, ``_ . : -``, never a leading ``-``
(ssh would read it as an option) nor a space, ``@`` or shell character."""


def valid_host(name: str) -> bool:
    return _HOST_NAME.fullmatch(name) is not None


def parse_hosts(text: str) -> list[str]:
    """``"h[1-3],gpu7"`` -> ``["h1", "h2", "h3", "gpu7"]`` in the order given, no repeats."""
    try:
        nodes = NodeSet(text.strip())
    except UNREADABLE as exc:
        raise UsageError(f"--hosts: cannot read {text!r} as a host list ({exc})") from None
    if len(nodes) > MAX_HOSTS:
        raise UsageError(f"--hosts names {len(nodes)} hosts; at most {MAX_HOSTS} are supported")
    if not len(nodes):
        raise UsageError("--hosts names no host")
    hosts = _ordered(text, nodes)
    bad = next((h for h in hosts if not valid_host(h)), None)
    if bad is not None:
        raise UsageError(
            f"--hosts: {bad!r} is not a host name (letters, digits, _ . : -, not starting with -)"
        )
    return hosts


def _ordered(text: str, nodes: NodeSet) -> list[str]:
    """The hosts of ``nodes`` in the order ``text`` named them (NodeSet sorts)."""
    out: dict[str, None] = {}
    for part in _split_top(text):
        for host in NodeSet(part):
            out.setdefault(str(host))
    return list(out) if len(out) == len(nodes) else [str(h) for h in nodes]


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets: ``h[1,3],g2`` -> ``["h[1,3]", "g2"]``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def read_hostfile(path: Path) -> list[str]:
    """One host (or range) per line; ``#`` comments; MPI's ``host slots=8`` keeps the host."""
    try:  # a link is followed (the user named it), a FIFO or device refused, size bounded
        fd = open_regular(path, None, MAX_HOSTFILE_BYTES, follow=True)
        with os.fdopen(fd, "rb") as f:
            text = f.read(MAX_HOSTFILE_BYTES + 1).decode(errors="replace")
    except UnsafePath as exc:
        raise InputError(f"--hostfile: {exc}") from None
    except OSError as exc:
        raise InputError(f"cannot read the host file {path} ({exc.strerror})") from None
    if len(text) > MAX_HOSTFILE_BYTES:
        raise InputError(f"{path}: a host file of more than 4 MiB is not a host file")
    items = []
    for line in text.splitlines():
        word = line.split("#", 1)[0].strip().split()
        if word:
            items.append(word[0])
    if not items:
        raise InputError(f"{path} names no host")
    return parse_hosts(",".join(items))


def fold(hosts: Iterable[str]) -> str:
    """``["h1", "h2", "h3", "g7"]`` -> ``"g7,h[1-3]"``: any number of hosts on one line.
    Names ``NodeSet`` cannot read (a host document may say anything) follow as they are."""
    names = sorted(set(hosts))
    try:
        return str(NodeSet.fromlist(names))
    except UNREADABLE:
        odd = [n for n in names if not _foldable(n)]
        folded = str(NodeSet.fromlist([n for n in names if _foldable(n)]))
        return ",".join(filter(None, [folded, *odd]))


def _foldable(name: str) -> bool:
    try:
        return len(NodeSet(name)) == 1
    except UNREADABLE:
        return False
