"""The log rules' verdict on a few lines, as a user pastes them: for the line catalogues
(``tests/logs/harmless_lines.txt``, ``tests/logs/failure_lines.txt``)."""

from __future__ import annotations

from doctor.evidence import Evidence
from doctor.logs.parse import parse_text
from doctor.model import Verdict
from doctor.verdict.classify import classify

PASTED = ("", "> ", "    ", "[rank3]: ", "2024-05-01T10:00:00.123456789Z stderr F ")
"""As printed, quoted in a reply, indented in a list, under torchrun's label, under the
container runtime's prefix."""


def rules(lines: list[str]) -> Verdict:
    """The rules' verdict on ``lines`` (the word model, which reads every word, given none)."""
    return rules_on([("job.log", lines)])


def rules_on(files: list[tuple[str, list[str]]]) -> Verdict:
    """The rules' verdict on several files, each ``(name, lines)``."""
    events = [e for name, lines in files for e in parse_text(lines, name).events]
    names = tuple(name for name, _ in files)
    return classify(Evidence(job="j", ranks_expected=None, logs=tuple(events), log_files=names))
