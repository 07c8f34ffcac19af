"""The report as GitHub-flavoured Markdown: an issue body for NCCL's or PyTorch's tracker.

GitHub refuses a body over 65,536 characters, so the body is built part by part
within that budget: a table that does not fit keeps the rows that do and says how
many it left out (the HTML report has them all). Long parts sit in ``<details>``.
The versions block is the one both projects' issue templates ask for.

Text from the job goes through ``cell``: control characters shown as escapes,
``<``/``>``/``&`` as entities (GitHub renders raw HTML in a body, so ``<details>``
from a frame name would be markup), Markdown's punctuation backslash-escaped, cut to
``MAX_CELL`` characters. Inside a code fence only control characters are escaped, and
the fence is longer than any run of backticks in the text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from doctor.model import CollectiveRef
from doctor.ranks import rank_list
from doctor.report.content import Report, Table, outline
from doctor.trust.escape import escape_control
from doctor.verdict.render import collective_text

LIMIT = 65_536
"""GitHub's limit on an issue or comment body, in characters."""
MAX_CELL = 300
"""The longest text a table cell quotes from the job."""
OPEN_ROWS = 20
_PUNCT = re.compile(r"([\\`*_{}\[\]()#+!|~@])")


def cell(value: object) -> str:
    """Untrusted text for a Markdown table cell or a line of prose."""
    raw = escape_control(str(value))
    if len(raw) > MAX_CELL:
        raw = raw[: MAX_CELL - 1] + "…"
    return _PUNCT.sub(r"\\\1", html.escape(raw, quote=False))


def fence(lines: Sequence[str], info: str = "text") -> str:
    """A code block of untrusted lines that no line can close."""
    body = "\n".join(escape_control(line) for line in lines)
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    mark = "`" * max(3, longest + 1)
    return f"{mark}{info}\n{body}\n{mark}"


@dataclass(frozen=True)
class Part:
    """A part of the body: its head, rows that may be cut to fit, and its tail."""

    head: str
    rows: tuple[str, ...] = ()
    tail: str = ""

    def whole(self) -> str:
        return "\n".join([self.head, *self.rows, self.tail])

    def fit(self, budget: int) -> str:
        """As many rows as fit ``budget`` characters, with a note of those left out; ''
        when not even the head fits."""
        whole = self.whole()
        if len(whole) <= budget:
            return whole
        note = "\n\n_{} more rows left out to fit an issue body; the HTML report has them._\n"
        room = budget - len(self.head) - len(self.tail) - len(note) - 12
        kept: list[str] = []
        for row in self.rows:
            if room < len(row) + 1:
                break
            kept.append(row)
            room -= len(row) + 1
        if room < 0:
            return ""
        return "\n".join([self.head, *kept, note.format(len(self.rows) - len(kept)), self.tail])


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], bold: Sequence[Sequence[bool]] = ()
) -> tuple[str, tuple[str, ...]]:
    head = "| " + " | ".join(headers) + " |\n|" + "---|" * len(headers)
    lines = []
    for i, row in enumerate(rows):
        marks = bold[i] if i < len(bold) else ()
        cells = [
            f"**{cell(c)}**" if j < len(marks) and marks[j] and c != "" else cell(c)
            for j, c in enumerate(row)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return head, tuple(lines)


def render(report: Report) -> str:
    """The issue body, at most ``LIMIT`` characters."""
    doc = report.doc
    parts = [
        _verdict(doc),
        Part(f"### Next steps: {cell(report.playbook_title)}\n\n{report.next_steps}\n"),
        Part("### Versions\n\n" + fence([f"{k}: {v}" for k, v in report.versions]) + "\n"),
        *_part(report.evidence),
        *_tree(doc),
        *(p for t in report.tables for p in _part(t)),
        Part(
            "### Environment\n",
            tuple(f"- {cell(k)}: {cell(v)}" for k, v in report.environment),
            "\n_Written by `nccl-doctor report`: the same verdict as `nccl-doctor analyze`._\n",
        ),
    ]
    out: list[str] = []
    budget = LIMIT
    for part in parts:
        piece = part.fit(budget - 2)
        if piece:
            out.append(piece)
            budget -= len(piece) + 1
    return "\n".join(out)


def _verdict(doc: dict[str, Any]) -> Part:
    v = doc["verdict"]
    rows = [
        ("culprit ranks", rank_list(v["culprit_ranks"]) or "none"),
        ("confidence", v["confidence"]),
    ]
    if v["collective"]:
        rows.append(("collective", collective_text(CollectiveRef(**v["collective"]))))
    c = doc["collected"]
    rows.append(("ranks read", f"{c['ranks_found']} of {c['ranks_expected'] or '?'}"))
    rows.append(("job", doc["job"]))
    rows += [("would decide", m) for m in v["missing_evidence"]]
    head, lines = _table(("", ""), rows)
    return Part(
        f"## nccl-doctor: `{v['hang_class']}` ({v['confidence']} confidence)\n\n"
        f"> {cell(v['summary'])}\n\n{head}",
        lines,
        f"\nPlaybook: `nccl-doctor playbook {v['playbook']}`\n",
    )


def _tree(doc: dict[str, Any]) -> list[Part]:
    tree = doc.get("stack_tree")
    if not tree:
        return []
    lines = []
    for box in outline(tree, set(doc["verdict"]["culprit_ranks"])):
        pad = "  " * box.depth
        lines.append(f"{pad}{'*' if box.hot else '-'} {box.label}")
        lines += [f"{pad}    {f}" for f in box.frames]
        if box.more:
            lines.append(f"{pad}    … {box.more} more branches")
    where = tree.get("diverge_at")
    say = f"The ranks part at {cell(where)}. " if where else ""
    # the fence must close: cut lines, not characters, and keep the fence whole
    code = fence(lines)
    while len(code) > LIMIT // 3 and len(lines) > 1:
        lines = lines[: len(lines) * 2 // 3] + ["… (cut to fit; the HTML report draws it all)"]
        code = fence(lines)
    return [
        Part(
            f"### Merged stack tree\n\n{say}`*` marks a box only culprits reach; frames "
            "outermost first.\n\n<details open><summary>stack tree</summary>\n\n"
            f"{code}\n\n</details>\n"
        )
    ]


def _part(t: Table | None) -> list[Part]:
    if t is None:
        return []
    if not t.rows:
        return [Part(f"### {cell(t.title)}\n\n{cell(t.summary)}\n")]
    head, lines = _table(t.headers, t.rows, t.odd)
    state = " open" if len(t.rows) <= OPEN_ROWS else ""
    note = f"\n_{cell(t.note)}_\n" if t.note else ""
    return [
        Part(
            f"### {cell(t.title)}\n\n<details{state}><summary>{cell(t.summary)}</summary>"
            f"\n\n{head}",
            lines,
            f"{note}\n</details>\n",
        )
    ]
