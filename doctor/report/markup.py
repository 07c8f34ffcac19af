"""The one door through which text from the job enters the HTML report (page and SVG)."""

from __future__ import annotations

import html

from doctor.trust.escape import escape_control


def text(value: object, keep: str = "") -> str:
    """Untrusted text for HTML: control characters shown as escapes (``doctor.trust.escape``),
    then ``<``, ``>``, ``&`` and quotes escaped, so it is text in an element or an
    attribute, never markup; characters in ``keep`` (our own line breaks) stay."""
    return html.escape(escape_control(str(value), keep), quote=True)
