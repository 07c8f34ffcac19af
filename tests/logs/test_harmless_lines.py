"""Lines that healthy training jobs print by the thousand (warnings, NCCL's INFO, progress,
set-up chatter, shutdown noise) must not move the rules' verdict: a rule that reads one as a
failure misjudges every log that holds it. ``harmless_lines.txt`` holds one per line, written
from what torch, NCCL and its network plugins, vLLM, SGLang, Megatron, DeepSpeed, transformers,
Lightning, accelerate, Ray, Triton, TransformerEngine, JAX, Open MPI, PRRTE, UCX, libfabric, DCGM,
SLURM and the kernel print; no corpus case was read for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus import Case, cases
from rules_alone import PASTED, rules_on
from rules_alone import rules as _rules

from doctor.logs import kinds
from doctor.logs.parse import parse_text
from doctor.logs.training import FINISHED, reports_progress
from doctor.model import Confidence, HangClass

HARMLESS = [
    line
    for line in (Path(__file__).parent / "harmless_lines.txt").read_text().splitlines()
    if line.strip()
]
FAILURES = {
    "a timeout": [
        "[rank1]:[E1129 11:56:57.205862232 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=289, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600024 milliseconds before timing out."
    ],
    "a killed rank": [
        "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 2 "
        "(pid: 4242) of binary: /usr/bin/python",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-05-01_10:00:00",
        "  host      : node01",
        "  rank      : 2 (local_rank: 2)",
        "  exitcode  : -9 (pid: 4242)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 4242",
    ],
    "a transport error": [
        "node02:5678:5690 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from "
        "peer 10.0.0.1<43210> with error 12, opcode 0, len 0, vendor err 129 (Recv) localGid "
        "::ffff:10.0.0.2 remoteGid ::ffff:10.0.0.1",
    ],
}


FAILURE_CLASSES = [_rules(lines).hang_class for lines in FAILURES.values()]
"""Each failure's verdict alone (what a harmless line beside it must leave)."""


def test_the_failures_are_read_as_what_they_are() -> None:
    assert FAILURE_CLASSES == [
        HangClass.UNKNOWN,  # one rank's timeout alone: its cause is elsewhere
        HangClass.RANK_LOSS,
        HangClass.NETWORK,
    ]


@pytest.mark.parametrize("line", HARMLESS, ids=range(len(HARMLESS)))
def test_a_harmless_line_moves_no_verdict(line: str) -> None:
    for pasted in (prefix + line for prefix in PASTED):
        # GIVEN a line healthy jobs print, alone THEN no rule is sure of a failure in it
        alone = _rules([pasted])
        assert alone.hang_class in (HangClass.UNKNOWN, HangClass.HEALTHY) or (
            alone.confidence is Confidence.LOW
        ), alone.summary
        # AND beside each failure, the verdict is the failure's
        for failure, found in zip(FAILURES.values(), FAILURE_CLASSES, strict=True):
            assert _rules([pasted, *failure]).hang_class is found, pasted


def _benign(line: str) -> bool:
    """A line that alone says nothing failed (no event, or only set-up's or the job's
    progress), and that opens no record of several lines (``Exception ignored in:`` claims
    the traceback printed after it, whatever it is)."""
    events = parse_text([line], "job.log").events
    return all(e.kind in kinds.BENIGN for e in events) and "Exception ignored in" not in line


FIRST_LINES = [
    line
    for line in HARMLESS
    if _benign(line) and not FINISHED.search(line) and not reports_progress(line)
]
"""The harmless lines to put first (read once, not once a case): not those saying training
finished or a step ran, which a job prints once it trains (after them a failure is one of
a job that had run collectives)."""


SHARES = 4
"""Each case gets every fourth harmless line, case after case a different quarter, so every
line comes first in 10 of the 41 cases: every line before every case was 48,000 readings of
whole logs, 41 s of the suite."""


IN_SAMPLE = cases()


@pytest.mark.parametrize(
    ("share", "case"),
    [(i % SHARES, c) for i, c in enumerate(IN_SAMPLE)],
    ids=[c.name for c in IN_SAMPLE],
)
def test_a_harmless_line_put_first_keeps_each_in_sample_case_s_finding(
    share: int, case: Case
) -> None:
    # GIVEN an in-sample case the rules read as a finding
    files = [(f.name, f.read_text(errors="replace").splitlines()) for f in case.files]
    found = rules_on(files).hang_class
    if found is HangClass.UNKNOWN:
        return
    (name, lines), rest = files[0], files[1:]
    # WHEN a line healthy jobs print comes first (set-up chatter always does)
    moved = [
        line
        for line in FIRST_LINES[share::SHARES]
        if rules_on([(name, [line, *lines]), *rest]).hang_class is not found
    ]
    # THEN the finding stands
    assert moved == []
