"""torch.distributed's messages -> events: watchdog, work progress, desync report,
fingerprint checks, fr_trace, store failures."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.evidence import Evidence
from doctor.logs import kinds, parse_lines
from doctor.model import HangClass
from doctor.verdict.classify import classify

TRIAGE_LOGS = Path(__file__).parents[1] / "triage" / "data" / "logs"
REAL = Path(__file__).parents[1] / "fixtures" / "real"


def of(kind: str, events):
    return [e for e in events if e.kind == kind]


def test_watchdog_lines_give_each_rank_its_collective_and_progress() -> None:
    # GIVEN two ranks' recorded ProcessGroupNCCL watchdog lines
    events = parse_lines((TRIAGE_LOGS / "watchdog_nccl.log").read_text().splitlines())
    # THEN each rank's timed-out collective has its seq, op, size and group
    caught = [e for e in of(kinds.WATCHDOG_TIMEOUT, events) if e.op]
    assert {(e.rank, e.seq, e.op, e.numel) for e in caught} == {
        (1, 12, "ALLREDUCE", 1024),
        (3, 12, "ALLREDUCE", 1024),
    }
    # AND the desync-debug line says what each rank issued and finished
    progress = of(kinds.WORK_PROGRESS, events)
    assert {(e.rank, e.seq, e.completed, e.process_group) for e in progress} == {
        (1, 13, 11, "0"),
        (3, 13, 11, "0"),
    }


def test_desync_report_names_the_lagging_ranks() -> None:
    # GIVEN TORCH_NCCL_DESYNC_DEBUG's report, in the words of torch's TraceUtils.h
    report = [
        "[rank0]:[E ProcessGroupNCCL.cpp:1270] [Rank 0] Timeout at collective: ALLREDUCE, #42",
        "[rank0]:\t - To our best knowledge, the lagging/dead/mismatched ranks that caused "
        "the desync are:",
        "[rank0]:\t     [3] finished collective #41, but didn't join collective #42 (count from 1)",
        "[rank0]:\t - Snapshot of ranks' latest states:",
        "[rank0]:\t   #42 started ranks:",
        "[rank0]:\t     [0, 1, 2] started ALLREDUCE",
        "[rank5]:\t - To our best knowledge, ranks [6, 7] are the lagging ranks that caused this "
        "timeout. They never joined any collectives",
    ]
    events = parse_lines(report)
    # THEN the laggards are events of their own rank, not of the reporter
    assert {(e.rank, e.seq) for e in of(kinds.DESYNC, events)} == {(3, 42), (6, None), (7, None)}
    # AND the snapshot says who ran what at #42
    assert {(e.rank, e.op, e.seq) for e in of(kinds.COLLECTIVE_AT, events)} == {
        (0, "ALLREDUCE", 42),
        (1, "ALLREDUCE", 42),
        (2, "ALLREDUCE", 42),
    }


def test_fingerprint_mismatch_names_both_ranks_and_their_ops() -> None:
    # GIVEN TORCH_DISTRIBUTED_DEBUG=DETAIL's mismatch line from a real thread
    text = (REAL / "speechbrain-2401-ckpt-broadcast-main-only" / "output.log").read_text()
    events = parse_lines(text.splitlines())
    at = {(e.rank, e.seq, e.op, e.numel) for e in of(kinds.COLLECTIVE_AT, events) if e.seq}
    assert at == {(1, 485, "ALLREDUCE", 25), (0, 485, "BROADCAST", 1)}
    # AND the frames of rank 0's traceback say which collective it was in
    assert {e.op for e in of(kinds.COLLECTIVE_AT, events) if e.seq is None} == {"broadcast"}
    assert of(kinds.MISMATCH_DETECTED, events)
    # AND torchelastic's own failure line becomes an exit with its pid and code
    assert [(e.pid, e.code) for e in of(kinds.EXIT, events)] == [(170581, 1)]


def test_fr_trace_output_and_monitored_barrier_name_missing_ranks() -> None:
    text = (REAL / "pytorch-doc-flight-recorder-extra-allreduce" / "frtrace.txt").read_text()
    assert [e.rank for e in of(kinds.DESYNC, parse_lines(text.splitlines()))] == [1]
    barrier = parse_lines(["RuntimeError: Ranks 1, 3 failed to pass monitoredBarrier in 2000 ms"])
    assert [e.rank for e in of(kinds.DESYNC, barrier)] == [1, 3]
    # (and another rank's report, which names the rank whose answer failed)
    faulty = parse_lines(
        [
            "[E ProcessGroupGloo.cpp:138] Rank 1 successfully reached monitoredBarrier, but "
            "received errors while waiting for send/recv from rank 0. Please check rank 0 logs "
            "for faulty rank."
        ]
    )
    assert [e.rank for e in of(kinds.DESYNC, faulty)] == [0]
    culprit = parse_lines(["error msg: Culprit rank 2; Error type: COLLECTIVE_TYPE_MISMATCH, x"])
    assert [e.rank for e in of(kinds.MISMATCH_DETECTED, culprit)] == [2]


def test_store_failures_are_bootstrap_and_a_closed_store_is_a_peer_gone() -> None:
    events = parse_lines(
        [
            "torch.distributed.DistNetworkError: The client socket has timed out after "
            "1800000ms while trying to connect to (10.0.0.1, 29500).",
            "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for "
            "clients. 1/2 clients joined.",
            "[rank101]:[W703 01:01:05 TCPStore.cpp:138] [c10d] recvValueWithTimeout failed on "
            "SocketImpl(fd=90, addr=[a]:43518, remote=[b.cluster.local]:56789): Failed to "
            "recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown "
            "or crash?",
        ]
    )
    assert [(e.kind, e.peer, e.nranks) for e in events if e.kind != kinds.EXCEPTION] == [
        (kinds.BOOTSTRAP, "10.0.0.1:29500", None),
        (kinds.BOOTSTRAP, "", 2),
        (kinds.PEER_GONE, "b.cluster.local", None),
    ]


def test_a_backend_without_the_op_is_unsupported_in_either_wording() -> None:
    # GIVEN the two ways torch words an op a process group lacks
    events = parse_lines(
        [
            "RuntimeError: ProcessGroupMPI does not support alltoall",
            "RuntimeError: no support for reduce_scatter_tensor_coalesced in UCC process group",
        ]
    )
    # THEN both are the backend refusing the op, and the op is named
    assert [e.op for e in of(kinds.UNSUPPORTED_OP, events)] == [
        "alltoall",
        "reduce_scatter_tensor_coalesced",
    ]


def test_does_not_support_from_anything_but_a_backend_refuses_no_collective() -> None:
    # GIVEN torchvision's warning, printed by countless data loaders, a library's prose, and
    # a backend's refusal in each wording the backend names itself by
    events = parse_lines(
        [
            "functional.py:74: UserWarning: The given NumPy array is not writable, and PyTorch "
            "does not support non-writable tensors. This means you can write to it.",
            "# provider (sun.security.provider.PolicyFile) does not support this property.",
            "WARNING: this platform does not support pin_memory",
            "Feature foo is not supported in this version of the library",
            "RuntimeError: Backend gloo does not support alltoall",
            "RuntimeError: ProcessGroup nccldoes not support _reduce_scatter_base",
            "ValueError: `IndexSlices` is not supported for Collective All-Reduce.",
        ]
    )
    # THEN only the refusals are the backend refusing an op
    assert [e.op for e in of(kinds.UNSUPPORTED_OP, events)] == [
        "alltoall",
        "_reduce_scatter_base",
        "IndexSlices",
    ]


def test_a_rank_waiting_for_a_unique_id_names_the_rank_that_never_came() -> None:
    # GIVEN rank 1's error when rank 0 never published the communicator's unique id (torch
    # publishes it at the group's first collective), in its older and its newer wording
    older = (
        "[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and "
        "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
        "store->get('0') got error: Socket Timeout"
    )
    newer = (
        "[rank3]:[E1127 02:10:00 ProcessGroupNCCL.cpp:2105] [PG ID 1 PG GUID 1 Rank 3] is "
        "setting up NCCL communicator and retrieving ncclUniqueId from [2] via c10d key-value "
        "store by key '1:0', but store->get('1:0') got error: wait timeout after 600000ms"
    )
    # (and torch 1.x's, whose source spelled it "retreiving")
    oldest = older.replace("retrieving", "retreiving")
    # THEN the rank it waited for is the one that never reached that collective
    for line, absent, waited_out in ((older, 0, False), (oldest, 0, False), (newer, 2, True)):
        events = [e for e in parse_lines([line]) if e.kind == kinds.DESYNC]
        assert [e.rank for e in events] == [absent]
        verdict = classify(Evidence("job", None, logs=tuple(parse_lines([line]))))
        assert verdict.culprit_ranks == (absent,)
        # AND where the wait ran to the store's timeout (the job stayed up all along), that
        # rank was at its own start-up work: cpu_stuck, low
        assert (verdict.hang_class is HangClass.CPU_STUCK) is waited_out, verdict.summary


WRAPPED_TIMEOUTS = [
    "[rank6] Watchdog caught collective operation timeout:",
    "WorkNCCL(SeqNum=1320347, OpType=ALLREDUCE,",
    "NumelIn=4501504, NumelOut=4501504, Timeout(ms)=600000)",
    "",
    "[rank5] Watchdog caught collective operation timeout:",
    "WorkNCCL(SeqNum=1320347, OpType=ALLREDUCE,",
    "NumelIn=8171520, NumelOut=8171520, Timeout(ms)=600000)",
]
"""Two ranks' watchdog timeouts as a user pasted them: the colon after ``[rankN]`` dropped
and each record wrapped over three lines."""


def test_a_wrapped_watchdog_record_is_read_whole_with_its_rank() -> None:
    # WHEN the pasted, wrapped records are read
    caught = of(kinds.WATCHDOG_TIMEOUT, parse_lines(WRAPPED_TIMEOUTS))
    # THEN each is one timeout of its rank, with its sequence number, op and size
    assert [(e.rank, e.seq, e.op, e.numel) for e in caught] == [
        (6, 1320347, "ALLREDUCE", 4501504),
        (5, 1320347, "ALLREDUCE", 8171520),
    ]
    # AND two ranks that timed out in one collective with different sizes disagree
    verdict = classify(
        Evidence(
            job="t", ranks_expected=None, logs=tuple(parse_lines(WRAPPED_TIMEOUTS)), log_files=()
        )
    )
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH


def test_a_record_cut_by_another_writer_or_the_end_is_read_as_far_as_it_goes() -> None:
    # GIVEN a wrapped record interrupted by another rank's line, and one a traceback follows
    lines = [
        "[rank1]:[E ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=9, OpType=BROADCAST,",
        "[rank2]:[E ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=9, OpType=BROADCAST, NumelIn=4, NumelOut=4, Timeout(ms)=600000)",
        "[rank3]:[E ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout:",
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in <module>',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    # WHEN read together THEN each line (and the traceback) is read as it would be alone: no
    # line is lost to the record it was waiting for
    apart = [[line] for line in lines[:3]] + [lines[3:]]  # the traceback is one block
    alone = [(e.kind, e.rank, e.seq) for part in apart for e in parse_lines(part)]
    assert [(e.kind, e.rank, e.seq) for e in parse_lines(lines)] == alone
    assert (kinds.WATCHDOG_TIMEOUT, 2, 9) in alone


WHOLE_TIMEOUT = (
    "[rank4]:[E ProcessGroupNCCL.cpp:1] [Rank 4] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=77, OpType=ALLGATHER, NumelIn=8, NumelOut=64, "
    "Timeout(ms)=600000) ran for 600013 milliseconds before timing out."
)
_INSIDE = (WHOLE_TIMEOUT.index("WorkNCCL(") + len("WorkNCCL("), WHOLE_TIMEOUT.index(") ran"))


@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.integers(*_INSIDE), max_size=3, unique=True))
def test_a_record_wrapped_anywhere_reads_as_the_whole_line(cuts: list[int]) -> None:
    # GIVEN one watchdog line cut at up to three places inside its record (a terminal's
    # wrap, mid-word too; or the user's, after a comma), each piece on its own line
    whole = WHOLE_TIMEOUT
    at = sorted(cuts)
    pieces = [whole[a:b] for a, b in zip([0, *at], [*at, len(whole)], strict=True)]

    def timeouts(lines: list[str]) -> list[tuple[object, ...]]:
        found = of(kinds.WATCHDOG_TIMEOUT, parse_lines(lines))
        return [(e.rank, e.seq, e.op, e.numel) for e in found]

    # WHEN read THEN it is the same timeout as the whole line's
    assert timeouts(pieces) == timeouts([whole]) == [(4, 77, "ALLGATHER", 8)]


HEARTBEAT = (
    "[rank4]:[E205 18:11:06.375750231 ProcessGroupNCCL.cpp:1870] [PG ID 12 PG GUID "
    "99(EXPERT_MODEL_PARALLEL_GROUP) Rank 4] ProcessGroupNCCL's watchdog got stuck for 480 "
    "seconds without making progress in monitoring enqueued collectives."
)
EXIT_WARNING = (
    "[rank0]:[W205 18:00:34.953145631 ProcessGroupNCCL.cpp:1538] Warning: WARNING: "
    "destroy_process_group() was not called before program exit, which can leak resources."
)


def _judged(lines: list[str]):
    return classify(
        Evidence(job="t", ranks_expected=None, logs=tuple(parse_lines(lines)), log_files=("a",))
    )


def test_a_watchdog_stuck_after_the_program_began_to_exit_is_a_teardown_hang() -> None:
    # GIVEN torch's exit warning, then the heartbeat monitor's report of a stuck watchdog
    verdict = _judged([EXIT_WARNING, HEARTBEAT])
    # THEN the job hung in its teardown, and the advice is to destroy the groups alike
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert "teardown" in verdict.summary and "480 s" in verdict.summary
    assert "destroy_process_group()" in verdict.summary


def test_a_stuck_watchdog_alone_says_what_blocked_and_asks_for_a_native_stack() -> None:
    # GIVEN only the heartbeat monitor's line (no exit before it) WHEN judged
    verdict = _judged([HEARTBEAT])
    # THEN no teardown is claimed; the summary says what blocked, and the native stack of
    # that rank is what is missing
    assert verdict.hang_class is not HangClass.COLLECTIVE_MISMATCH or "guess" in verdict.summary
    assert "watchdog thread was itself blocked for 480 s" in verdict.summary
    assert any("py-spy dump --native" in m for m in verdict.missing_evidence)
    # AND the monitor's first line alone (a paste that stops before the exit message) is
    # the same finding, without a duration
    first = (
        "[rank25]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 25] Heartbeat monitor timed out! "
        "Process will be terminated after dumping debug info. workMetaList_.size()=2"
    )
    alone = _judged([first])
    assert "rank 25's watchdog thread was itself blocked past the heartbeat timeout" in (
        alone.summary
    )
    # AND torch's exit warning alone, which every job that never destroys its group
    # prints on a clean exit, is no fault
    assert _judged([EXIT_WARNING, "step 100 | loss 2.7"]).hang_class is not (
        HangClass.COLLECTIVE_MISMATCH
    )
