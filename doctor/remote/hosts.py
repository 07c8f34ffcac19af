"""Host lists as people and schedulers write them: ``h1,h2``, ``h[1-128]``, host files.

ClusterShell's ``NodeSet`` parses and folds SLURM-style ranges (``gpu[001-128]``), so a
2,000-host job prints as one short line, as ``scontrol`` and ``pdsh`` print it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from doctor.errors import InputError, UsageError

MAX_HOSTS = 65536
MAX_HOSTFILE_BYTES = 4 * 1024 * 1024


def parse_hosts(text: str) -> list[str]:
    """``"h[1-3],gpu7"`` -> ``["h1", "h2", "h3", "gpu7"]`` in the order given, no repeats."""
    try:
        nodes = NodeSet(text.strip())
    except NodeSetParseError as exc:
        raise UsageError(f"--hosts: cannot read {text!r} as a host list ({exc})") from None
    if len(nodes) > MAX_HOSTS:
        raise UsageError(f"--hosts names {len(nodes)} hosts; at most {MAX_HOSTS} are supported")
    if not len(nodes):
        raise UsageError("--hosts names no host")
    return _ordered(text, nodes)


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
    try:
        if path.stat().st_size > MAX_HOSTFILE_BYTES:
            raise InputError(f"{path}: a host file of more than 4 MiB is not a host file")
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read the host file {path} ({exc.strerror})") from None
    items = []
    for line in text.splitlines():
        word = line.split("#", 1)[0].strip().split()
        if word:
            items.append(word[0])
    if not items:
        raise InputError(f"{path} names no host")
    return parse_hosts(",".join(items))


def fold(hosts: Iterable[str]) -> str:
    """``["h1", "h2", "h3", "g7"]`` -> ``"g7,h[1-3]"``: any number of hosts on one line."""
    return str(NodeSet.fromlist(list(hosts)))
