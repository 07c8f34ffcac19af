"""The report as one self-contained HTML page: opened offline, attached to a ticket.

No request leaves the page: styles and the one small script (a filter box) are inline,
the stack tree is inline SVG, there is no font, image or link to load, and the
Content-Security-Policy says so to the browser (``default-src 'none'``; the style and
the script allowed by their SHA-256 only). Every string from the job goes through
``text`` (control characters shown as escapes, then ``html.escape``), so a frame named
``<script>`` or ``</details>`` is text on the page, never an element.

At thousands of ranks the page stays short: ranks alike are one row of ranges, long
tables are folded in ``<details>`` (the browser's find still searches them), and the
filter box hides the rows that do not match.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

from doctor.model import CollectiveRef
from doctor.ranks import rank_list
from doctor.report.content import Report, Table
from doctor.report.markup import text
from doctor.report.svg import stack_tree_svg
from doctor.verdict.render import collective_text

OPEN_ROWS = 40
"""A table of at most this many rows is shown open; a longer one is folded."""

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2430;
background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:17px;margin:28px 0 8px}
header.verdict{background:#fff;border-left:8px solid #c62828;padding:16px 20px;
border-radius:6px;box-shadow:0 1px 3px #0002}
header.ok{border-left-color:#2e7d32}header.slow{border-left-color:#f9a825}
header.unknown{border-left-color:#8e24aa}
.summary{font-size:16px;margin:6px 0 12px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}
dt{font-weight:600;color:#4a5568}dd{margin:0}
code,.mono,td{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12.5px}
table{border-collapse:collapse;background:#fff;width:100%;box-shadow:0 1px 2px #0001}
th{background:#e8ebf0;text-align:left;font:600 12.5px system-ui,sans-serif}
th,td{padding:4px 8px;border-bottom:1px solid #e2e5ea;vertical-align:top}
td{overflow-wrap:break-word}td:first-child{white-space:nowrap}
tr.bad td{background:#fdecea}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
.steps{background:#fff;padding:4px 18px;border-radius:6px}
.tree{overflow:auto;background:#fff;border-radius:6px;padding:8px}
svg text{font:12px ui-monospace,"DejaVu Sans Mono",Menlo,monospace;fill:#1d2430}
svg .ranks{font-weight:700}
svg rect{fill:#fff;stroke:#90a4ae}svg rect.hot{fill:#fdecea;stroke:#c62828;stroke-width:2}
svg path{fill:none;stroke:#90a4ae}
.cell-scheduled,.cell-started{background:#fff3cd}.cell-completed{background:#e6f4ea}
.cell-{background:#f1f1f1}td.odd{background:#f8c9c4;font-weight:700}
#filter{font-size:14px;padding:6px 8px;width:320px;margin:14px 0 0}
.note{color:#5a6474}footer{margin-top:36px;color:#5a6474;font-size:12px}
"""

SCRIPT = (
    "document.getElementById('filter').addEventListener('input',function(e){"
    "var q=e.target.value.toLowerCase();"
    "document.querySelectorAll('table.rows tbody tr').forEach(function(r){"
    "r.hidden=q!==''&&r.textContent.toLowerCase().indexOf(q)<0;});"
    "if(q)document.querySelectorAll('details').forEach(function(d){d.open=true;});});"
)
"""The filter box: hides the table rows that do not contain what is typed."""


def _sha256(source: str) -> str:
    return base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()


CSP = (
    f"default-src 'none'; style-src 'sha256-{_sha256(STYLE)}'; "
    f"script-src 'sha256-{_sha256(SCRIPT)}'; base-uri 'none'; form-action 'none'"
)
"""Nothing loads: no font, image, frame or connection; only our own style and script."""

_HEADER_CLASS = {"healthy": "ok", "straggler": "slow", "unknown": "unknown"}


def render(report: Report) -> str:
    """The whole page."""
    doc = report.doc
    verdict = doc["verdict"]
    title = f"nccl-doctor: {verdict['hang_class']} in {doc['job']}"
    body = [
        _verdict(doc),
        '<input id="filter" type="search" placeholder="filter the tables (rank, host, frame)"'
        ' aria-label="filter the tables">',
        _next_steps(report),
        _section(report.evidence),
        _tree(doc),
        *(_section(t) for t in report.tables),
        _pairs("Versions", report.versions, "versions"),
        _pairs("Environment", report.environment, "environment"),
        "<footer>Written by <code>nccl-doctor report</code> from saved evidence; the same "
        "verdict as <code>nccl-doctor analyze</code>. This page makes no network request.</footer>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width,initial-scale=1">\n'
        f"<title>{text(title)}</title>\n<style>{STYLE}</style></head>\n<body><main>\n"
        + "\n".join(part for part in body if part)
        + f"\n</main><script>{SCRIPT}</script></body></html>\n"
    )


def _verdict(doc: dict[str, Any]) -> str:
    v = doc["verdict"]
    css = _HEADER_CLASS.get(v["hang_class"], "")
    rows = [
        ("culprit ranks", rank_list(v["culprit_ranks"]) or "none"),
        ("confidence", v["confidence"]),
    ]
    if v["collective"]:
        ref = CollectiveRef(**v["collective"])
        rows.append(("collective", collective_text(ref)))
    collected = doc["collected"]
    rows.append(
        ("ranks read", f"{collected['ranks_found']} of {collected['ranks_expected'] or '?'}")
    )
    rows.append(("playbook", f"nccl-doctor playbook {v['playbook']}"))
    rows += [("would decide", m) for m in v["missing_evidence"]]
    items = "".join(f"<dt>{text(k)}</dt><dd>{text(val)}</dd>" for k, val in rows)
    return (
        f'<header class="verdict {css}"><h1 id="verdict">verdict: {text(v["hang_class"])}</h1>'
        f'<p class="summary">{text(v["summary"])}</p><dl>{items}</dl>'
        f'<p class="note">job {text(doc["job"])}</p></header>'
    )


def _next_steps(report: Report) -> str:
    from markdown_it import MarkdownIt

    # the playbook is ours, shipped in the package; html off all the same
    steps = MarkdownIt("commonmark", {"html": False}).render(report.next_steps)
    return (
        f'<section id="next"><h2>Next steps: {text(report.playbook_title)}</h2>'
        f'<div class="steps">{steps}</div></section>'
    )


def table(t: Table) -> str:
    """A filterable table; every cell escaped; a grid's cells coloured by their state."""
    head = "".join(f"<th>{text(h)}</th>" for h in t.headers)
    out = []
    for i, row in enumerate(t.rows):
        css = ' class="bad"' if i < len(t.flagged) and t.flagged[i] else ""
        odd = t.odd[i] if i < len(t.odd) else ()
        cells = "".join(
            f'<td class="cell-{text(_state(c))}{" odd" if odd[j] else ""}">{text(c)}</td>'
            if odd and j
            else f"<td>{text(c)}</td>"
            for j, c in enumerate(row)
        )
        out.append(f"<tr{css}>{cells}</tr>")
    rows = "".join(out)
    return f'<table class="rows"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _state(cell: str) -> str:
    """``all_reduce scheduled`` -> ``scheduled``: the class that colours a grid cell."""
    return cell.rsplit(" ", 1)[-1] if cell else ""


def _section(t: Table | None) -> str:
    """A table under its heading, folded when long (the browser's find still opens it)."""
    if t is None:
        return ""
    head = f'<section id="{text(t.anchor)}"><h2>{text(t.title)}</h2>'
    if not t.rows:
        return f"{head}<p>{text(t.summary)}</p></section>"
    state = " open" if len(t.rows) <= OPEN_ROWS else ""
    note = f'<p class="note">{text(t.note)}</p>' if t.note else ""
    return (
        f"{head}<details{state}><summary>{text(t.summary)}</summary>{table(t)}{note}</details>"
        "</section>"
    )


def _pairs(heading: str, pairs: Sequence[tuple[str, str]], anchor: str) -> str:
    items = "".join(f"<dt>{text(k)}</dt><dd>{text(v)}</dd>" for k, v in pairs)
    return f'<section id="{anchor}"><h2>{text(heading)}</h2><dl>{items}</dl></section>'


def _tree(doc: dict[str, Any]) -> str:
    tree = doc.get("stack_tree")
    if not tree:
        return ""
    culprits = set(doc["verdict"]["culprit_ranks"])
    where = tree.get("diverge_at")
    note = (
        f"<p>The ranks part at <code>{text(where)}</code>: each box is a run of frames "
        "(outermost first) with the ranks that passed through it.</p>"
        if where
        else "<p>Every rank has the same main-thread stack.</p>"
    )
    return (
        '<section id="tree"><h2>Merged stack tree</h2>'
        f'{note}<div class="tree">{stack_tree_svg(tree, culprits)}</div></section>'
    )
