"""Undo what copying a log into an issue or a chat did to it, before it is parsed.

A terminal's copy cuts every line longer than its width into rows of exactly that width; a
paste nested in a list or a reply indents or quotes every row alike; a rendered page puts
no-break spaces and curly quotes where the log had ASCII. The watchdog's line, cut in two,
matched nothing, and an indented traceback was not one. Only small files are read whole for
this (``Bounds.word_bytes``): a job's own log file was never pasted.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Sequence

from doctor.logs.lines import MPI_TAG, SRUN_LABEL, TORCHRUN

NARROWEST = 60
"""A terminal narrower than this is not one a log was read in; shorter rows are lines."""
ROWS = 2
"""Rows of exactly the widest length that make a text hard-wrapped (a lone widest line is
just the longest line)..."""
TERMINALS = frozenset({80, 100, 120, 132, 160, 200})
"""...unless it is as wide as a terminal often is (80 is every terminal's default, 132 a
VT100's wide mode): a line cut once leaves one such row, and it still has to be cut inside a
word, a number or a path (``_cut``) to be joined."""
FRAMES = ("|", "+")
"""The edges of a drawn table (``nvidia-smi``): its rows all have one width, and are whole."""
SHAPE = 8
"""Characters that say how a row begins (``_shape``)."""
LABELS = (SRUN_LABEL, TORCHRUN, MPI_TAG)
QUOTE = re.compile(r"^(?:> ?)+")
"""A reply's quote markers (``lines.PASTED`` peels them too, from a line of a big file)."""


_ASCII = str.maketrans(
    {
        "\u00a0": " ",  # no-break space: a web page's or a chat's spaces
        "\u2007": " ",
        "\u2009": " ",
        "\u202f": " ",
        "\u2018": "'",  # an editor's curly quotes
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
    }
)


def plain(line: str) -> str:
    """``line`` with what a web page, a chat or an editor put in for ASCII undone: HTML's
    character references (``&lt;``, ``&#39;``), no-break and thin spaces, curly quotes, a
    Markdown source's ``\\_`` and ``\\*`` escapes. Every pattern of the parsers is written in
    ASCII; a paste from a rendered page missed them all."""
    if "&" in line and ";" in line:
        line = html.unescape(line)
    if not line.isascii():
        line = line.translate(_ASCII)
    if "\\" in line:
        line = line.replace("\\_", "_").replace("\\*", "*")
    return line


def unwrapped(lines: Sequence[str]) -> list[str]:
    """``lines`` in ASCII where a page put other characters in (``plain``), with a terminal's
    hard wrap undone and their common indentation and quote markers removed. A reply quotes,
    and a list indents, each row the terminal cut, so they go before the rows are joined; a
    margin inside the quote goes after."""
    bare = [plain(line.rstrip("\r\n")) for line in lines]
    rows = [QUOTE.sub("", row) for row in _dedented(bare)]
    return _dedented(_joined(rows))


def _width(lines: Sequence[str]) -> int | None:
    """The terminal's width when ``lines`` were cut at one: the longest length, shared by
    at least ``ROWS`` lines that do not end in a space (a row padded to the width does), or
    one of ``TERMINALS``."""
    widest = Counter(len(line) for line in lines if line[-1:].strip() and line[-1:] not in FRAMES)
    if not widest:
        return None
    width = max(widest)
    longest = max(len(line) for line in lines)
    if width < NARROWEST or width != longest:
        return None
    return width if widest[width] >= ROWS or width in TERMINALS else None


def _joined(lines: list[str]) -> list[str]:
    width = _width(lines)
    if width is None:
        return lines
    out: list[list[str]] = []  # rows of each line, joined once (a text of cut rows is linear)
    for line in lines:
        if out and _cut(out[-1][-1], width, line) and _shape(line) != _shape(out[-1][0]):
            out[-1].append(line)  # the terminal cut the row before: this one goes on with it
        else:
            out.append([line])
    return ["".join(rows) for rows in out]


def _cut(row: str, width: int, after: str) -> bool:
    """Whether the terminal cut ``row`` where ``after`` begins: as wide as the terminal, and
    cut inside a word, a number, a path or a call's arguments (a line's natural end, and
    the next line's indented or bracketed start, are not in one)."""
    end, start = row[-1:], after[:1]
    inside = end.isalnum() or (end != "" and end in "_,(=/")
    sentence = end.islower() and start.isupper()  # a line ends, the next begins: "...ed" "Wed"
    goes_on = start.isalnum() or (start != "" and start in "_=(/,%.)]")  # no line begins so
    if goes_on and any(label.match(after) for label in LABELS):
        return False  # a launcher labels lines, never a terminal's rows
    return len(row) == width and inside and goes_on and not sentence


_DIGITS = str.maketrans("0123456789", "0000000000")


def _shape(row: str) -> str:
    """How a row begins, digits aside: lines of one template (a kernel log's, every rank's
    watchdog line) all begin alike, and may all be as long; a cut row's rest begins anyhow."""
    return row[:SHAPE].translate(_DIGITS)


def _dedented(lines: list[str]) -> list[str]:
    margins = {len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()}
    cut = min(margins, default=0)
    if not cut:
        return lines
    return [line[cut:] for line in lines]
