"""The one door through which untrusted text enters a rich renderable.

rich strips a few control characters (BEL, backspace, CR, form feed) but passes
``ESC``: an OSC 52 clipboard write or a clear-screen in a frame name reaches the
terminal. A ``str`` handed to ``Table.add_row``, a ``Panel`` title or
``Console.print`` is also read as *markup*: ``[/x]`` in a process group name ends
the render in a ``MarkupError`` traceback, and ``[link=...]`` makes rich itself
write an OSC 8 hyperlink of the sender's choosing. ``safe_text`` returns a
``Text`` (never parsed as markup) with every control character shown as an escape
(``doctor.trust.escape``). Renderers build each cell, title and line that carries text
from a dump, a log, a process, a host or a file name with it; JSON output stays
raw (``json.dumps`` escapes control characters itself).
"""

from __future__ import annotations

from rich.style import StyleType
from rich.text import Text

from doctor.trust.escape import escape_control


def safe_text(value: str, style: StyleType = "", keep: str = "") -> Text:
    """``value`` as a ``Text``: control characters escaped (but those in ``keep``, for
    text whose line breaks were put there by us), no markup read."""
    return Text(escape_control(value, keep), style=style)
