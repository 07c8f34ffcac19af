"""Playbooks: one Markdown file per check family, check id or hang class.

``load("env.unknown")`` returns ``env.unknown.md`` when it exists, else the
family's ``env.md``; a hang class is ``<class>.md``. Every file has the same
headings (What it means · Why it matters · Evidence that fired · What to do ·
Known false positives · References), so a person knows where to look.
"""

from __future__ import annotations

from importlib import resources

from doctor.errors import InputError

HERE = resources.files(__name__)
"""The installed Markdown files (``doctor.playbooks`` package data)."""
HEADINGS = (
    "What it means",
    "Why it matters",
    "Evidence that fired",
    "What to do",
    "Known false positives",
    "References",
)


def known() -> list[str]:
    """Every playbook id, sorted (file names without ``.md``)."""
    return sorted(p.name.removesuffix(".md") for p in HERE.iterdir() if p.name.endswith(".md"))


def resolve(playbook_id: str) -> str | None:
    """The playbook file id for a check id, family or hang class; None when there is none."""
    ids = set(known())
    for candidate in (playbook_id, playbook_id.split(".", 1)[0]):
        if candidate in ids:
            return candidate
    return None


def load(playbook_id: str) -> str:
    """The Markdown text of a playbook; ``InputError`` naming the known ids when unknown."""
    found = resolve(playbook_id)
    if found is None:
        raise InputError(
            f"no playbook for {playbook_id!r}; known: {', '.join(known())} "
            "(a check id such as env.unknown resolves to its family)"
        )
    return (HERE / f"{found}.md").read_text(encoding="utf-8")


def title(playbook_id: str) -> str:
    """The first heading of a playbook without an ``id:`` prefix, for the list."""
    for line in load(playbook_id).splitlines():
        if line.startswith("# "):
            return line[2:].strip().removeprefix(f"{playbook_id}: ")
    return playbook_id
