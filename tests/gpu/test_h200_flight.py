"""The Flight Recorder reader on dumps of a real ProcessGroupNCCL (tests/fixtures/gpu/h200; the
same job on an H100 in tests/fixtures/gpu/h100 reads the same).

One rank on an H200 (torch 2.11.0+cu130, NCCL 2.28.9) ran six collectives, then queued
an all_reduce behind a kernel that spun for ~100 s; the watchdog timed it out after 60 s
and dumped the trace (fr/, TORCH_NCCL_DUMP_ON_TIMEOUT). Before that the rank dumped it
itself (self/: ``_dump_nccl_trace`` as a pickle and ``_dump_nccl_trace_json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import run_cli

from doctor.flight.reader import read_flight

H200 = Path(__file__).parent.parent / "fixtures" / "gpu" / "h200"
WARM_UP = ["all_reduce"] * 3 + ["broadcast", "_all_gather_base", "all_reduce_barrier"]


@pytest.mark.parametrize("card", ["h200", "h100"])
@pytest.mark.parametrize(
    "dump",
    [
        "fr/nccl_trace_rank_0",
        "self/self_dump_nccl_trace_rank_0.pkl",
        # torch's JSON form writes pg_status's counters as text ("6"); before, it was
        # skipped: "malformed entries (a number field holds str, not an integer)"
        "self/self_dump_nccl_trace_json_rank_0.json",
    ],
)
def test_a_real_nccl_dump_reads_whole(dump: str, card: str) -> None:
    read = read_flight([H200.parent / card / dump])
    assert read.skipped == ()
    (d,) = read.dumps
    assert (d.rank, d.version, d.backend) == (0, "2.10", "nccl")
    assert d.config == {"0": ("default_pg", (0,))}
    (group,) = d.groups.values()
    assert (group.desc, group.enqueued, group.completed) == ("default_pg", 7, 6)
    assert [(o.seq, o.name, o.state) for o in group.ops] == [
        *((seq, name, "completed") for seq, name in enumerate(WARM_UP, start=1)),
        (7, "all_reduce", "scheduled"),
    ]
    hung = group.ops[-1]
    assert (hung.in_sizes, hung.dtypes) == (((1048576,),), ("Float",))
    if dump.endswith(".json"):  # the JSON form keeps no call stacks
        assert hung.frames == ()
    else:
        assert [f.name for f in hung.frames][:1] == ["all_reduce"]
        assert any(f.filename.endswith("job.py") for f in hung.frames)


def test_an_empty_generic_dump_is_read_as_empty() -> None:
    """torch 2.11's ``_dump_fr_trace`` (not the NCCL one) gave 118 bytes: no group, no entry."""
    (d,) = read_flight([H200 / "self" / "self_dump_fr_trace_rank_0.pkl"]).dumps
    assert (d.rank, d.groups) == (0, {})


def test_analyze_blames_the_lone_ranks_gpu_not_the_network() -> None:
    """Before: 'network' (every rank scheduled seq 7, none completed: the transport) with no
    op name, for a group of one rank whose all_reduce never touched a network."""
    done = run_cli("analyze", str(H200 / "fr"), "--json")
    assert done.returncode == 1, done.stderr
    verdict = json.loads(done.stdout)["verdict"]
    assert (verdict["hang_class"], verdict["culprit_ranks"]) == ("gpu_hang", [0])
    assert verdict["collective"] == {"process_group": "0", "seq": 7, "op": "all_reduce"}
    assert "alone in pg 0" in verdict["summary"]


def test_the_dump_and_the_watchdog_log_agree() -> None:
    done = run_cli("analyze", str(H200 / "fr"), str(H200 / "hang.log"), "--json")
    verdict = json.loads(done.stdout)["verdict"]
    assert (verdict["hang_class"], verdict["culprit_ranks"]) == ("gpu_hang", [0])
    assert (verdict["collective"]["seq"], verdict["collective"]["op"]) == (7, "all_reduce")
