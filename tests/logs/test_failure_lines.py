"""What each runtime a training job prints through says when a rank dies, a GPU or a link
fails, the set-up fails, ranks disagree or a backend refuses: read as that failure, alone
and as pasted. ``failure_lines.txt`` holds one record per line (``class<TAB>text``, ``\\n``
between the lines of a record), written from what torch, NCCL, RCCL, aws-ofi-nccl, glibc, Open
MPI and PRRTE, MPICH, UCX and UCC, libfabric, NVSHMEM, SLURM, pdsh, the kernel, the NVIDIA
driver, DCGM, ROCr, Ray, vLLM, DeepSpeed, Horovod, XLA and JAX print; no corpus case was read
for it. A message whose class depends on what else the logs say (a store's
``Socket Timeout``, a lone traceback) is not in it."""

from __future__ import annotations

from pathlib import Path

import pytest
from rules_alone import PASTED, rules

from doctor.logs.paste import unwrapped
from doctor.model import HangClass

RECORDS = [
    (HangClass(cls), text.split("\\n"))
    for cls, text in (
        line.split("\t", 1)
        for line in (Path(__file__).parent / "failure_lines.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
]


@pytest.mark.parametrize(("hang_class", "lines"), RECORDS, ids=range(len(RECORDS)))
def test_a_failure_is_read_as_what_it_is_however_pasted(
    hang_class: HangClass, lines: list[str]
) -> None:
    for prefix in PASTED:
        # GIVEN a runtime's failure record, as printed or as pasted
        verdict = rules([prefix + line for line in lines])
        # THEN the rules read it as its class
        assert verdict.hang_class is hang_class, (prefix, verdict.summary)


GUTTERS = ("{:6d}\t{}", "{:4d} | {}", "{}|{}")
"""``cat -n``'s line numbers, a viewer's, a terse viewer's."""


@pytest.mark.parametrize(("hang_class", "lines"), RECORDS, ids=range(len(RECORDS)))
def test_a_failure_is_read_under_a_gutter_of_line_numbers(
    hang_class: HangClass, lines: list[str]
) -> None:
    pasted = ["starting training", "loading checkpoint shards", *lines]
    for gutter in GUTTERS:
        # GIVEN a runtime's failure record after two lines, each numbered as a viewer does
        numbered = [gutter.format(n, line) for n, line in enumerate(pasted, 41)]
        # WHEN read as a pasted file is THEN the rules read it as its class
        verdict = rules(unwrapped(numbered))
        assert verdict.hang_class is hang_class, (gutter, verdict.summary)


def test_numbers_that_do_not_count_up_by_one_are_the_log_s_own() -> None:
    # GIVEN srun's rank labels, two numbered lines, numbers that skip THEN they stay
    for lines in (["0: a", "1: b", "2: c"], ["1\tx", "2\ty"], ["1 | a", "3 | b", "4 | c"]):
        assert unwrapped(lines) == lines
    # AND a gutter's numbered blank line stays blank, and so does the file's last line:
    # every line keeps its place (a verdict's evidence names its line)
    assert unwrapped(["  7 | a", "  8 |", "  9 | b", ""]) == ["a", "", "b", ""]


def test_the_catalogue_holds_every_class_a_log_can_tell() -> None:
    assert {cls for cls, _ in RECORDS} >= {
        HangClass.RANK_LOSS,
        HangClass.GPU_HANG,
        HangClass.NETWORK,
        HangClass.BOOTSTRAP,
        HangClass.COLLECTIVE_MISMATCH,
        HangClass.UNSUPPORTED_OP,
        HangClass.COMPILE_WARMUP,
    }
