"""The env catalogue: every variable NCCL 2.30 and PyTorch 2.13 read, loaded once.

Built from ``checks/data/nccl_env.tsv`` and ``torch_env.tsv`` (facts gathered
from both sources), ``extra_env.tsv`` (what launchers and libraries set around
them) and ``unread_env.tsv`` (names popular guides recommend that nothing
reads, with what to use instead). Neither NCCL nor PyTorch warns about an
unknown name, so this table is the only thing that can.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
CHECKED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCH_FR_")
"""Names in these namespaces must be in the catalogue (``env.unknown``)."""
OWN_PREFIX = "NCCL_DOCTOR_"
"""nccl-doctor's own variables share NCCL's namespace; they are never unknown."""
STILL_READ_ALIASES = frozenset({"TORCH_NCCL_TRACE_BUFFER_SIZE"})
"""Marked as aliases in the sources but still the only name ProcessGroupNCCL reads."""


@dataclass(frozen=True)
class VarSpec:
    """One catalogued variable."""

    name: str
    component: str
    """Who reads it: ``nccl``, ``torch.c10d.nccl``, ``none (not read)``..."""
    type: str
    """``int``, ``bool``, ``enum``, ``list``, ``string``, ``path``, ``float`` or empty."""
    default: str
    allowed: str
    """Free text from the sources: ``0|1``, ``1-128``, ``VERSION|WARN|INFO``..."""
    alias_of: str
    """The current name when this one is a deprecated alias."""
    meaning: str

    @property
    def read(self) -> bool:
        """Whether anything reads it (removed names are catalogued to explain them)."""
        return not self.component.startswith("none")

    @property
    def nccl_parsed(self) -> bool:
        """NCCL (and its plugins) parse integers with ``strtoll``; PyTorch does not."""
        return self.component.startswith("nccl")

    @property
    def deprecated_no_op(self) -> bool:
        return "no-op" in self.meaning.lower()


@dataclass(frozen=True)
class Unread:
    """A name that nothing reads, and what does the job instead."""

    name: str
    instead: str
    why: str


def _rows(name: str) -> list[dict[str, str]]:
    text = (DATA / name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines(), delimiter="\t"))


@cache
def catalogue() -> dict[str, VarSpec]:
    """Name -> spec; where both sources list a name, the row with a type wins."""
    specs: dict[str, VarSpec] = {}
    for table in ("nccl_env.tsv", "torch_env.tsv", "extra_env.tsv"):
        for row in _rows(table):
            spec = VarSpec(
                row["name"],
                row["component"],
                row["type"],
                row["default"],
                row["allowed_values"],
                row["deprecated_alias_of"],
                row["meaning"],
            )
            old = specs.get(spec.name)
            if old is None or (not old.type and spec.type) or (not old.read and spec.read):
                specs[spec.name] = spec
    return specs


@cache
def unread() -> dict[str, Unread]:
    """Names nothing reads: our table of replacements plus the sources' removed names."""
    table = {r["name"]: Unread(r["name"], r["instead"], r["why"]) for r in _rows("unread_env.tsv")}
    for spec in catalogue().values():
        if not spec.read and spec.name not in table:
            instead = f"use {spec.alias_of}" if spec.alias_of else "nothing, remove it"
            table[spec.name] = Unread(spec.name, instead, spec.meaning)
    return table


def in_checked_namespace(name: str) -> bool:
    return name.startswith(CHECKED_PREFIXES) and not name.startswith(OWN_PREFIX)


def suggest(name: str) -> str | None:
    """The nearest real name: a missing ``TORCH_`` prefix first, then edit distance <= 3."""
    known = [s.name for s in catalogue().values() if s.read and in_checked_namespace(s.name)]
    for candidate in (f"TORCH_{name}", name.removeprefix("TORCH_")):
        if candidate != name and candidate in known:
            return candidate
    truncated = [k for k in known if k.startswith(name + "_") and len(k) - len(name) <= 5]
    if truncated:
        return min(truncated, key=len)
    limit = min(3, max(1, len(name) // 6))
    best: tuple[int, str] | None = None
    for other in known:
        if abs(len(other) - len(name)) > limit:
            continue
        distance = edit_distance(name, other, limit)
        if distance <= limit and (best is None or distance < best[0]):
            best = (distance, other)
    return best[1] if best else None


def edit_distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance, giving up (returning ``limit + 1``) once it must exceed ``limit``."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]
