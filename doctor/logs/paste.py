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

from doctor.logs.lines import ESCAPE, MPI_TAG, SRUN_LABEL, TORCHRUN

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
GUTTERED = 3
"""Lines that, all numbered one after another, are a viewer's or ``cat -n``'s gutter; fewer
may be a log's own numbered lines."""
_GUTTER = re.compile(r"^ *(\d{1,9})(?:\t| *\| ?|$)")
"""A line number and what sets it off (``cat -n``'s tab, a viewer's bar); not a colon, which
``srun --label`` puts after a rank."""
RUN_TOGETHER = 200
"""A line at least this long that holds two records' starts is lines a paste ran together
(``_apart``); a record of one line is shorter, or holds one start."""
_RECORD = re.compile(
    r"(?:^|(?<=\s))(?:"
    r"\[(?:rank|default)\d{1,6}\]:?"  # torchrun's and PyTorch's rank labels
    r"|(?<!AT )(?<!at )\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d"  # a timestamp, not a time told
    r"|\[?[EWIF]\d{4} \d\d:\d\d:\d\d"  # glog's level, date and time
    r"|\[[EWIF] [\w.]{1,80}\.(?:cpp|cc|cu|h|py):\d{1,9}\]"  # glog without a date
    r"|[\w.-]{1,64}:\d{1,9}:\d{1,9} \[\d{1,6}\] NCCL [A-Z]{4,5} "  # NCCL's host:pid:tid
    r"|\[[\w.-]{1,64}:\d{1,9}\] "  # Open MPI's and glibc's [host:pid]
    r"|\[(?:\d{1,9},)?\d{1,9}\]<std(?:out|err|diag)>:"  # mpirun --tag-output
    r"|\(\w{1,64} pid=\d{1,18}[,)]"  # Ray's worker prefix
    r"|\[ {0,12}\d{1,12}\.\d{6}\] "  # the kernel's ring buffer
    r"|File \"[^\"]{1,500}\", line \d"
    r"|(?:[a-z_]\w{0,40}\.){0,8}[A-Za-z]\w{0,60}(?:Error|Exception|Exit|Interrupt): "
    r"|Exception raised from |frame #\d{1,9}: |Last error: "  # c10's exception, NCCL's cause
    r"|(?:WARNING|ERROR|INFO|DEBUG|CRITICAL):[\w.]{1,100}:"  # Python's logging
    r"|Thread 0x[0-9A-Fa-f]{1,16} |Process \d{1,18}: "  # py-spy's threads and process
    r"|(?:time|host|rank|exitcode|error_file|traceback) {1,20}: "  # torchelastic's report
    r"|(?:slurmstepd|srun|sbatch|salloc|mpirun|prterun|orted)(?:\[\d{1,18}\])?: "  # launchers
    r"|NET/\w{1,20} ?: ?[A-Z]"  # NCCL's transports, their prefix cut
    r")"
)
"""Where a record of a runtime a training job prints through begins; what follows at once is
still its own (a rank's label before a timestamp, an exception after them)."""
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
"""A record that is all of its line (the user's prompt may be right before it: ``^C``)."""
_PYSPY = re.compile(r"(?:^|\s)Thread (?:0x[0-9A-Fa-f]{1,16}|\d{1,18}) \(")
_PYSPY_FRAME_TEXT = r"[\w<>.$-]{1,200} \([^\s()]{1,500}:\d{1,9}\)"
_PYSPY_FRAME_START = re.compile(rf"(?<=\s){_PYSPY_FRAME_TEXT}(?!\S)")
"""Where a py-spy frame begins, looked for only after a thread of py-spy's: elsewhere
``name (path:line)`` is as likely a message's own words."""
_PYSPY_FRAME = re.compile(rf"{_PYSPY_FRAME_TEXT}$")
_PYTHON_FRAME = re.compile(r"(File \"[^\"]{1,500}\", line \d{1,9}, in \S{1,200}) ?(.*)")


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
    """``line`` with what a terminal, a web page, a chat or an editor put in for ASCII undone:
    a terminal's escapes (``lines.ESCAPE``), HTML's character references (``&lt;``,
    ``&#39;``), no-break and thin spaces, curly quotes, a Markdown source's ``\\_`` and
    ``\\*`` escapes. Every pattern of the parsers is written in ASCII; a paste from a
    rendered page missed them all."""
    if "\x1b" in line:
        line = ESCAPE.sub("", line)
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
    bare = [part for line in _unnumbered(lines) for part in _apart(plain(line.rstrip("\r\n")))]
    rows = [QUOTE.sub("", row) for row in _dedented(bare)]
    return _dedented(_joined(rows))


def _unnumbered(lines: Sequence[str]) -> Sequence[str]:
    """``lines`` without the line numbers a viewer, an editor or ``cat -n`` put before each
    when every line has one and they count up by one: a number before ``Segmentation
    fault`` hid it from every pattern anchored at a line's start."""
    found = []
    for line in lines:
        m = _GUTTER.match(line)
        if m is None and line.strip():  # a line without a number (a blank one may lack it)
            return lines
        found.append(m)
    numbers = [int(m.group(1)) for m in found if m]
    if len(numbers) < GUTTERED or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return lines
    return [line[m.end() :] if m else line for line, m in zip(lines, found, strict=True)]


def _apart(line: str) -> list[str]:
    """``line``, or the lines it ran together, cut where each record begins. A page that
    renders a log as a paragraph, or a chat, joins its lines with spaces; then one search of a
    line found one record's fact of each kind, and the rank labels and blocks a line opens
    were lost."""
    if len(line) < RUN_TOGETHER:
        return [line]
    found = list(_RECORD.finditer(line))
    starts = {
        b.start()
        for a, b in zip(found, found[1:], strict=False)
        if line[a.end() : b.start()].strip()
    }
    if starts:
        starts.add(found[0].start())
    for header in _TRACEBACK.finditer(line):
        starts.update((header.start(), header.end()))
    if thread := _PYSPY.search(line):
        starts.update(m.start() for m in _PYSPY_FRAME_START.finditer(line, thread.end()))
    cuts = [0, *sorted(s for s in starts if 0 < s < len(line)), len(line)]
    if len(cuts) == 2:
        return [line]
    pieces = (line[a:b].strip() for a, b in zip(cuts, cuts[1:], strict=False))
    return [row for piece in pieces if piece for row in _indented(piece)]


def _indented(piece: str) -> list[str]:
    """``piece`` as its runtime printed it: py-spy indents a frame by four spaces, and Python
    a traceback's frame by two and its line of code by four, on a line of its own; the
    parsers know a frame by that."""
    if _PYSPY_FRAME.match(piece):
        return ["    " + piece]
    if frame := _PYTHON_FRAME.match(piece):
        return ["  " + frame.group(1)] + (["    " + frame.group(2)] if frame.group(2) else [])
    return [piece]


def _width(lines: Sequence[str]) -> int | None:
    """The terminal's width when ``lines`` were cut at one: the longest length, shared by
    at least ``ROWS`` lines that end as a cut row may (``_edge``), or one of ``TERMINALS``."""
    widest = Counter(len(line) for line in lines if _edge(line) and line[-1:] not in FRAMES)
    if not widest:
        return None
    width = max(widest)
    longest = max(len(line) for line in lines)
    if width < NARROWEST or width != longest:
        return None
    return width if widest[width] >= ROWS or width in TERMINALS else None


def _edge(row: str) -> bool:
    """Whether ``row`` ends as a cut row may: in a character, or in one space after one (a
    cut between words); a row padded to the width ends in more."""
    return bool(row[-1:].strip() or (row[-1:] == " " and row[-2:-1].strip()))


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
    the next line's indented or bracketed start, are not in one). At a width terminals
    often have, a cut may also fall between words: the row then ends in one space or a
    colon, or the rest begins with one space, which a line indented by one (DDP's
    statistics) does too, so not at other widths."""
    end, start = row[-1:], after[:1]
    inside = end.isalnum() or (end != "" and end in "_,(=/[")
    sentence = end.islower() and start.isupper()  # a line ends, the next begins: "...ed" "Wed"
    goes_on = start.isalnum() or (start != "" and start in "_=(/,%.)]:")  # no line begins so
    goes_on = goes_on or (end in ("=", "(") and start.strip() != "")  # an argument's value
    if width in TERMINALS:
        inside = inside or end == ":" or (end == " " and _edge(row))
        goes_on = goes_on or (start == " " and after[1:2].strip() != "")
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
