"""Measured against predicted busbw over message sizes: in the terminal, as SVG and as PNG.

The SVG is written here rather than with matplotlib: one small chart does not
justify a plotting stack (matplotlib and its compiled dependencies) in a
diagnostics tool installed on every node, and SVG text is deterministic, so
tests compare it exactly. PNG needs a rasteriser: Pillow (the ``plot`` extra),
imported only when a ``.png`` is asked for. Both draw from one ``Layout``.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from doctor.bench.result import BenchResult
from doctor.bench.sizes import human

if TYPE_CHECKING:
    from PIL.ImageDraw import ImageDraw

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


@dataclass(frozen=True)
class Layout:
    """The chart in pixels (log2 size axis), shared by the SVG and PNG writers."""

    result: BenchResult
    width: int = 720
    height: int = 400
    left: int = 70
    right: int = 20
    upper: int = 40
    lower: int = 50

    @cached_property
    def series(self) -> tuple[list[float], list[float], list[float], float]:
        return _points(self.result)

    def px(self, x: float) -> float:
        xs = self.series[0]
        return self.left + (x - xs[0]) / ((xs[-1] - xs[0]) or 1.0) * (
            self.width - self.left - self.right
        )

    def py(self, y: float) -> float:
        top = self.series[3]
        return self.height - self.lower - y / top * (self.height - self.upper - self.lower)

    @property
    def title(self) -> str:
        r = self.result
        return f"AllReduce busbw: {r.nproc} ranks, {r.backend} ({r.device})"

    def y_ticks(self) -> list[tuple[str, float]]:
        top = self.series[3]
        return [(f"{top * i / 4:.3g}", self.py(top * i / 4)) for i in range(5)]

    def x_ticks(self) -> list[tuple[str, float]]:
        xs = self.series[0]
        step = max(1, len(xs) // 8)
        return [
            (human(row.bytes), self.px(x))
            for x, row in list(zip(xs, self.result.rows, strict=True))[::step]
        ]

    def lines(self) -> list[tuple[str, str, list[tuple[float, float]], bool]]:
        """(label, colour, pixel points, dashed) of each series, predicted drawn first."""
        xs, measured, predicted, _top = self.series
        return [
            (label, color, [(self.px(x), self.py(y)) for x, y in zip(xs, ys, strict=True)], dashed)
            for label, color, ys, dashed in (
                ("predicted", PREDICTED, predicted, True),
                ("measured", MEASURED, measured, False),
            )
        ]


def svg_plot(result: BenchResult, width: int = 720, height: int = 400) -> str:
    """A standalone SVG line chart of measured and predicted busbw."""
    lay = Layout(result, width, height)
    base = lay.py(0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2:.0f}" y="20" text-anchor="middle" font-size="14">'
        f"{escape(lay.title)}</text>",
        f'<line x1="{lay.left}" y1="{base:.1f}" x2="{width - lay.right}" y2="{base:.1f}" '
        'stroke="black"/>',
        f'<line x1="{lay.left}" y1="{lay.upper}" x2="{lay.left}" y2="{base:.1f}" stroke="black"/>',
    ]
    for label, y in lay.y_ticks():
        parts.append(f'<text x="{lay.left - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    for label, x in lay.x_ticks():
        parts.append(
            f'<text x="{x:.1f}" y="{height - lay.lower + 18}" text-anchor="middle">{label}</text>'
        )
    parts.append(
        f'<text x="{width / 2:.0f}" y="{height - 8}" text-anchor="middle">'
        "message size (bytes)</text>"
    )
    parts.append(
        f'<text x="16" y="{height / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {height / 2:.0f})">busbw (GB/s)</text>'
    )
    for _label, color, points, dashed in lay.lines():
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        dots = "".join(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in points
        )
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{pts}"/>{dots}'
        )
    for i, (label, color) in enumerate((("measured", MEASURED), ("predicted", PREDICTED))):
        y = lay.upper + 6 + 18 * i
        parts.append(
            f'<rect x="{lay.left + 12}" y="{y - 9}" width="14" height="4" '
            f'fill="{color}"/><text x="{lay.left + 32}" y="{y - 4}">{label}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def png_plot(result: BenchResult, width: int = 720, height: int = 400) -> bytes:
    """The same chart as ``svg_plot``, rasterised with Pillow; ImportError without it."""
    from PIL import Image, ImageDraw, ImageFont

    lay = Layout(result, width, height)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font, big = ImageFont.load_default(size=12), ImageFont.load_default(size=14)
    base = lay.py(0)
    draw.text((width / 2, 14), lay.title, fill="black", font=big, anchor="mm")
    draw.line([(lay.left, base), (width - lay.right, base)], fill="black")
    draw.line([(lay.left, lay.upper), (lay.left, base)], fill="black")
    for label, y in lay.y_ticks():
        draw.text((lay.left - 6, y), label, fill="black", font=font, anchor="rm")
    for label, x in lay.x_ticks():
        draw.text((x, height - lay.lower + 14), label, fill="black", font=font, anchor="mm")
    draw.text(
        (width / 2, height - 10), "message size (bytes)", fill="black", font=font, anchor="mm"
    )
    axis = Image.new("RGB", (120, 16), "white")
    ImageDraw.Draw(axis).text((60, 8), "busbw (GB/s)", fill="black", font=font, anchor="mm")
    image.paste(axis.rotate(90, expand=True), (4, int(height / 2 - 60)))
    for _label, color, points, dashed in lay.lines():
        if dashed:
            for a, b in zip(points, points[1:], strict=False):
                _dashed(draw, a, b, color)
        else:
            draw.line(points, fill=color, width=2)
        for x, y in points:
            draw.ellipse([x - 3, y - 3, x + 3, y + 3], fill=color)
    for i, (label, color) in enumerate((("measured", MEASURED), ("predicted", PREDICTED))):
        y = lay.upper + 6 + 18 * i
        draw.rectangle([lay.left + 12, y - 9, lay.left + 26, y - 5], fill=color)
        draw.text((lay.left + 32, y - 7), label, fill="black", font=font, anchor="lm")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _dashed(draw: ImageDraw, a: tuple[float, float], b: tuple[float, float], color: str) -> None:
    """A 6-on 4-off dashed segment, as the SVG's ``stroke-dasharray="6 4"``."""
    (x0, y0), (x1, y1) = a, b
    length = math.hypot(x1 - x0, y1 - y0) or 1.0
    pos = 0.0
    while pos < length:
        end = min(pos + 6, length)
        draw.line(
            [
                (x0 + (x1 - x0) * pos / length, y0 + (y1 - y0) * pos / length),
                (x0 + (x1 - x0) * end / length, y0 + (y1 - y0) * end / length),
            ],
            fill=color,
            width=2,
        )
        pos += 10
