"""Verdicts from logs alone: the culprit is who caused the hang, not who logged it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.evidence import Evidence, RankProcess
from doctor.logs import parse_lines
from doctor.model import Confidence, HangClass
from doctor.verdict.classify import classify

WATCHDOG = (
    "[rank{r}]:[E1121 10:02:11 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1024, NumelOut=1024, "
    "Timeout(ms)=600000) ran for 600061 milliseconds before timing out."
)
PROGRESS = (
    "[rank{r}]:[E1121 10:02:11 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
    "Rank {r}] Exception (either an error or timeout) detected by watchdog at work: {seq}, "
    "last enqueued NCCL work: {enq}, last completed NCCL work: {done}."
)
INIT = (
    "{host}:{pid}:{pid} [{dev}] NCCL INFO comm 0x5 rank {r} nranks 4 cudaDev {dev} busId "
    "{bus} - Init COMPLETE"
)


def judge(lines: list[str], **kw: object):
    return classify(Evidence("job", None, logs=tuple(parse_lines(lines)), **kw))  # type: ignore[arg-type]


def test_the_rank_that_never_issued_the_collective_is_named_not_the_waiters() -> None:
    # GIVEN ranks 0-2 waiting in collective 42, rank 3 having issued (and finished) only up
    # to 41
    lines = [WATCHDOG.format(r=r, seq=42, op="ALLREDUCE") for r in range(3)]
    lines += [PROGRESS.format(r=r, seq=42, enq=42, done=41) for r in range(3)]
    lines += [PROGRESS.format(r=3, seq=41, enq=41, done=41)]
    verdict = judge(lines)
    # THEN rank 3 is the culprit; why it stopped is for its stack to say
    assert verdict.culprit_ranks == (3,)
    assert verdict.hang_class is HangClass.UNKNOWN
    assert any("stack" in m for m in verdict.missing_evidence)
    assert verdict.collective and verdict.collective.seq == 42


def test_a_laggard_that_died_first_is_rank_loss() -> None:
    # GIVEN the same positions, and torchrun saying rank 3 was killed first
    lines = [WATCHDOG.format(r=r, seq=42, op="ALLREDUCE") for r in range(3)]
    lines += [PROGRESS.format(r=r, seq=42, enq=42, done=41) for r in range(3)]
    lines += [
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-05-01_10:00:00",
        "  host      : node-2",
        "  rank      : 3 (local_rank: 3)",
        "  exitcode  : -9 (pid: 5733)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 5733",
        "============================================================",
    ]
    verdict = judge(lines)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.RANK_LOSS, (3,))
    assert verdict.confidence is not Confidence.LOW


def test_watchdog_aborts_are_not_the_cause() -> None:
    # GIVEN every rank aborted by its own watchdog (SIGABRT) after timing out together
    lines = [WATCHDOG.format(r=r, seq=7, op="ALLREDUCE") for r in range(4)]
    lines += [f"srun: error: node-1: task {r}: Aborted" for r in range(4)]
    verdict = judge(lines)
    assert verdict.hang_class is not HangClass.RANK_LOSS
    assert verdict.hang_class is HangClass.UNKNOWN and not verdict.culprit_ranks


def test_all_issued_none_finished_with_a_link_error_is_network_on_the_named_peer() -> None:
    # GIVEN all four ranks stuck in collective 7 they all issued, and an IB error on rank 1's
    # host naming the address of rank 2's host
    lines = [WATCHDOG.format(r=r, seq=7, op="ALLREDUCE") for r in range(4)]
    lines += [PROGRESS.format(r=r, seq=7, enq=7, done=6) for r in range(4)]
    lines += [
        INIT.format(host="node-a", pid=100 + r, r=r, dev=r, bus=f"{r + 1}b000") for r in (0, 1)
    ]
    lines += [
        INIT.format(host="node-b", pid=100 + r, r=r, dev=r - 2, bus=f"{r + 1}b000") for r in (2, 3)
    ]
    lines += ["node-b:102:102 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.2<0>"]
    lines += [
        "node-a:101:150 [1] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from "
        "peer 10.0.0.2<54201> with status=12 opcode=0 len=0 vendor err 129 (Recv)"
    ]
    verdict = judge(lines)
    assert verdict.hang_class is HangClass.NETWORK
    assert verdict.culprit_ranks == (2, 3)
    assert "10.0.0.2" in verdict.summary


def test_an_xid_on_a_host_names_the_rank_on_that_gpu() -> None:
    lines = [
        INIT.format(host="node-b", pid=300 + r, r=r, dev=r, bus=f"{r + 1}b000") for r in range(4)
    ]
    lines += [WATCHDOG.format(r=r, seq=9, op="ALLGATHER") for r in (0, 1, 3)]
    lines += [
        "Mar 01 12:00:00 node-b kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=302, GPU has "
        "fallen off the bus."
    ]
    verdict = judge(lines)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.GPU_HANG, (2,))
    assert "Xid 79" in verdict.summary


def test_transport_errors_after_a_peer_died_blame_the_death() -> None:
    lines = [
        "gpu-1:77:90 [2] NCCL WARN Net : Connection closed by remote peer gpu-2<56978>",
        "srun: error: gpu-2: task 5: Killed",
    ]
    verdict = judge(lines)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.RANK_LOSS, (5,))


def test_a_peer_that_only_closed_its_sockets_most_likely_exited() -> None:
    # GIVEN a rank's collective failing because its peer closed the connection in order
    # (end of file), NCCL's generic "remote process exited or network error", nothing else
    closed = [
        "[rank2]:[E0301 10:00:00 ProcessGroupNCCL.cpp:552] [Rank 2] Collective WorkNCCL("
        "SeqNum=90, OpType=ALLGATHER, NumelIn=8, NumelOut=32, Timeout(ms)=600000) raised the "
        "following async exception: NCCL error: remote process exited or there was a network "
        "error, NCCL version 2.21.5",
        "socketProgress: Connection closed by remote peer node-7<40112>",
    ]
    verdict = judge(closed)
    # THEN the peer's process is the likely cause (low confidence), not the link
    assert verdict.hang_class is HangClass.RANK_LOSS
    assert verdict.confidence is Confidence.LOW
    # AND so does a reset or a broken pipe: the kernel's answer for a process that ended
    # (and torch's store reading an end of file: pytorch/pytorch#153586, dev)
    store = (
        "[W514 18:33:36.536327028 TCPStore.cpp:138] [c10d] recvValueWithTimeout failed on "
        "SocketImpl(fd=3, addr=[localhost]:34658, remote=[localhost]:1234): Failed to recv, got "
        "0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"
    )
    assert judge([store]).hang_class is HangClass.RANK_LOSS
    for ended in ("Connection reset by peer", "Broken pipe"):
        reset = judge(closed + [f"Call to recv from node-7<40112> failed : {ended}"])
        assert reset.hang_class is HangClass.RANK_LOSS, ended
    # AND a timeout, UCX's transport reset or an NCCL transport error keeps the link in question
    for link in ("Connection timed out", "Connection reset by remote peer"):
        timeout = judge(closed + [f"Call to recv from node-7<40112> failed : {link}"])
        assert timeout.hang_class is HangClass.NETWORK, link
    ib = judge(
        closed
        + [
            "node-3:11:12 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.7<40112> with "
            "status=12 opcode=0 len=0 vendor err 129 (Recv)"
        ]
    )
    assert ib.hang_class is HangClass.NETWORK


def test_closes_that_follow_a_gloo_timeout_are_neither_a_death_nor_a_link() -> None:
    # GIVEN gloo's peers closing their pairs because one of their own operations timed out
    # (gloo's unbound_buffer.cc gives the pairs it closes this reason)
    closed = ["[E] gloo: Connection closed by peer [10.0.0.15]:4312"]
    assert judge(closed).hang_class is HangClass.RANK_LOSS
    verdict = judge(closed + ["Application timeout caused pair closure"])
    # THEN the logs say a rank timed out waiting, and for whom they cannot say
    assert verdict.hang_class is HangClass.UNKNOWN
    assert "timed out" in verdict.summary
    # AND a transport error beside it still speaks for the link
    reset = judge(
        closed + ["Application timeout caused pair closure", "NCCL WARN NET/IB : port error"]
    )
    assert reset.hang_class is HangClass.NETWORK


def test_a_library_that_did_not_load_is_the_set_up() -> None:
    # GIVEN the dynamic loader's refusals, as Python raises them
    refusals = [
        "ImportError: libnccl.so.2: cannot open shared object file: No such file or directory",
        "ImportError: /opt/venv/lib/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
        "OSError: /lib64/libc.so.6: version `GLIBC_2.34' not found (required by libtorch.so)",
    ]
    verdicts = [judge([line]) for line in refusals]
    # THEN each is the set-up, with advice about the builds
    assert {v.hang_class for v in verdicts} == {HangClass.BOOTSTRAP}
    assert all("did not load" in v.summary for v in verdicts)
    # AND NCCL's note that no net plugin is installed (every healthy job without one) is not
    info = (
        "node:1:1 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : "
        "libnccl-net.so: cannot open shared object file: No such file or directory"
    )
    assert judge([info]).hang_class is not HangClass.BOOTSTRAP


def test_rccls_iommu_warning_decides_only_where_nothing_else_does() -> None:
    # GIVEN RCCL's warning that the IOMMU is not in passthrough mode (ROCm's install FAQ:
    # jobs that hang with the GPUs busy), which runs that work print too
    warned = (
        'node:1:1 [0] /app/rccl/src/init.cc:213 NCCL WARN Missing "iommu=pt" from kernel '
        "command line which can lead to system instablity or hang!"
    )
    alone = judge([warned])
    # THEN alone it is the IOMMU, at low confidence, and says it is weak
    assert (alone.hang_class, alone.confidence) == (HangClass.NETWORK, Confidence.LOW)
    assert "iommu=pt" in alone.summary and "runs that work print it too" in alone.summary
    # AND beside a rank that died of its own cause, the death decides
    crash = "[node3:01615] Signal: Segmentation fault (11)"
    assert judge([warned, crash]).hang_class is HangClass.RANK_LOSS


def test_a_rank_that_raised_while_the_others_time_out_is_lost() -> None:
    # GIVEN rank 0's uncaught exception (or CUDA running out of memory) and no exit line,
    # while ranks 1 and 2 time out in a collective
    waits = [WATCHDOG.format(r=r, seq=15037, op="ALLREDUCE") for r in (1, 2)]
    raised = [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "train.py", line 5, in save_checkpoint',
        "[rank0]:     x = state['model']",
        "[rank0]: KeyError: 'model'",
    ]
    oom = ["[rank0]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    for lines in (raised, oom):
        verdict = judge(lines + waits)
        # THEN rank 0 is gone: not a rank that "logged nothing" and left the loop
        assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.RANK_LOSS, (0,))
        assert "logged nothing" not in verdict.summary
    # AND CUDA running out of memory is one rank's end even where no prefix says whose
    unnamed = judge([oom[0].removeprefix("[rank0]: ")] + waits)
    assert unnamed.hang_class is HangClass.RANK_LOSS and "a process raised" in unnamed.summary
    # AND CUDA out of memory alone is that rank's end, at low confidence; NCCL's own
    # allocation failing while it sets up is not read so
    alone = judge(oom)
    assert (alone.hang_class, alone.confidence) == (HangClass.RANK_LOSS, Confidence.LOW)
    assert "ran out of GPU memory" in alone.summary
    nccl_oom = "node1:1:1 [0] NCCL WARN Cuda failure 'out of memory'"
    assert "ran out of GPU memory" not in judge([nccl_oom]).summary
    # AND a process the kernel's OOM killer killed is lost too, whichever rank it was
    killed = judge(["Out of memory: Killed process 41234 (python) total-vm:1234kB"] + waits)
    assert killed.hang_class is HangClass.RANK_LOSS and "was killed" in killed.summary
    # AND the collateral error a waiting rank raises blames nobody
    collateral = ["[rank0]: torch.distributed.DistBackendError: NCCL communicator was aborted"]
    assert judge(collateral + waits).hang_class is not HangClass.RANK_LOSS


def test_a_launcher_that_could_not_start_the_ranks_is_the_set_up() -> None:
    # GIVEN SLURM's container plugin failing, then srun's report of the task's exit
    pyxis = [
        "slurmstepd: error: pyxis: container start failed with error code: 1",
        "slurmstepd: error: pyxis: couldn't start container",
        "slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1",
        "srun: error: nid001234: task 0: Exited with exit code 1",
    ]
    # AND Open MPI refusing to start for want of slots
    slots = ["There are not enough slots available in the system to satisfy the 16"]
    # THEN both are the set-up, not a rank that died
    assert {judge(lines).hang_class for lines in (pyxis, slots)} == {HangClass.BOOTSTRAP}


def test_work_a_cuda_graph_capture_cannot_hold_is_refused_and_a_build_lock_is_warmup() -> None:
    capture = (
        "misc/strongstream.cc:378 NCCL WARN Cuda failure 'operation failed due to a previous "
        "error during capture'"
    )
    assert judge([capture]).hang_class is HangClass.UNSUPPORTED_OP
    quoted = "ValueError: `IndexSlices` is not supported for Collective All-Reduce."
    assert judge([quoted]).hang_class is HangClass.UNSUPPORTED_OP
    # a rank's stack waiting on torch's JIT build lock, as faulthandler dumps it
    baton = [
        "Timeout (0:02:00)!",
        'File "/venv/lib/torch/utils/file_baton.py", line 50 in wait',
        'File "/venv/lib/torch/utils/cpp_extension.py", line 2156 in _jit_compile',
    ]
    assert judge(baton).hang_class is HangClass.COMPILE_WARMUP


def test_a_bootstrap_warning_after_collectives_ran_is_weak() -> None:
    early = judge(["node:1:1 [0] NCCL WARN Bootstrap : no socket interface found"])
    assert early.hang_class is HangClass.BOOTSTRAP
    late = judge(
        [WATCHDOG.format(r=0, seq=900, op="ALLREDUCE")]
        + ["node:1:1 [0] NCCL WARN Bootstrap : no socket interface found"]
    )
    assert late.confidence is Confidence.LOW


def test_live_dead_process_and_log_rank_loss_agree() -> None:
    lines = ["srun: error: node-1: task 2: Killed"]
    dead = RankProcess(2, 1234, "node-1", alive=False, status="dead", exit_code=-9)
    verdict = judge(lines, processes=(dead,))
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.RANK_LOSS, (2,))
    assert verdict.confidence is Confidence.HIGH


def test_logs_with_nothing_in_them_are_unknown() -> None:
    verdict = judge(["loading shards", "warming the cache"])
    assert verdict.hang_class is HangClass.UNKNOWN


def test_ras_counts_that_did_not_move_are_a_stuck_communicator(tmp_path) -> None:
    # GIVEN NVIDIA's sample of counts one operation apart (a running job, if they move)
    from pathlib import Path

    from doctor.logs import read_logs

    sample = Path(__file__).parents[1] / "fixtures" / "real" / "ras-doc-counts-in-flight"
    text = (sample / "ras.txt").read_text()
    (tmp_path / "ras-1.txt").write_text(text)
    (tmp_path / "ras-2.txt").write_text(text)
    (tmp_path / "moved.txt").write_text(text.replace("6650", "6702").replace("6649", "6701"))

    def verdict(*names: str):
        reading = read_logs([tmp_path / n for n in names])
        return classify(Evidence("job", 32, logs=reading.events))

    # WHEN one report is read THEN a job in flight; WHEN the same counts twice THEN stuck,
    # the six ranks behind named; WHEN the counts moved THEN in flight again
    assert verdict("ras-1.txt").hang_class is HangClass.HEALTHY
    frozen = verdict("ras-1.txt", "ras-2.txt")
    assert frozen.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert frozen.culprit_ranks == (0, 2, 3, 4, 5, 7)
    assert verdict("ras-1.txt", "moved.txt").hang_class is HangClass.HEALTHY


def test_the_ranks_the_desync_report_names_are_the_culprits_not_those_behind_in_its_snapshot() -> (
    None
):
    # GIVEN a desync report (pytorch/pytorch#152623's shape) that names rank 7, with a snapshot
    # in which ranks 0-2 started an earlier collective than ranks 3-6
    verdict = judge(
        [
            "[rank0]:[E515 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=241, OpType=ALLREDUCE, NumelIn=6, NumelOut=6, "
            "Timeout(ms)=600000) ran for 600086 milliseconds before timing out.",
            "[rank0]:[E515 ProcessGroupNCCL.cpp:1937] Rank 0",
            "         - [0] Timeout at collective: ALLREDUCE, #315",
            "         - To our best knowledge, the lagging/dead/mismatched ranks that caused the "
            "desync are:",
            "             [7] finished collective #182, but didn't join collective #183 (count "
            "from 1)",
            "         - Snapshot of ranks' latest states:",
            "           #315 started ranks:",
            "             [0, 1, 2] started ALLREDUCE",
            "           #317 started ranks:",
            "             [3, 4, 5, 6] started _ALLGATHER_BASE",
        ]
    )
    # THEN the report's rank is the culprit: the others' positions are the snapshot's, not laggards
    assert verdict.culprit_ranks == (7,)


GROUPED_WATCHDOG = (
    "[rank{r}]:[E1127 03:12:40 ProcessGroupNCCL.cpp:685] [PG ID {pg} PG GUID {pg}(default_pg) "
    "Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
    "NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600047 milliseconds before timing out."
)


def _grouped(r: int, op: str = "ALLREDUCE", n: int = 1024, seq: int = 42, pg: int = 0) -> str:
    return GROUPED_WATCHDOG.format(r=r, op=op, n=n, seq=seq, pg=pg)


def test_a_rank_whose_watchdog_waits_in_another_size_or_op_is_the_culprit() -> None:
    # GIVEN four ranks timed out at collective 42 of one group, rank 2 with twice the elements
    sized = judge([_grouped(r, n=2048 if r == 2 else 1024) for r in range(4)])
    # OR rank 1 in a broadcast where the others all-reduce
    other_op = judge([_grouped(r, op="BROADCAST" if r == 1 else "ALLREDUCE") for r in range(4)])
    # THEN each is a collective mismatch whose culprit is the odd rank, and the summary says what
    assert (sized.hang_class, sized.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (2,))
    assert sized.confidence is Confidence.HIGH
    assert "rank 2 in ALLREDUCE of 2048 elements" in sized.summary
    assert (other_op.hang_class, other_op.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (1,))
    assert "rank 1 in BROADCAST" in other_op.summary


def test_watchdog_lines_that_may_differ_are_not_a_mismatch() -> None:
    # GIVEN an uneven all_gather (each rank's own count), point-to-point work at a collective's
    # number (torch numbers them apart), and two groups' collectives at the same number
    uneven = [_grouped(r, op="ALLGATHER", n=100 + r) for r in range(4)]
    p2p = [_grouped(0, op="SEND"), _grouped(1), _grouped(2), _grouped(3)]
    groups = [_grouped(0, pg=0), _grouped(1, pg=0), _grouped(2, op="ALLGATHER", pg=1)]
    for lines in (uneven, p2p, groups):
        assert judge(lines).hang_class is not HangClass.COLLECTIVE_MISMATCH, lines


def test_an_ungrouped_watchdog_line_counts_only_from_a_rank_of_one_timeout() -> None:
    # GIVEN torch 2.2's lines (no group named): rank 3 timed out in two groups' collectives,
    # one of them numbered 42 like the others' all-reduce
    lines = [WATCHDOG.format(r=r, seq=42, op="ALLREDUCE") for r in range(3)]
    lines += [
        WATCHDOG.format(r=3, seq=42, op="ALLGATHER"),
        WATCHDOG.format(r=3, seq=7, op="ALLREDUCE"),
    ]
    # THEN rank 3 is not compared: which group its 42 belongs to is unknown
    assert judge(lines).hang_class is not HangClass.COLLECTIVE_MISMATCH
    # AND with one timeout each, an odd op is a mismatch, weaker than a grouped line's
    odd = judge(
        [WATCHDOG.format(r=r, seq=42, op="ALLGATHER" if r == 3 else "ALLREDUCE") for r in range(4)]
    )
    assert (odd.hang_class, odd.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (3,))


def test_two_ranks_in_two_collectives_are_a_tie() -> None:
    verdict = judge([_grouped(0), _grouped(1, op="BROADCAST")])
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert verdict.culprit_ranks == (0, 1) and verdict.confidence is Confidence.LOW


OPS = ("ALLREDUCE", "BROADCAST", "ALLGATHER", "REDUCE_SCATTER", "_ALLGATHER_BASE", "SEND", "RECV")


@settings(max_examples=150, deadline=None)
@given(
    world=st.integers(3, 9),
    op=st.sampled_from(OPS),
    other=st.sampled_from(OPS),
    n=st.integers(1, 1 << 30),
    seq=st.integers(1, 1 << 40),
    odd=st.data(),
)
def test_one_odd_watchdog_is_the_culprit_and_agreeing_ones_never_mismatch(
    world: int, op: str, other: str, n: int, seq: int, odd: st.DataObject
) -> None:
    # GIVEN every rank of a group timed out at one sequence number in the same collective
    same = [_grouped(r, op=op, n=n, seq=seq) for r in range(world)]
    # THEN that is never a mismatch
    assert judge(same).hang_class is not HangClass.COLLECTIVE_MISMATCH
    # AND WHEN one rank's line names another collective (point-to-point work aside: it is
    # numbered apart), that rank alone is the culprit
    rank = odd.draw(st.integers(0, world - 1))
    p2p = {"SEND", "RECV"} & {op, other}
    if other == op or p2p:
        return
    lines = [_grouped(r, op=other if r == rank else op, n=n, seq=seq) for r in range(world)]
    verdict = judge(lines)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (rank,))


def _traceback(rank: int, call: str) -> list[str]:
    """A rank's traceback at a gloo timeout, as torch 2.13 prints it (recorded here)."""
    site = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
    return [
        f"[rank{rank}]: Traceback (most recent call last):",
        f'[rank{rank}]:   File "/job/train.py", line 7, in <module>',
        f'[rank{rank}]:   File "{site}", line 3252, in {call}',
        f"[rank{rank}]:     work.wait()",
        f"[rank{rank}]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/"
        "unbound_buffer.cc:78] Timed out waiting 8000ms for recv operation to complete",
    ]


def test_stacks_split_one_to_one_name_both_sides_and_one_odd_stack_its_rank() -> None:
    # GIVEN two ranks' tracebacks in different collectives, then three against one
    even = judge(_traceback(0, "all_reduce") + _traceback(1, "broadcast"))
    odd = judge(
        [line for r in range(4) for line in _traceback(r, "barrier" if r == 2 else "all_reduce")]
    )
    # THEN the even split is a tie that names both, the odd one names its rank
    assert (even.hang_class, even.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (0, 1))
    assert "which side left the common path is open" in even.summary
    assert (odd.hang_class, odd.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (2,))
    assert "open" not in odd.summary


def test_a_rank_inside_a_collective_the_others_finished_ran_another_collective() -> None:
    # GIVEN ranks 0-2 waiting in collective 42, so finished with 41, and rank 3 timed out
    # inside 41 (issued, never finished): a collective finishes only when every rank's does
    lines = [WATCHDOG.format(r=r, seq=42, op="ALLREDUCE") for r in range(3)]
    lines += [PROGRESS.format(r=r, seq=42, enq=42, done=41) for r in range(3)]
    lines += [
        WATCHDOG.format(r=3, seq=41, op="BROADCAST"),
        PROGRESS.format(r=3, seq=41, enq=41, done=40),
    ]
    verdict = judge(lines)
    # THEN rank 3's collective 41 was not the others' (or its GPU stopped in it)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (3,))
    assert "inside collective 41" in verdict.summary and "GPU" in verdict.summary
    assert verdict.collective and verdict.collective.seq == 41


def test_a_rank_behind_in_a_collective_nobody_finished_is_not_called_a_mismatch() -> None:
    # GIVEN ranks 0-2 that enqueued 42 but, by their own count, finished only 40, and rank 3
    # that enqueued 41: nobody finished 41, so nothing says rank 3's 41 differed
    lines = [PROGRESS.format(r=r, seq=42, enq=42, done=40) for r in range(3)]
    lines += [PROGRESS.format(r=3, seq=41, enq=41, done=40)]
    verdict = judge(lines)
    # THEN rank 3 is named as behind, and the class is not a mismatch
    assert verdict.culprit_ranks == (3,)
    assert verdict.hang_class is not HangClass.COLLECTIVE_MISMATCH


def test_a_rank_known_only_by_its_wait_is_not_behind_a_peer_s_enqueued_count() -> None:
    # GIVEN ranks 1-3 of 4 waiting in collective 42, only rank 2 saying it enqueued up to 45
    # (collectives return once queued: its peers may well have queued as far)
    lines = [WATCHDOG.format(r=r, seq=42, op="_ALLGATHER_BASE") for r in (1, 2, 3)]
    lines += [PROGRESS.format(r=2, seq=42, enq=45, done=41)]
    verdict = judge(lines)
    # THEN ranks 1 and 3 are not named as behind: the rank that logged nothing is
    assert verdict.culprit_ranks == (0,)
    assert "reached collective" not in verdict.summary
    # AND a rank that says it issued less than a collective its peer waits in is behind
    lines = [WATCHDOG.format(r=r, seq=42, op="ALLREDUCE") for r in range(3)]
    lines += [PROGRESS.format(r=3, seq=41, enq=41, done=41)]
    assert judge(lines).culprit_ranks == (3,)


def test_the_watchdog_s_record_quoted_alone_is_its_timeout_of_an_unnamed_rank() -> None:
    # GIVEN the watchdog's record as an excerpt begins with it, the words before it cut
    lines = [
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)",
        "ran for 721595 milliseconds before timing out.",
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=9, NumelOut=9, Timeout(ms)=600000) ran "
        "for 600100 milliseconds before timing out.",
    ]
    # THEN each is a watchdog timeout, and a verdict on the first speaks of "a rank"
    events = [e for e in parse_lines(lines) if e.kind == "watchdog_timeout"]
    assert [(e.seq, e.op, e.numel, e.rank) for e in events] == [
        (1, "ALLREDUCE", 1, None),
        (7, "ALLREDUCE", 9, None),
    ]
    assert judge(lines[:2]).summary.startswith("a rank timed out in collective 1")
    assert judge(lines[2:]).summary.startswith("a rank timed out waiting (WorkNCCL(SeqNum=7")
    # AND a record inside other words is not one (only the watchdog's own words, or none)
    assert not [e for e in parse_lines(["see WorkNCCL(SeqNum=3) in the docs"]) if e.seq]


BUILD = [
    "> compiling and loading fused kernels ...",
    "Emitting ninja build file /opt/megatron/fused_kernels/build/build.ninja...",
    "Building extension module scaled_masked_softmax_cuda...",
]


def test_logs_that_stop_in_a_jit_build_with_nothing_failed_are_compile_warmup() -> None:
    # GIVEN a log whose last word is a JIT extension build, and nothing failed
    verdict = judge(["Loading checkpoint shards: 100%|##########| 2/2", *BUILD])
    # THEN the job stopped in the build: low, with the stale lock named as a cause
    assert (verdict.hang_class, verdict.confidence) == (HangClass.COMPILE_WARMUP, Confidence.LOW)
    assert "lock" in verdict.summary
    # AND a lock file left by an interrupted build, named by the job, makes it medium
    lock = "Warning: Lock file exists in build directory: '/root/.cache/torch_extensions/x/lock'"
    verdict = judge([lock, "Using /root/.cache/torch_extensions as PyTorch extensions root..."])
    assert (verdict.hang_class, verdict.confidence) == (HangClass.COMPILE_WARMUP, Confidence.MEDIUM)


def test_a_build_that_finished_or_a_failure_after_it_is_not_the_hang() -> None:
    # GIVEN the build done (torch loaded the module), or a rank's exception after it
    done = judge([*BUILD, "Loading extension module scaled_masked_softmax_cuda..."])
    failed = judge([*BUILD, "RuntimeError: CUDA error: an illegal memory access was encountered"])
    # THEN the build is not blamed
    assert done.hang_class is not HangClass.COMPILE_WARMUP
    assert failed.hang_class is not HangClass.COMPILE_WARMUP


def test_nvidia_research_code_s_plugin_build_that_never_says_done_is_the_hang() -> None:
    # GIVEN NVIDIA research code's plugin line: "Done." or "Failed!" follows once it ends
    running = judge(['> Setting up PyTorch plugin "bias_act_plugin"... '])
    done = judge(['Setting up PyTorch plugin "bias_act_plugin"... Done.'])
    # THEN only the build still running is the hang
    assert running.hang_class is HangClass.COMPILE_WARMUP
    assert done.hang_class is not HangClass.COMPILE_WARMUP


def test_colossalai_s_runtime_build_that_never_reports_its_time_is_the_hang() -> None:
    # GIVEN ColossalAI's builder (hpcaitech/ColossalAI#3359, #3496; hpcaitech/Open-Sora#629,
    # dev): its start line, and the time it prints once the build is done
    start = "[extension] Compiling the JIT cpu_adam_x86 kernel during runtime now"
    running = judge([start])
    done = judge([start, "[extension] Time taken to compile cpu_adam_x86 op: 37.3 seconds"])
    # THEN only the build still running is the hang the logs stop at
    assert running.hang_class is HangClass.COMPILE_WARMUP
    assert running.summary.startswith("the logs stop at a JIT extension build")
    assert not done.summary.startswith("the logs stop at a JIT extension build")


def test_a_script_that_says_rank_0_works_alone_is_rank_0_busy_while_the_others_wait() -> None:
    # GIVEN Megatron's own line (NVIDIA/Megatron-LM#795, dev), or a stack in
    # main_process_first's section (transformers' preprocessing)
    said = judge([" > WARNING: could not find index map files, building the indices on rank 0 ..."])
    stack = judge(
        [
            "Traceback (most recent call last):",
            '  File "run.py", line 40, in main',
            "    with training_args.main_process_first(desc='dataset map pre-processing'):",
        ]
    )
    # THEN rank 0 is busy in its own code: low from its word alone, medium from the stack
    assert (said.hang_class, said.culprit_ranks, said.confidence) == (
        HangClass.CPU_STUCK,
        (0,),
        Confidence.LOW,
    )
    assert (stack.hang_class, stack.confidence) == (HangClass.CPU_STUCK, Confidence.MEDIUM)
    # AND a line about rank 0 that names no shared work is not read so
    assert judge(["Rank 0 is the problematic rank"]).hang_class is not HangClass.CPU_STUCK


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("RuntimeError: Tensors must be CUDA and dense", "a CPU or sparse tensor"),
        ("RuntimeError: No backend type associated with device type cpu", "a cpu tensor"),
        ("RuntimeError: Unsupported data type for NCCL process group", "the tensor's data type"),
        # torch 2.x's wording of the NCCL group's table, and a c10d op with no kernel
        (
            "TypeError: Input tensor data type is not supported for NCCL process group: "
            "ComplexFloat",
            "the tensor's data type (ComplexFloat)",
        ),
        (
            "NotImplementedError: The operator 'c10d::allgather_' is not currently implemented "
            "for the MPS device.",
            "c10d's allgather on the MPS device's tensors (no implementation for them)",
        ),
        # sgl-project/sglang#29039 (dev): the pynccl wrapper's table (vLLM's too)
        (
            "ValueError: Unsupported dtype: torch.float8_e4m3fn",
            "the tensor's data type (float8_e4m3fn)",
        ),
        (
            "RuntimeError: CUDA tensor detected and the MPI used doesn't have CUDA-aware MPI "
            "support",
            "a CUDA tensor (this MPI is not CUDA-aware)",
        ),
        (
            "AttributeError: module 'torch.distributed' has no attribute 'reduce_scatter_tensor'",
            "torch.distributed.reduce_scatter_tensor, which this torch does not have",
        ),
        # stop 37, dev cases of the new round; and the line without an error word before it
        ("No backend type associated with device type cpu", "a cpu tensor"),
        (
            "RuntimeError: Only CUDA dense tensor is supported for NCCL collective operations",
            "a CPU or sparse tensor",
        ),
        ("RuntimeError: Cannot use ReduceOp.AVG with Gloo", "ReduceOp.AVG with Gloo"),
        ("(RuntimeError: Cannot use ReduceOp.AVG with XPU)", "ReduceOp.AVG with XPU"),
        ("ValueError: Invalid reduce op <ReduceOp object at 0x7f0c>", "the reduction operation"),
        ("RuntimeError: Invalid scalar type", "the tensor's data type"),
        # pytorch/pytorch#103585: gloo's data-type table, quoted alone
        ("Invalid scalar type", "the tensor's data type"),
        # ROCm/rccl#2022: HIP's words for work refused inside a graph capture
        (
            "HIP error: operation not permitted when stream is capturing",
            "work inside a CUDA graph capture",
        ),
        (
            "FP8 reduction support begins with sm90 capable devices.",
            "an FP8 reduction on a GPU older than sm90",
        ),
        (
            "No OpKernel was registered to support Op 'NcclAllReduce' used by {{node "
            'NcclAllReduce}} with these attrs: [reduction="sum", T=DT_FLOAT, num_devices=2]',
            "NcclAllReduce (this build has no kernel for it)",
        ),
        (
            "E base_collective_executor.cc:249] BaseCollectiveExecutor::StartAbort INTERNAL: "
            "Device /job:worker/replica:0/task:1/device:GPU:0 is joining a group with "
            "incompatible device typeCPU (group_key=3)",
            "a group of CPU and GPU devices",
        ),
        # tensorflow/tensorflow#37690 (dev): the same check, in its other wording
        (
            "tensorflow.python.framework.errors_impl.InternalError: Collective Op "
            "CollectiveBcastSend: Broadcast(1) is assigned to device "
            "/job:worker/replica:0/task:0/device:GPU:0 with type GPU and group_key 1 but that "
            "group has type CPU [Op:CollectiveBcastSend]",
            "a group of CPU and GPU devices",
        ),
        # pytorch/pytorch#190224: a functional collective's backward and its reduction
        (
            "RuntimeError: all_reduce backward only supports 'sum' reduction, got 'avg'",
            "the backward of all_reduce with ReduceOp.AVG",
        ),
    ],
)
def test_torch_s_refusal_of_a_collective_s_tensor_is_unsupported_op(
    line: str, refused: str
) -> None:
    # GIVEN torch's own refusal of the tensor a collective was given (a CPU tensor on an
    # NCCL group, a dtype NCCL lacks) WHEN judged THEN the backend rejected that tensor
    verdict = judge([line])
    assert verdict.hang_class is HangClass.UNSUPPORTED_OP
    assert verdict.summary.startswith(f"the backend rejected {refused}")


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: Expected to have finished reduction in the prior iteration before "
        "starting a new one. This error indicates that your module has parameters that were "
        "not used in producing loss.",
        "RuntimeError: It looks like your LightningModule has parameters that were not used in "
        "producing the loss returned by training_step.",
        "[rank3]: RuntimeError: Expected to mark a variable ready only once. This error is "
        "caused by one of the following reasons: 1) Use of a module parameter outside the "
        "`forward` function. ... 2) Reused parameters in multiple reentrant backward passes. "
        "... Parameter at index 195 has been marked as ready twice. reentrant backward is not "
        "supported for this DDP configuration",
    ],
)
def test_ddp_s_reducer_on_a_parameter_without_its_gradient_is_a_mismatch(line: str) -> None:
    # GIVEN DDP's reducer error: a parameter not reduced as it expects (unused, or used twice)
    verdict = judge([line])
    # THEN the ranks' reductions are not the ones DDP expects, and the fix is named; a
    # cause the message lists ("... is not supported for ...") is not a backend's refusal
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert "find_unused_parameters=True" in verdict.summary


def test_other_frameworks_checks_of_the_workers_collectives_are_mismatches() -> None:
    # GIVEN TensorFlow's ring all-reduce aborted because a worker's dataset ended
    verdict = judge(
        [
            "2019-07-07 06:48:49.161736: E tensorflow/core/common_runtime/ring_alg.cc:279] "
            "Aborting RingReduce with Out of range: [_Derived_]End of sequence"
        ]
    )
    # THEN the workers were given different numbers of batches
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert "different numbers of batches" in verdict.summary
    # AND workers that disagree on a collective group's size disagree on the collective
    verdict = judge(
        [
            "Device /job:localhost/replica:0/task:0/device:GPU:1 is joining a group with size "
            "2, but that group has size 3 (group_key=1)"
        ]
    )
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert "group's size" in verdict.summary
    # AND Accelerate's debug mode's check of the processes' shapes is one too
    verdict = judge(
        [
            "accelerate.utils.operations.DistributedOperationException:",
            "",
            "Cannot apply desired operation due to shape mismatches. All shapes across devices "
            "must be valid.",
        ]
    )
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert "Accelerate's debug mode" in verdict.summary
    # AND so is TensorFlow's collective executor's, whose members gave one instance two shapes
    verdict = judge(
        [
            "Shape mismatch in the collective instance 100. Op at device "
            "/job:worker/replica:0/task:1/device:GPU:0 expected shape [10] but another member "
            "in the group expected shape [20]."
        ]
    )
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert verdict.summary.startswith("TensorFlow found the processes' tensor shapes differ")
    # AND DDP's reducer under static_graph, and the parameters it lists, are its finding
    for line in (
        "RuntimeError: Your training graph has changed in this iteration, e.g., one parameter "
        "is used in first iteration, but then got unused in the second iteration.",
        "Parameter indices which did not receive grad for rank 1: 12 13",
    ):
        assert judge([line]).summary.startswith("DDP's reducer found a parameter"), line
    # AND gloo's size check read without its source file's prefix
    assert judge(["Gloo op.preamble.length <= op.nbytes. 8 vs 4"]).hang_class is (
        HangClass.COLLECTIVE_MISMATCH
    )
    # AND MPI's own size check, as MPICH (LBANN/lbann#182) and Open MPI print it
    for line in (
        "Fatal error in PMPI_Reduce_scatter_block: Message truncated, error stack:",
        "*** MPI_ERR_TRUNCATE: message truncated",
    ):
        verdict = judge([line])
        assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
        assert verdict.summary.startswith("MPI found a rank received more")


def test_a_lone_sigabrt_is_named_as_the_watchdog_s_consequence_not_as_nothing() -> None:
    # GIVEN torchrun's report of one rank ended by SIGABRT, and nothing else
    verdict = judge(
        [
            "Root Cause (first observed failure):",
            "[0]:",
            "  time      : 2025-05-24_03:42:44",
            "  host      : node-1",
            "  rank      : 1 (local_rank: 1)",
            "  exitcode  : -6 (pid: 1424)",
            "  error_file: <N/A>",
            "  traceback : Signal 6 (SIGABRT) received by PID 1424",
        ]
    )
    # THEN it is not called a lost rank, and the summary says what the abort most often is
    # and asks for that rank's lines before it, instead of "no launcher exit report"
    assert verdict.hang_class is not HangClass.RANK_LOSS
    assert "rank 1 ended on SIGABRT" in verdict.summary
    assert "launcher exit report" not in verdict.summary
    assert "the aborted rank's log before its abort" in verdict.missing_evidence


def test_a_torch_built_without_the_backend_is_a_set_up_failure_with_its_own_advice() -> None:
    # GIVEN torch's refusal on a build without NCCL (the Windows and macOS wheels)
    verdict = judge(["RuntimeError: Distributed package doesn't have NCCL built in"])
    # THEN it is bootstrap, and the advice is about the build, not ports and interfaces
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert "built without that backend" in verdict.summary
    assert "MASTER_ADDR" not in verdict.summary


def test_two_processes_joining_as_one_global_rank_are_a_launch_that_does_not_match() -> None:
    # GIVEN Lightning's join lines of an 8-member job in which ranks 0-3 joined twice (two
    # nodes each believing it is the first) and ranks 4-7 never
    joins = [f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8" for r in range(4)]
    verdict = judge([line for line in joins for _ in range(2)])
    # THEN it is the launch's set-up, with advice about nodes and tasks
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert "same global rank" in verdict.summary
    # AND a whole 8-rank job restarted (every rank joins again after all joined) is not
    restarted = [f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8" for r in range(8)]
    assert "same global rank" not in judge(restarted * 2).summary
    registered = "All distributed processes registered. Starting with 8 processes"
    assert judge([*restarted, registered] * 2).hang_class is not HangClass.BOOTSTRAP


@pytest.mark.parametrize(
    "line",
    [
        # huggingface/accelerate#1210: SLURM's step report of the cgroup's OOM killer
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=125757.batch. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.",
        # meta-llama/llama-cookbook#556: the kernel's, from dmesg
        "[Sun Jun  9 11:49:36 2024] Out of memory: Killed process 7815 (pt_main_thread) "
        "total-vm:45371652kB, anon-rss:31360488kB, file-rss:72116kB",
    ],
)
def test_a_process_the_oom_killer_killed_is_a_lost_rank_even_alone(line: str) -> None:
    # GIVEN only the OOM killer's report, pasted alone WHEN judged THEN a rank is lost
    verdict = judge([line])
    assert (verdict.hang_class, verdict.confidence) == (HangClass.RANK_LOSS, Confidence.MEDIUM)
    assert verdict.summary.startswith("the OOM killer killed")
    # AND CUDA's allocator refusing memory is no kill: it says nothing of the rank's end
    assert "OOM killer" not in judge(["torch.OutOfMemoryError: CUDA out of memory."]).summary


JOB = "the job's set-up failed"
TOPOLOGY = "elsah100:176:302 [1] graph/xml.h:85 NCCL WARN Attribute busid of node nic not found"
"""NCCL's topology code (graph/xml.h) missing a device's attribute, on a host with a RoCE NIC
beside its IB HCAs."""
COMMUNICATOR = "communicator creation failed"
NAMED_CAUSES = [
    # CUDA's set-up errors
    ("RuntimeError: CUDA error: invalid device ordinal", "LOCAL_RANK", JOB),
    ("RuntimeError: HIP error: invalid device ordinal", "LOCAL_RANK", JOB),
    ("RuntimeError: CUDA_ERROR_INVALID_DEVICE", "LOCAL_RANK", JOB),
    ("RuntimeError: CUDA error: system not yet initialized", "nvidia-fabricmanager", JOB),
    (
        "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
        "Exclusive Process",
        JOB,
    ),
    (
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). "
        "... compiled with your version of the CUDA driver.",
        "update the driver",
        JOB,
    ),
    (
        "Process: 444114 ExecStart=/usr/bin/nv-fabricmanager -c fabricmanager.cfg "
        "(code=exited, status=1/FAILURE)",
        "nvidia-fabricmanager package",
        JOB,
    ),
    # a port taken, a name, an interface, /dev/shm, the launcher
    ("RuntimeError: Address already in use", "MASTER_PORT", JOB),
    (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        "local network address. port: 29500, useIpv6: 0, code: -98",
        "MASTER_PORT",
        JOB,
    ),
    ("ValueError: host not found: Name or service not known", "does not resolve", JOB),
    ("node1:1:1 [0] NCCL WARN Bootstrap : no socket interface found", "names no interface", JOB),
    (
        "RuntimeError: [enforce fail at device.cc:83] ifa != nullptr. Unable to find "
        "address for: ^lo",
        "names no interface",
        JOB,
    ),
    (
        "node1:1:1 [0] NCCL WARN Error while creating shared memory segment "
        "/dev/shm/nccl-vzIpS6 (size 9637888)",
        "--shm-size",
        JOB,
    ),
    (
        "node1:1:1 [0] NCCL WARN unlink shared memory /dev/shm/nccl-d5rTd0 failed, error: "
        "No such file or directory",
        "RemoveIPC=no",
        JOB,
    ),
    (TOPOLOGY, "NCCL_IB_HCA", JOB),
    ("slurmstepd: error: pyxis: container start failed with error code: 1", "pyxis", JOB),
    ("PMI2_Init failed to initialize.  Return code: 14", "srun --mpi=pmix", JOB),
    # a communicator's CUDA call, and a limit the catalogue's message names
    (
        "RuntimeError: CUDART error: peer access is not supported between these two devices",
        "CUDA refused a call",
        COMMUNICATOR,
    ),
    (
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:260, unhandled cuda error",
        "CUDA refused a call",
        COMMUNICATOR,
    ),
    (
        "node1:1:1 [0] misc/socket.cc:50 NCCL WARN ncclOsSocketTryAccept: Accept failed: "
        "Too many open files",
        "ulimit -n",
        "NCCL printed",
    ),
]


@pytest.mark.parametrize(("line", "advice", "said"), NAMED_CAUSES)
def test_a_set_up_failure_that_names_its_cause_gets_advice_about_that_cause(
    line: str, advice: str, said: str
) -> None:
    # GIVEN a set-up failure whose line names its cause, pasted alone WHEN judged THEN the
    # advice is about that cause, not about reaching the master's port
    verdict = judge([line])
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert verdict.summary.startswith(said)
    assert advice in verdict.summary and "MASTER_ADDR/port" not in verdict.summary


def test_a_topology_warning_before_a_rank_s_exit_is_the_set_up_not_the_rank() -> None:
    # GIVEN NCCL's topology warning (its graph/ code names a device: "node nic"), then
    # mpirun's report that a rank exited with NCCL's error code (3: an internal error)
    exited = [
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "",
        "  Process name: [[56171,1],6]",
        "  Exit code:    3",
    ]
    verdict = judge([TOPOLOGY, *exited])
    # THEN the set-up failed, and the device it names is no peer to reach
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert "reaching nic" not in verdict.summary
    # AND without the warning the exit alone is a lost rank
    assert judge(exited).hang_class is HangClass.RANK_LOSS


TRANSPORT = (
    "node1:1:2 [0] transport/net_ib.cc:1238 NCCL WARN NET/IB : Got completion from peer "
    "10.0.0.2<3> with error 12, opcode 2, len 1, vendor err 129"
)


def test_one_rank_s_timeout_deep_into_training_is_a_rank_that_left_the_others_path() -> None:
    # GIVEN one rank's watchdog timeout after a thousand collectives had finished, alone
    deep = WATCHDOG.format(r=0, seq=129457, op="ALLREDUCE")
    verdict = judge([deep])
    # THEN a rank that never joined it: a collective mismatch, low, naming no culprit
    assert (verdict.hang_class, verdict.confidence) == (
        HangClass.COLLECTIVE_MISMATCH,
        Confidence.LOW,
    )
    assert verdict.culprit_ranks == () and "deep into training" in verdict.summary
    assert verdict.collective is not None and verdict.collective.seq == 129457
    # AND early in the job (set-up and links not yet proven) it says nothing of the kind
    early = judge([WATCHDOG.format(r=0, seq=42, op="ALLREDUCE")])
    assert early.hang_class is HangClass.UNKNOWN
    # AND a deep broadcast still waits for its busy source
    assert judge([deep.replace("ALLREDUCE", "BROADCAST")]).hang_class is HangClass.CPU_STUCK
    # AND beside a failing link, the link decides
    assert judge([deep, TRANSPORT]).hang_class is HangClass.NETWORK
    # AND the launcher's report that the rank then ended on SIGABRT (the watchdog taking it
    # down) is the timeout's consequence: the reading stands
    aborted = "failed (exitcode: -6) local_rank: 0 (pid: 1234) of binary: /usr/bin/python"
    assert judge([deep, aborted]).hang_class is HangClass.COLLECTIVE_MISMATCH
    # AND two ranks' positions are for the rules about positions, not this one
    both = judge([deep, WATCHDOG.format(r=1, seq=129457, op="ALLREDUCE")])
    assert "deep into training" not in both.summary


@pytest.mark.parametrize("op", ["ALLGATHER", "_ALLGATHER_BASE"])
def test_one_rank_s_timeout_in_an_all_gather_is_ranks_that_did_not_agree_on_it(op: str) -> None:
    # GIVEN one rank's watchdog timeout in an all-gather, alone, early or deep in training
    for seq in (11, 683):
        verdict = judge([WATCHDOG.format(r=1, seq=seq, op=op)])
        # THEN ranks that did not agree on it (sizes, a rank that skipped it): mismatch, low
        assert (verdict.hang_class, verdict.confidence) == (
            HangClass.COLLECTIVE_MISMATCH,
            Confidence.LOW,
        )
        assert verdict.summary.startswith(f"rank 1 timed out in all-gather {seq} ({op})")
        assert verdict.collective is not None and verdict.collective.seq == seq
    # AND a line whose sequence number the user cut out is read alike
    cut = WATCHDOG.format(r=1, seq=11, op=op).replace("SeqNum=11", "SeqNum=...")
    assert judge([cut]).hang_class is HangClass.COLLECTIVE_MISMATCH
    # AND an all-reduce's timeout early in the job, or a failing link beside it, is not this
    assert judge([WATCHDOG.format(r=1, seq=11, op="ALLREDUCE")]).hang_class is HangClass.UNKNOWN
    assert judge([WATCHDOG.format(r=1, seq=11, op=op), TRANSPORT]).hang_class is (HangClass.NETWORK)
    # AND two ranks' positions are for the rules about positions
    two = [WATCHDOG.format(r=r, seq=11, op=op) for r in (1, 2)]
    assert "all-gather" not in judge(two).summary


LIGHTNING_JOIN = "Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {m}/8"


def test_logs_that_stop_as_the_ranks_join_the_rendezvous_are_bootstrap() -> None:
    # GIVEN one node's half of an 8-rank Lightning job, each rank announcing it joins, and
    # torchelastic's agent waiting for the job's other agents
    lightning = judge([LIGHTNING_JOIN.format(r=r, m=r + 1) for r in range(4)])
    elastic = judge(
        [
            "INFO:torch.distributed.elastic.agent.server.api:[default] starting workers",
            "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group",
        ]
    )
    # THEN the job waits in the rendezvous for a rank that never came: bootstrap, low
    for verdict in (lightning, elastic):
        assert (verdict.hang_class, verdict.confidence) == (HangClass.BOOTSTRAP, Confidence.LOW)
        assert verdict.summary.startswith("the logs stop as the ranks join")
    # AND the count of ranks that announced themselves here is said
    assert "4 of 8 ranks announced themselves here" in lightning.summary


def test_a_rendezvous_that_completed_or_a_failure_after_it_is_not_the_hang() -> None:
    # GIVEN the rendezvous done (Lightning's rank 0 says every process registered), or a
    # rank's timeout after the ranks joined
    joined = [LIGHTNING_JOIN.format(r=r, m=r + 1) for r in range(2)]
    done = judge([*joined, "All distributed processes registered. Starting with 8 processes"])
    failed = judge([*joined, WATCHDOG.format(r=0, seq=3, op="ALLREDUCE")])
    # THEN the rendezvous is not blamed
    for verdict in (done, failed):
        assert not verdict.summary.startswith("the logs stop as the ranks join")


def test_a_rendezvous_another_file_says_completed_is_not_the_hang() -> None:
    # GIVEN rank 0's file saying every process registered, then rank 3's ending at its join
    # line (files have no order between them)
    rank0 = ["All distributed processes registered. Starting with 8 processes"]
    verdict = judge([*rank0, LIGHTNING_JOIN.format(r=3, m=4)])
    # THEN the rendezvous is not blamed
    assert not verdict.summary.startswith("the logs stop as the ranks join")
