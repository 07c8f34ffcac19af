# ruff: noqa: E501 - the log lines are kept whole, as NCCL prints them
"""The message catalogue read from NCCL's and torchelastic's sources (``doctor/data/
messages.json``): a failure message no specific rule reads is judged by the class of the
place in the source that prints it, with low confidence, and never beats a specific rule."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.evidence import Evidence
from doctor.logs.catalogue import _CUT_MIN, _cut_inside, catalogue
from doctor.logs.parse import parse_text
from doctor.model import Confidence, HangClass
from doctor.verdict.classify import classify

# NCCL 2.30.7, src/transport/net_ib/common.cc: WARN("NET/IB : %s:%d async fatal event on CQ (%p) handle=%u cqe=%d: %s", ...)
IB_CQ_FATAL = "node7:2231:2290 [3] NCCL WARN NET/IB : mlx5_2:1 async fatal event on CQ (0x7f3a2c00b0) handle=3 cqe=4096: CQ error"
# NCCL 2.30.7, src/graph/topo.cc: WARN("ncclTopoGetDevNodes : too many DEV nodes for busId %lx (max %d)", ...)
TOPO = "node7:2231:2231 [0] NCCL WARN ncclTopoGetDevNodes : too many DEV nodes for busId 1b000 (max 32)"


def _verdict(lines: list[str]):
    events = parse_text(lines, "job.log").events
    return classify(
        Evidence(job="t", ranks_expected=None, logs=tuple(events), log_files=("job.log",))
    )


def test_an_ib_fatal_event_from_nccls_transport_source_is_the_network() -> None:
    # GIVEN NCCL's IB transport reporting a fatal CQ event, a message no specific rule reads
    # (the old code called these logs `unknown`) WHEN the logs are judged
    verdict = _verdict([IB_CQ_FATAL])
    # THEN the class is that of the source file printing it, with low confidence, and the
    # verdict names the place in the source
    assert verdict.hang_class is HangClass.NETWORK
    assert verdict.confidence is Confidence.LOW
    assert "src/transport/net_ib/common.cc" in verdict.summary


def test_a_topology_failure_from_nccls_set_up_source_is_bootstrap() -> None:
    assert _verdict([TOPO]).hang_class is HangClass.BOOTSTRAP


def test_a_pasted_message_is_read_through_quote_marks_timestamps_spaces_and_a_wrap() -> None:
    # GIVEN the message quoted in a reply, behind a log shipper's timestamp, with its
    # spaces doubled and the line cut where a terminal wrapped it
    pasted = "> 2024-05-01T10:00:00Z NET/IB :  mlx5_2:1 async fatal event on CQ (0x7f3a2c00b0) handle=3 cqe=40"
    # WHEN it is read THEN it is still NCCL's IB message
    events = parse_text([pasted], "paste.txt").events
    assert [(e.kind, e.hint_class) for e in events] == [("catalogued", "network")]


def test_a_specific_rule_beats_the_catalogue() -> None:
    # GIVEN a rank killed by SIGKILL (torchelastic's failure line) and a catalogued IB message
    lines = [
        IB_CQ_FATAL,
        "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 2231) of binary: /usr/bin/python",
    ]
    # WHEN judged THEN the specific rule's lost rank wins over the catalogue's network
    assert _verdict(lines).hang_class is HangClass.RANK_LOSS


# NCCL 2.7.8, src/init.cc (NCCL_CHECK_MISMATCH): WARN("Mismatched collective detected, please check your collective calls at and around rank %d. ...", ...)
OLD_MISMATCH = "gpu3:5521:5601 [1] NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 6. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs"
# NCCL 2.4.8, src/misc/ibvwrap.cc: WARN("Failed to open libibverbs.so[.1]") on a host without InfiniBand
OLD_NO_IBVERBS = "gpu3:5521:5521 [0] NCCL WARN Failed to open libibverbs.so[.1]"
# NCCL 2.4.8, src/transport/net_ib.cc: WARN("NET/IB : Unable to query port %d", ...)
OLD_IB_QUERY = "gpu3:5521:5540 [0] NCCL WARN NET/IB : Unable to query port 1"


def test_messages_of_older_nccl_releases_are_known_with_their_class() -> None:
    # GIVEN messages only NCCL releases before 2.30 print (users paste the NCCL their
    # container shipped) WHEN judged THEN each has the class of the place that printed it:
    # NCCL's own mismatch check names the rank around which ranks disagree
    mismatch = _verdict([OLD_MISMATCH])
    assert mismatch.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert "src/init.cc" in mismatch.summary
    assert _verdict([OLD_IB_QUERY]).hang_class is HangClass.NETWORK


def test_an_optional_library_nccl_goes_on_without_is_no_failure() -> None:
    # GIVEN the warning old NCCL printed at the start of every socket-only job
    # THEN the catalogue does not know it as a failure (NCCL falls back to sockets)
    assert catalogue().match(OLD_NO_IBVERBS) is None


def test_ordinary_training_lines_and_infos_match_nothing() -> None:
    found = catalogue()
    for text in (
        "step 100 | loss 2.7 | lr 3e-4",
        "node7:2231:2231 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>",
        "node7:2231:2231 [0] NCCL INFO Channel 00/02 :    0   1   2   3",
        "Epoch 3: validation error 0.12",
    ):
        assert found.match(text) is None, text


def test_the_catalogue_records_what_it_was_read_from() -> None:
    # GIVEN the shipped data file THEN it says which NCCL commit and versions it was read from
    doc = json.loads(
        resources.files("doctor").joinpath("data").joinpath("messages.json").read_text()
    )
    assert len(doc["nccl"]["commit"]) == 40 and doc["nccl"]["version"].startswith("2.")
    assert doc["torch"]["version"]
    assert len(doc["messages"]) > 300
    assert {m["class"] for m in doc["messages"]} == {
        "bootstrap",
        "network",
        "rank_loss",
        "collective_mismatch",
        "unsupported_op",
        "cpu_stuck",  # only from the frameworks' listed places (a data loader's timeout)
        "gpu_hang",  # ... and their health checks
    }
    assert "2.4.8" in doc["nccl"]["older"]  # releases back to 2019: users paste old logs
    frameworks = doc["frameworks"]["commits"]
    assert {"Lightning-AI/pytorch-lightning", "deepspeedai/DeepSpeed"} <= frameworks.keys()
    assert all(len(commit) == 40 for commit in frameworks.values())
    sources = {"nccl", "rccl", "aws-ofi-nccl", "torch", *frameworks}
    assert all(m["source"] in sources and ":" in m["at"] for m in doc["messages"])
    assert all(len(doc[name]["commit"]) == 40 for name in ("rccl", "aws-ofi-nccl"))
    assert {m["source"] for m in doc["messages"]} == sources


# aws-ofi-nccl, src/nccl_ofi_rdma.cpp: NCCL_OFI_WARN("Unexpected status (%d) for message %hu", ...)
OFI_WRITE = "p4d-st-1:4321:4390 [3] NCCL WARN NET/OFI Unexpected status (3) for message 117"
# NCCL 2.30.7, src/transport/net_ib/p2p_resiliency.cc: two spaces inside no message, one in a paste
IB_FATAL = "node7:2231:2290 [3] NCCL WARN NET/IB: The error is fatal (No functional devices left).  Cannot continue."
# NCCL 2.30.7, src/misc/argcheck.cc: WARN("%s : invalid type %d", ...): bfloat16 on NCCL < 2.10
BAD_TYPE = "node7:2231:2231 [0] NCCL WARN AllReduce : invalid type 9"
# Lightning, src/lightning/fabric/plugins/environments/slurm.py: its check of SLURM's counts
LIGHTNING = "ValueError: You set `devices=8` in Lightning, but the number of tasks per node configured in SLURM `--ntasks-per-node=4` does not match. HINT: Set `devices=4`."
# torch, torch/distributed/algorithms/join.py: a rank whose inputs ran out under Join
EXHAUSTED = "RuntimeError: Rank 3 exhausted all inputs."
# nvidia-resiliency-ext, shared_utils/health_check.py: NVML lost the GPU
GPU_LOST = "NVML Error checking GPU 3: GPU is lost"


@pytest.mark.parametrize(
    ("line", "hang_class", "said"),
    [
        (OFI_WRITE, HangClass.NETWORK, "NCCL's OFI network plugin printed"),
        (IB_FATAL, HangClass.NETWORK, "NCCL printed"),  # its words spaced as a paste spaces them
        (BAD_TYPE, HangClass.UNSUPPORTED_OP, "NCCL printed"),
        (LIGHTNING, HangClass.BOOTSTRAP, "Lightning-AI/pytorch-lightning printed"),
        (EXHAUSTED, HangClass.COLLECTIVE_MISMATCH, "PyTorch printed"),
        (GPU_LOST, HangClass.GPU_HANG, "NVIDIA/nvidia-resiliency-ext printed"),
    ],
)
def test_a_catalogued_message_is_its_place_s_class_said_by_who_prints_it(
    line: str, hang_class: HangClass, said: str
) -> None:
    # GIVEN a message of NCCL, its network plugin or a Python framework alone in a log, no
    # rule of its own reading it (a transfer, a refused type, a launcher's counts, a rank out
    # of data, a health check) WHEN it is judged
    verdict = _verdict([line])
    # THEN it is the class of the place that prints it, the printer named
    assert verdict.hang_class is hang_class
    assert verdict.summary.startswith(said), verdict.summary


def test_a_framework_s_set_up_and_health_messages_say_what_to_do() -> None:
    # GIVEN Lightning's check of SLURM's counts and a health check that lost a GPU
    slurm, lost = _verdict([LIGHTNING]), _verdict([GPU_LOST])
    # THEN the set-up failure points at what the message names and where it is raised, the
    # GPU's at draining the node
    assert "slurm.py" in slurm.summary and "the message names" in slurm.summary
    assert "drain the node" in lost.summary


def test_a_catalogued_message_at_info_is_nccl_coping() -> None:
    # GIVEN NCCL's proxy saying at INFO what it also says as a WARN elsewhere
    line = "node7:2231:2290 [0] NCCL INFO [Service thread] Accept failed Resource temporarily unavailable"
    # THEN the catalogue does not read it: NCCL printed it and went on
    assert parse_text([line], "job.log").events == []


@settings(max_examples=400, deadline=None)
@given(
    fragment=st.text(alphabet="ab :", max_size=12),
    text=st.text(alphabet="ab :", max_size=30),
)
def test_a_line_cut_inside_a_fragment_is_found_as_trying_every_cut_would(
    fragment: str, text: str
) -> None:
    # GIVEN any fragment and line over a small alphabet (repeats make overlapping starts)
    # THEN the search of the line's tail says what trying every cut of the fragment says
    tail = text.rstrip()
    every_cut = any(tail.endswith(fragment[:k]) for k in range(len(fragment) - 1, _CUT_MIN - 1, -1))
    assert _cut_inside(fragment, text) is every_cut
