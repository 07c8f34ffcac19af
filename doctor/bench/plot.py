"""Measured against predicted busbw over message sizes: in the terminal and as SVG.

The SVG is written here rather than with matplotlib: one small chart does not
justify a plotting stack (matplotlib and its compiled dependencies) in a
diagnostics tool installed on every node, and SVG text is deterministic, so
tests compare it exactly. PNG would need such a stack, so ``--plot`` takes
``.svg`` only and says so.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

from doctor.bench.result import BenchResult
from doctor.bench.sizes import human

MEASURED, PREDICTED = "#1f77b4", "#d62728"


def _points(result: BenchResult) -> tuple[list[float], list[float], list[float], float]:
    xs = [math.log2(r.bytes) for r in result.rows]
    measured = [r.busbw_gbps for r in result.rows]
    predicted = [r.predicted_busbw_gbps for r in result.rows]
    top = max(measured + predicted + [1e-9]) * 1.1
    return xs, measured, predicted, top


def terminal_plot(result: BenchResult, width: int = 60, height: int = 12) -> str:
    """A character chart: ``*`` measured, ``o`` predicted, ``#`` both in one cell."""
    if not result.rows:
        return ""
    xs, measured, predicted, top = _points(result)
    span = (xs[-1] - xs[0]) or 1.0
    grid = [[" "] * width for _ in range(height)]

    def put(x: float, y: float, mark: str) -> None:
        col = round((x - xs[0]) / span * (width - 1))
        row = height - 1 - round(y / top * (height - 1))
        cell = grid[row][col]
        grid[row][col] = "#" if cell not in (" ", mark) else mark

    for x, y in zip(xs, predicted, strict=True):
        put(x, y, "o")
    for x, y in zip(xs, measured, strict=True):
        put(x, y, "*")
    lines = [f"busbw GB/s (* measured, o predicted, # both)   top {top:.3g}"]
    lines += ["|" + "".join(row) for row in grid]
    left, right = f"{human(result.rows[0].bytes)}B", f"{human(result.rows[-1].bytes)}B"
    lines.append("+" + "-" * width)
    lines.append(" " + left + " " * max(width - len(left) - len(right), 1) + right)
    return "\n".join(lines)


def svg_plot(result: BenchResult, width: int = 720, height: int = 400) -> str:
    """A standalone SVG line chart of measured and predicted busbw (log2 size axis)."""
    xs, measured, predicted, top = _points(result)
    left, right, upper, lower = 70, 20, 40, 50
    span = (xs[-1] - xs[0]) or 1.0

    def px(x: float) -> float:
        return left + (x - xs[0]) / span * (width - left - right)

    def py(y: float) -> float:
        return height - lower - y / top * (height - upper - lower)

    def line(values: list[float], color: str, dash: str) -> str:
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, values, strict=True))
        dots = "".join(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}"/>'
                       for x, y in zip(xs, values, strict=True))
        return (f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} '
                f'points="{pts}"/>{dots}')

    title = escape(f"AllReduce busbw: {result.nproc} ranks, {result.backend} ({result.device})")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2:.0f}" y="20" text-anchor="middle" font-size="14">{title}</text>',
        f'<line x1="{left}" y1="{py(0):.1f}" x2="{width - right}" y2="{py(0):.1f}" '
        'stroke="black"/>',
        f'<line x1="{left}" y1="{upper}" x2="{left}" y2="{py(0):.1f}" stroke="black"/>',
    ]
    for i in range(5):
        value = top * i / 4
        parts.append(f'<text x="{left - 6}" y="{py(value) + 4:.1f}" text-anchor="end">'
                     f'{value:.3g}</text>')
    step = max(1, len(xs) // 8)
    for x, row in list(zip(xs, result.rows, strict=True))[::step]:
        parts.append(f'<text x="{px(x):.1f}" y="{height - lower + 18}" text-anchor="middle">'
                     f'{human(row.bytes)}</text>')
    parts.append(f'<text x="{width / 2:.0f}" y="{height - 8}" text-anchor="middle">'
                 'message size (bytes)</text>')
    parts.append(f'<text x="16" y="{height / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {height / 2:.0f})">busbw (GB/s)</text>')
    parts.append(line(predicted, PREDICTED, ' stroke-dasharray="6 4"'))
    parts.append(line(measured, MEASURED, ""))
    for i, (label, color) in enumerate((("measured", MEASURED), ("predicted", PREDICTED))):
        y = upper + 6 + 18 * i
        parts.append(f'<rect x="{left + 12}" y="{y - 9}" width="14" height="4" '
                     f'fill="{color}"/><text x="{left + 32}" y="{y - 4}">{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
