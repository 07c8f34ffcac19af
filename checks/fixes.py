"""Shell fix lines, and the ``--emit-env`` snippet assembled from them.

A finding's ``fix`` is shell (``export``/``unset`` lines) when the environment
can fix it, or a ``#`` comment naming a config change when it cannot. A value
that came from an NCCL config file cannot be unset; but NCCL applies files
with ``setenv(..., 0)``, so an empty exported value shadows the file and NCCL
then treats the variable as unset. The snippet is what ``eval "$(nccl-doctor
preflight --emit-env)"`` runs.

Names and values come from the environment and from NCCL config files, which
another user may have written, and the snippet goes to ``eval``. So a line is
shell only when it is provably inert: a name that is a shell identifier and a
value without control characters, quoted by ``shlex.quote``; the assembled
snippet re-checks every shell line against that exact form (``_SAFE_LINE``)
and turns anything else into an escaped comment.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from doctor.checks.facts import Facts
from doctor.model import Finding, Severity
from doctor.trust.escape import escape_control, has_control

SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUOTED = r"""(?:[A-Za-z0-9_@%+=:,./-]+|'[^'\n]*'(?:"'"'[^'\n]*')*)"""
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_SAFE_LINE = re.compile(
    rf"unset {_NAME}(?: {_NAME})*|export {_NAME}=(?:{_QUOTED})?(?:  # [^\n]*)?", re.ASCII
)
"""The only shell ``--emit-env`` prints: what ``export``/``unset`` below produce."""


def export(name: str, value: str) -> str:
    if not SHELL_NAME.fullmatch(name):
        return _not_a_name(name)
    if has_control(value):
        return comment(f"not exporting {name}: its value holds control characters")
    return f"export {name}={shlex.quote(value)}"


def unset(facts: Facts, *names: str) -> str:
    """``unset`` for environment values; an empty ``export`` for values from NCCL config files."""
    lines = [_not_a_name(n) for n in names if not SHELL_NAME.fullmatch(n)]
    names = tuple(n for n in names if SHELL_NAME.fullmatch(n))
    plain = [n for n in names if not facts.from_file(n)]
    if plain:
        lines.append("unset " + " ".join(plain))
    for name in names:
        if facts.from_file(name):
            lines.append(f"export {name}=  # shadows {escape_control(facts.source(name))}")
    return "\n".join(lines)


def _not_a_name(name: str) -> str:
    return comment(f"{name!r} is not a shell variable name: remove it where it is set")


def comment(text: str) -> str:
    """A shell comment that stays one inert line, whatever ``text`` holds."""
    return f"# {escape_control(text)}"


def config_change(text: str) -> str:
    """A fix the environment cannot make, as a shell comment."""
    return comment(text)


def _variable(line: str) -> str:
    words = line.split("#", 1)[0].split()
    if words[0] == "export":
        return words[1].split("=", 1)[0]
    return " ".join(words[1:])


def emit_env(findings: Iterable[Finding]) -> tuple[str, list[Finding]]:
    """The snippet that makes the environment pass, and the failures it cannot fix.

    One line per variable: where two findings fix the same variable, the first
    ``export`` wins over any ``unset`` (setting ``NCCL_NET_PLUGIN=none`` both
    stops an IB leak and satisfies the restart wrapper).
    """
    chosen: dict[str, str] = {}
    comments: list[str] = []
    unfixed: list[Finding] = []
    for finding in findings:
        if finding.severity not in (Severity.FAIL, Severity.WARN):
            continue
        lines = [ln for ln in finding.fix.split("\n") if ln.strip()]
        shell = [ln for ln in lines if _SAFE_LINE.fullmatch(ln)]
        if not shell:
            comments.extend(
                f"{comment(ln.removeprefix('# '))}  [{finding.check}]"
                for ln in lines or [f"no automatic fix for {finding.subject}"]
            )
            if finding.severity is Severity.FAIL:
                unfixed.append(finding)
            continue
        comments.extend(
            f"{comment(ln)}  [{finding.check}]"
            for ln in lines
            if ln not in shell and not ln.startswith("#")
        )
        for line in shell:
            for name in _split_unset(line):
                key = _variable(name)
                if key not in chosen or (
                    name.startswith("export") and not chosen[key].startswith("export")
                ):
                    chosen[key] = name
    body = list(chosen.values())
    return "\n".join(body + sorted(set(comments), key=comments.index)), unfixed


def _split_unset(line: str) -> list[str]:
    """``unset A B`` -> ``[unset A, unset B]`` so each variable is decided once."""
    if line.startswith("unset "):
        return [f"unset {name}" for name in line.split()[1:]]
    return [line]
