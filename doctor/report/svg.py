"""The merged stack tree (``doctor.verdict.stacktree.to_json``) drawn as inline SVG.

An outline, as LLNL's STAT draws it turned sideways: one box per run of frames the same
ranks share (``content.outline``), children below and indented, a line from each box to
its parent. A box shows its ranks folded into ranges and its frames, outermost first
(a long run elided; all of them in the box's tooltip). Boxes only culprits reach are
red. The JSON form caps the tree at 200 boxes, so the picture stays bounded at any
rank count.
"""

from __future__ import annotations

from typing import Any

from doctor.report.content import outline
from doctor.report.markup import text

INDENT = 28
LINE = 16
PAD = 6
GAP = 10
CHAR = 7.6
"""Width of one character of the 12 px monospace font, with room to spare (DejaVu Sans
Mono is 7.2 px; a fallback font may be wider)."""
MAX_CHARS = 110
_NL = "\n"
_BOLD = ' class="ranks"'


def _clip(line: str) -> str:
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


def stack_tree_svg(tree: dict[str, Any], culprits: set[int]) -> str:
    """The tree as an ``<svg>`` element; every frame and rank label escaped."""
    parts = []
    width = height = y = 0
    bottoms: dict[int, int] = {}
    """depth -> where the last box drawn at that depth ends: a child's connector starts
    at its parent's (depth - 1)."""
    for box in outline(tree, culprits):
        lines = [box.label, *(_clip(f) for f in box.frames)]
        if box.more:
            lines.append(f"… {box.more} more branches (in analyze --json)")
        x = box.depth * INDENT + 1
        w = int(max(len(line) for line in lines) * CHAR) + 2 * PAD
        h = len(lines) * LINE + 2 * PAD
        width, height = max(width, x + w + 2), max(height, y + h + 2)
        if box.depth:
            px = (box.depth - 1) * INDENT + 14
            parts.append(f'<path d="M{px} {bottoms[box.depth - 1] + 1}V{y + LINE}H{x}"/>')
        texts = "".join(
            f'<text x="{x + PAD}" y="{y + PAD + (i + 1) * LINE - 4}"'
            f"{_BOLD if i == 0 else ''}>{text(line)}</text>"
            for i, line in enumerate(lines)
        )
        css = ' class="hot"' if box.hot else ""
        parts.append(
            f"<g><title>{text(_NL.join(box.all_frames), keep=_NL)}</title>"
            f'<rect x="{x}" y="{y + 1}" width="{w}" height="{h}" rx="4"{css}/>{texts}</g>'
        )
        bottoms[box.depth] = y + h
        y += h + GAP
    return (
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="merged stack tree">{"".join(parts)}</svg>'
    )
