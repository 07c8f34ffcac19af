"""Text an attacker puts where nccl-doctor will print it, and the check that it stayed inert.

``HOSTILE`` carries an OSC 52 clipboard write, a clear-screen, a bare carriage
return, a newline that starts a forged verdict line, a right-to-left override and
rich markup (a closing tag that would end a render in ``MarkupError``, and an OSC 8
hyperlink rich itself would write). Each renderer's test puts it into every field
that can carry untrusted text and hands the output to ``assert_inert``.
"""

from __future__ import annotations

import pickle
import re
from dataclasses import replace
from pathlib import Path

from doctor.analyze.load import load_evidence
from doctor.evidence import Evidence, HostReach, RankProcess, RankStack, ThreadStack
from doctor.model import CollectiveRef, EvidenceLine, Frame, Skipped
from doctor.verdict.classify import Analysis, analyse

OSC52 = "\x1b]52;c;cHduZWQ=\x07"
FORGED = "FORGED-VERDICT:healthy"
HOSTILE = f"x{OSC52}\x1b[2J\r\n{FORGED}[/x][link=http://evil.example]L[/link]\u202e"
"""No spaces: a wide console never wraps inside it, so a line that starts with ``FORGED``
can only come from a raw newline."""

_SGR = re.compile(r"\x1b\[[0-9;]*m")
"""rich's own styles (colours, bold): the only escape sequences a renderer may write."""
RAW_CONTROL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_BORDERS = " │┃|║╎▌▐▶"


def assert_inert(output: str, shown_at_least: int = 1) -> None:
    """Nothing of ``HOSTILE`` reached ``output`` raw, and it was shown (escaped) at least
    ``shown_at_least`` times, so the test cannot pass by leaving the fields out."""
    plain = _SGR.sub("", output)
    raw = sorted({repr(c) for c in RAW_CONTROL.findall(plain)})
    assert not raw, f"raw control characters reached the output: {raw}"
    assert "\x1b]8;" not in output, "a hyperlink from the input was written"
    forged = [line for line in plain.splitlines() if line.lstrip(_BORDERS).startswith(FORGED)]
    assert not forged, f"a newline in the input forged a line: {forged[0]!r}"
    shown = plain.count("\\x1b]52;c;cHduZWQ=\\x07")
    assert shown >= shown_at_least, f"the hostile text was shown {shown} times"


WRONG_COLLECTIVE = Path(__file__).resolve().parent / "fixtures" / "fr" / "gloo-wrong-collective"


def hostile_dumps(folder: Path) -> Path:
    """The wrong-collective dumps with every text field of every entry hostile."""
    folder.mkdir()
    for dump in sorted(WRONG_COLLECTIVE.iterdir()):
        doc = pickle.loads(dump.read_bytes())
        for entry in doc["entries"]:
            entry["process_group"] = (HOSTILE, HOSTILE)
            entry["profiling_name"] = f"{entry['profiling_name']}{HOSTILE}"
            entry["frames"] = [
                {**frame, "name": frame["name"] + HOSTILE, "filename": HOSTILE}
                for frame in entry["frames"]
            ]
        (folder / dump.name).write_bytes(pickle.dumps(doc))
    return folder


def hostile_evidence(tmp_path: Path) -> tuple[Evidence, Analysis]:
    """Hostile dumps, plus processes, live stacks (rank 2's the odd one out), hosts and
    skips whose text is hostile too, judged; then every text field of the verdict made
    hostile."""
    evidence = load_evidence([hostile_dumps(tmp_path / "fr")])
    frame = Frame(HOSTILE, HOSTILE, 7)

    def stack(rank: int, depth: int) -> RankStack:
        frames = (frame,) * depth + (Frame("main", "train.py", 1),)
        return RankStack(rank, (ThreadStack(1, HOSTILE, frames, is_main=True),), HOSTILE)

    evidence = replace(
        evidence,
        job=HOSTILE,
        stacks=(stack(0, 1), stack(1, 1), stack(2, 2)),
        processes=tuple(
            RankProcess(r, 10 + r, HOSTILE, r != 3, error=HOSTILE, status=HOSTILE) for r in range(4)
        ),
        hosts=(HostReach(HOSTILE, False, HOSTILE, (0, 1)), HostReach("h2", True, "", (2,))),
        skipped=(Skipped(3, HOSTILE, HOSTILE),),
        unreadable_dumps=(Skipped(None, "flight-recorder", HOSTILE),),
    )
    analysis = analyse(evidence)
    verdict = replace(
        analysis.verdict,
        summary=HOSTILE,
        missing_evidence=(HOSTILE,),
        collective=CollectiveRef(HOSTILE, 7, HOSTILE),
        evidence=(*analysis.verdict.evidence, EvidenceLine(HOSTILE, 2, HOSTILE)),
    )
    return evidence, replace(analysis, verdict=verdict)
