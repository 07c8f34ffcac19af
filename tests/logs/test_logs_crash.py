# ruff: noqa: E501 - the log lines are kept whole, as runtimes print them
"""Crash signatures from every runtime a job prints through, and pasted text: issue 23's
log half. Each line is a form a runtime prints (or a user pastes); the dev split of
``tests/fixtures/heldout`` holds the real ones."""

from __future__ import annotations

import pytest

from doctor.evidence import Evidence
from doctor.logs import kinds
from doctor.logs.parse import parse_text
from doctor.model import Confidence, HangClass
from doctor.verdict.classify import classify
from doctor.verdict.log_rules import candidates


def _verdict(lines: list[str]):
    events = parse_text(lines, "job.log").events
    return classify(
        Evidence(job="t", ranks_expected=None, logs=tuple(events), log_files=("job.log",))
    )


@pytest.mark.parametrize(
    "line",
    [
        "[gpu-node09:332629:0:332629] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x10)",
        # openucx/ucx#8100: the same banner printed without its [host:pid:tid:thread] prefix
        "Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))",
        "[node3:01615] Signal: Segmentation fault (11)",
        "Fatal Python error: Segmentation fault",
        # glog's failure signal handler (PaddlePaddle, TensorFlow, MXNet), Open MPI's tag
        "Wed Sep 20 23:55:19 2017[1,68]<stderr>:*** SIGSEGV (@0x0) received by PID 21361 (TID 0x7fc457a4c700) from PID 0; stack trace: ***",
        "./run.sh: line 8:  3031 Segmentation fault      (core dumped) ./train",
        # bash's words for a child SIGKILL ended (the OOM killer), which dumps no core:
        # alone in front of a command (eric-mitchell/direct-preference-optimization#11), and
        # from a script
        "Killed",
        "./run.sh: line 8:  3031 Killed                  python train.py",
        'Thread 787 "python" received signal SIGSEGV, Segmentation fault.',
        "  traceback : Signal 11 (SIGSEGV) received by PID 6421",
        # nvidia-cosmos/cosmos-predict2.5#72: torchelastic's fields pasted without their
        # table, the PID redacted, and the signal's line cut after its name
        "traceback : Signal 9 (SIGKILL) received by PID xxx",
        "Signal 9 (SIGKILL)",
        "exitcode  : -9 (SIGKILL)",
        "exitcode: -9",
        # pytorch/pytorch#29889: the old torch.distributed.launch's CalledProcessError
        "subprocess.CalledProcessError: Command XXXXX (my script params) died with <Signals.SIGSEGV: 11>.",
        # text-generation-inference's launcher, whose shard a signal ended (issue 451 and
        # others: the OOM killer's SIGKILL)
        "2023-07-05T19:55:21.347050Z ERROR text_generation_launcher: Shard process was signaled to shutdown with signal 9",
        # a process that stopped itself on a failed check: glog's FATAL line, and a bare
        # CHECK as PaddlePaddle (PaddlePaddle/Paddle#5384) and TVM (sglang#38952) print it
        "F0101 00:00:00.000000 1234 trainer.cc:12] Check failed: x == y (1 vs. 2)",
        "Check failed: is Fail to open ./train_data_dir/20171016/dnn_instance_007855",
        "tvm.error.InternalError: Check failed: (wl.grid_dim(0) > 0 && wl.grid_dim(1) > 0 && wl.grid_dim(2) > 0)",
    ],
)
def test_a_crash_banner_of_any_runtime_is_a_lost_rank(line: str) -> None:
    # GIVEN one runtime's crash line WHEN the logs are judged THEN a rank was lost
    assert _verdict([line]).hang_class is HangClass.RANK_LOSS


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        # PaddlePaddle/Paddle#4043: a failed check about a socket is the connection's story
        (
            "Mon Sep 11 14:31:16 2017[1,37]<stderr>:F0911 14:31:16.057638  5678 SocketChannel.cpp:54] Check failed: len >= 0  peer=10.75.60.42: Connection timed out [110]",
            kinds.PEER_GONE,
        ),
        (
            "RuntimeError: tensorflow/compiler/xla/xla_client/mesh_service.cc:316 : Check failed: impl_->channel->WaitForConnected( std::chrono::system_clock::now() + std::chrono::seconds(connect_wait_seconds))",
            kinds.EXCEPTION,  # raised, as any exception line: no abort of its own
        ),
        # NCCL's connect that timed out is a communicator that never connected
        (
            "node1:1:1 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43227> failed : Connection timed out",
            kinds.BOOTSTRAP,
        ),
        # ... and so is the store's, and gloo's: not a peer that stopped answering
        (
            "torch.distributed.DistNetworkError: The client socket has failed to connect to [master-0]:29500 (errno: 110 - Connection timed out).",
            kinds.BOOTSTRAP,
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [10.0.0.2]:39407: Connection timed out",
            kinds.EXCEPTION,
        ),
    ],
)
def test_a_failed_check_about_a_connection_is_not_the_processs_own_abort(
    line: str, kind: str
) -> None:
    assert [e.kind for e in parse_text([line], "job.log").events] == [kind]


def test_a_peers_closed_connection_beside_a_crash_blames_the_crash_not_the_network() -> None:
    verdict = _verdict(
        [
            "node1:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.0.0.2<58355> failed : Broken pipe",
            "[node2:01615] Signal: Segmentation fault (11)",
        ]
    )
    assert verdict.hang_class is HangClass.RANK_LOSS


def test_a_collapsed_torchrun_failure_row_names_the_rank() -> None:
    verdict = _verdict(["rank2 (local rank: 2)exitcode: -9 (pid: 36071)error file: <N/A>"])
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.RANK_LOSS, (2,))


def test_an_xid_line_with_its_address_cut_is_still_read() -> None:
    verdict = _verdict(
        ["NVRM: Xid (PCI:...): 79, pid=1234, name=python, GPU has fallen off the bus."]
    )
    assert verdict.hang_class is HangClass.GPU_HANG


def test_quote_markers_and_a_shippers_timestamp_do_not_hide_a_lines_prefix() -> None:
    # GIVEN an srun-labelled NCCL line pasted in a reply (quote markers) or by a log shipper
    line = "3: node1:183006:183220 [1] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<55> with error 12, opcode 0, len 0, vendor err 129"
    for pasted in (f"> > {line}", f"2025-11-24T03:20:21.001125857Z {line}"):
        events = parse_text([pasted], "job.log").events
        # THEN the label still says whose line it is
        assert [(e.kind, e.rank) for e in events][:1] == [("network", 3)], pasted


def test_a_bus_error_in_ncclshmopen_is_dev_shm_not_a_lost_rank() -> None:
    verdict = _verdict(
        [
            'Thread 787 "python" received signal SIGBUS, Bus error.',
            "#0 0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long, void**, void**, int, void**) ()",
        ]
    )
    assert verdict.hang_class is HangClass.BOOTSTRAP


HOROVOD_STALL = "[0]<stderr>:[2020-12-29 16:50:57.724380: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds."
"""Horovod's stall inspector's warning, behind horovodrun's output tag."""


def test_horovods_stall_inspector_is_a_mismatch() -> None:
    verdict = _verdict([HOROVOD_STALL])
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert "Horovod's stall inspector" in verdict.summary


def test_horovods_missing_ranks_are_the_culprits() -> None:
    # GIVEN the stall inspector's warning and its list, through horovodrun's output tags
    # (the rank that printed it, then each missing rank and its tensors; "!" past shutdown)
    verdict = _verdict(
        [
            HOROVOD_STALL,
            "[0]<stderr>:Missing ranks:",
            "[0]<stderr>:3: [allreduce.c_d1.bias, allreduce.c_d1.weight]",
            "[0]<stderr>:5!: [allreduce.c_d1.bias]",
            "[0]<stderr>:epoch 2 step 10",
        ]
    )
    # THEN the ranks the others wait for are the culprits, and the summary quotes the list
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert verdict.culprit_ranks == (3, 5)
    assert "rank 3 never submitted [allreduce.c_d1.bias" in verdict.summary


def test_horovods_coordinator_checks_are_a_mismatch_in_its_words() -> None:
    # GIVEN the checks Horovod's coordinator makes of the ranks' requests for one tensor
    # (horovod/common/controller.cc), as TensorFlow and PyTorch raise them
    for line in (
        "[1,0]<stderr>:tensorflow.python.framework.errors_impl.FailedPreconditionError: "
        "Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [10], but another "
        "rank sent a tensor of shape [12].",
        "horovod.common.exceptions.HorovodInternalError: Mismatched MPI operations: One rank did "
        "an allreduce, but another rank did an allgather.",
        "Mismatched data types: One rank had type float32, but another rank had type int64.",
    ):
        verdict = _verdict([line])
        # THEN each is a collective mismatch that says which check found it
        assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH, line
        assert "Horovod's coordinator found the ranks disagree" in verdict.summary, line


def test_a_lone_dump_of_a_rank_waiting_for_its_data_is_cpu_stuck_with_low_confidence(
    tmp_path,
) -> None:
    from doctor.logs import read_logs

    dump = tmp_path / "py-spy-rank0.txt"
    dump.write_text(
        'Thread 0x7FA6E7C01740 (idle): "MainThread"\n'
        "    wait (threading.py:302)\n"
        "    get (queue.py:170)\n"
        "    __next__ (torch/utils/data/dataloader.py:741)\n"
        "    train (train.py:274)\n"
    )
    reading = read_logs([dump])
    verdict = classify(
        Evidence(
            job="t",
            ranks_expected=None,
            stacks=reading.stacks,
            logs=reading.events,
            log_files=reading.files,
        )
    )
    assert (verdict.hang_class, verdict.culprit_ranks, verdict.confidence.value) == (
        HangClass.CPU_STUCK,
        (0,),
        "low",
    )


# Rules from the held-out dev cases added later (docs/logs.md: which rule came from which case).


def test_a_duplicate_gpu_line_quoted_without_nccls_prefix_is_a_bootstrap_failure() -> None:
    # GIVEN NCCL's duplicate-GPU message as users quote it: no host:pid prefix, no NCCL WARN
    verdict = _verdict(["Duplicate GPU detected : rank 3 and rank 1 both on CUDA device 1b000"])
    # THEN two ranks share a GPU: communicator creation failed
    assert verdict.hang_class is HangClass.BOOTSTRAP


def test_nccl_failing_to_unlink_its_shared_memory_is_a_bootstrap_failure() -> None:
    # GIVEN NCCL's warning when something else removed its /dev/shm segment during init
    line = "node4:2210:2291 [1] NCCL WARN unlink shared memory /dev/shm/nccl-Xq81Pa failed, error: No such file or directory"
    # THEN it is read as a shared-memory set-up failure
    assert _verdict([line]).hang_class is HangClass.BOOTSTRAP


def test_an_mpich_bad_termination_banner_is_a_lost_rank_on_its_host() -> None:
    # GIVEN MPICH / Intel MPI's (Hydra's) report of a process that ended badly
    verdict = _verdict(
        [
            "===================================================================================",
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
            "=   RANK 5 PID 40113 RUNNING AT gpu-n07",
            "=   KILLED BY SIGNAL: 9 (Killed)",
            "===================================================================================",
        ]
    )
    # THEN a process on that host was lost
    assert verdict.hang_class is HangClass.RANK_LOSS
    assert "gpu-n07" in verdict.summary


def test_an_mpich_banner_with_an_exit_code_is_a_lost_rank() -> None:
    verdict = _verdict(
        [
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
            "=   PID 40113 RUNNING AT gpu-n07",
            "=   EXIT CODE: 139",
        ]
    )
    assert verdict.hang_class is HangClass.RANK_LOSS


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: invalid device ordinal",
        "RuntimeError: cuda runtime error (10) : invalid device ordinal at /pytorch/torch/csrc/cuda/Module.cpp:37",
    ],
)
def test_a_rank_asking_for_a_gpu_that_does_not_exist_is_a_launch_failure_not_a_gpu_fault(
    line: str,
) -> None:
    # GIVEN the error a rank raises when it selects a GPU index the machine does not have
    # (more ranks launched than GPUs visible) THEN the job failed at set-up
    assert _verdict([line]).hang_class is HangClass.BOOTSTRAP


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: system not yet initialized",
        "CUDA error at main.cu:41 code=802(cudaErrorSystemNotReady)",
    ],
)
def test_cuda_not_ready_on_an_nvswitch_host_is_a_set_up_failure(line: str) -> None:
    # GIVEN CUDA's error 802 (no fabric manager running on an NVSwitch machine)
    # THEN nothing could start: a set-up failure, not a GPU fault
    assert _verdict([line]).hang_class is HangClass.BOOTSTRAP


@pytest.mark.parametrize(
    "line",
    [
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        "RuntimeError: DataLoader worker (pid 16757) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
    ],
)
def test_a_data_loader_worker_out_of_shared_memory_is_a_set_up_problem_not_a_lost_rank(
    line: str,
) -> None:
    # GIVEN PyTorch's data loader naming too little shared memory as its worker's crash cause
    # WHEN the logs are judged THEN it is the host's set-up (/dev/shm), as NCCL's shm crash is
    assert _verdict([line]).hang_class is HangClass.BOOTSTRAP


def test_a_torchelastic_failure_line_cut_after_its_exit_code_is_still_a_lost_rank() -> None:
    # GIVEN torchelastic's failure line as pasted with its local_rank and pid fields lost
    verdict = _verdict(
        [
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rankroot/anaconda3/envs/x/bin/python"
        ]
    )
    # THEN the SIGKILL still says a rank was lost
    assert verdict.hang_class is HangClass.RANK_LOSS


# Host set-up failures told by one line with little NCCL detail (dev cases cudf-spark-7632,
# ucx-8229: the locked-memory limit; dekr-18: NCCL's bare system error).
@pytest.mark.parametrize(
    "line",
    [
        "ERROR mlx5_0: ibv_create_cq() failed: Cannot allocate memory.",
        "ibv_create_cq(cqe=4096) failed: Cannot allocate memory",
        "[1668693503.473099] [gpu7:1188443:0]          ib_log.c:246  UCX  ERROR mlx5_0: ibv_reg_mr() failed: Cannot allocate memory",
        "gpu7:4016:4653 [7] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory",
    ],
)
def test_an_rdma_object_that_cannot_get_memory_is_the_locked_memory_limit(line: str) -> None:
    # GIVEN a verbs object (memory region, completion or queue pair) refused for want of memory,
    # printed by UCX, by NCCL's IB wrapper, or quoted bare
    events = parse_text([line], "job.log").events
    # THEN it is a set-up failure of the host (ulimit -l), not a fault of the fabric
    assert [e.kind for e in events] == [kinds.BOOTSTRAP]
    assert "locked-memory" in events[0].text
    assert _verdict([line]).hang_class is HangClass.BOOTSTRAP


def test_a_verbs_call_that_fails_for_another_reason_is_still_the_network() -> None:
    # GIVEN NCCL's IB wrapper failing a call, not for want of memory
    line = "gpu7:4016:4653 [7] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out"
    # THEN it stays a transport fault
    assert [e.kind for e in parse_text([line], "job.log").events] == [kinds.NETWORK]


@pytest.mark.parametrize(
    "lines",
    [
        [
            "> RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8",
            "",
            "ncclSystemError: System call (socket, malloc, munmap, etc) failed.",
        ],
        ["RuntimeError: NCCL Error 2: unhandled system error"],
        ["node3: Test NCCL failure common.cu:777 'unhandled system error'"],
        # ROCm/rccl#328: RCCL's own name for it
        ["Rccl error, unhandled system error"],
        # pytorch/pytorch#23363: the reporter's paste, a letter lost
        [
            "fail to new train...e= NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:272, unhanled system error"
        ],
        # milabench#183: NCCL's internal error class, alone
        [
            "opt-1_3b.0 [stderr] DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, internal error, NCCL version 2.14.3",
            "opt-1_3b.0 [stderr] ncclInternalError: Internal check failed.",
        ],
        # torch 1.0-1.1's own wording of an NCCL result, for the other classes too
        ["RuntimeError: NCCL Error 3: internal error"],
    ],
)
def test_nccls_bare_system_error_is_a_set_up_failure(lines: list[str]) -> None:
    # GIVEN NCCL's system-error class with nothing more specific (a system call failed:
    # shared memory, a socket, locked memory), as PyTorch and NCCL's tests print it
    verdict = _verdict(lines)
    # THEN communicator creation failed on the host's set-up: bootstrap, not "the logs do not tell"
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert verdict.confidence is Confidence.LOW


@pytest.mark.parametrize(
    ("line", "advice"),
    [
        # HRNet/HRNet-Semantic-Segmentation#35: started with python, not a launcher
        (
            "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK expected, but not set",
            "torchrun",
        ),
        # EleutherAI/gpt-neox's tests: CUDA touched before the fork
        (
            "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method",
            "spawn",
        ),
        # pytorch/pytorch#139990: the Windows wheel's TCPStore
        (
            "RuntimeError: use_libuv was requested but PyTorch was build without libuv support",
            "USE_LIBUV=0",
        ),
        # scitix's cluster: an unattended driver upgrade without a reboot
        ("Failed to initialize NVML: Driver/library version mismatch", "reboot"),
        (
            "RuntimeError: Attempting to use the same CUDA device for multiple distinct roles/ranks within the same communicator.",
            "same GPU",
        ),
        ("RuntimeError: No CUDA GPUs are available", "sees no GPU"),
        (
            "RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
            "sees no GPU",
        ),
        (
            "RuntimeError: Default process group has not been initialized, please make sure to call init_process_group.",
            "init_process_group",
        ),
        ("RuntimeError: Distributed package doesn't have NCCL bulit in", "gloo"),
        # wenet-e2e/wenet#1097: 287 workers counted for a world of 6, a stale init file
        (
            "2022-05-09 22:30:27,597 INFO Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 (world_size=6, worker_count=287, timeout=0:30:00)",
            "earlier run",
        ),
        # huggingface/trl#3487 and #3706: NCCL's invalid usage, as torch and vLLM relay it
        ("RuntimeError: NCCL error: invalid usage when only one GPU", "NCCL refused the call"),
        (
            "ERROR 07-08 10:09:09 [core.py:583] RuntimeError: Worker failed with error 'NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)', please check the stack trace above for the root cause",
            "NCCL refused the call",
        ),
        (
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, invalid argument, NCCL version 2.14.3",
            "NCCL refused the call",
        ),
    ],
)
def test_a_set_up_failure_that_names_its_cause_says_what_to_do(line: str, advice: str) -> None:
    verdict = _verdict([line])
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert advice in verdict.summary


def test_a_set_up_failure_before_any_communicator_is_not_called_one() -> None:
    # GIVEN a process started without RANK, and NCCL refusing a call
    no_rank = "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK expected, but not set"
    refused = "RuntimeError: NCCL error: invalid usage when only one GPU"
    # THEN the first is the job's set-up, the second a communicator's creation
    assert _verdict([no_rank]).summary.startswith("the job's set-up failed")
    assert _verdict([refused]).summary.startswith("communicator creation failed")


@pytest.mark.parametrize(
    ("line", "advice"),
    [
        ("OSError: [Errno 28] No space left on device", "free or enlarge it"),
        ("ERROR mlx5_0: ibv_create_cq() failed: Cannot allocate memory.", "ulimit -l unlimited"),
        (
            "RuntimeError: DataLoader worker (pid 16757) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory.",
            "--shm-size",
        ),
    ],
)
def test_a_set_up_finding_that_says_its_cause_is_quoted_whole_without_other_advice(
    line: str, advice: str
) -> None:
    # GIVEN a line whose reading already says the host's cause and what to do about it
    summary = _verdict([line]).summary
    # THEN the summary says it whole, not cut and followed by advice about unreachable peers
    assert summary.startswith("the job's set-up failed: ") and advice in summary
    assert "MASTER_ADDR" not in summary


def test_words_of_a_set_up_message_in_other_prose_are_not_one() -> None:
    assert (
        _verdict(["usage: train.py [-h] (invalid usage of --nproc)"]).hang_class
        is HangClass.UNKNOWN
    )


def test_a_specific_nccl_warning_beside_the_system_error_still_names_the_cause() -> None:
    # GIVEN the system error together with the NCCL warning that says which call failed
    lines = [
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:290, unhandled system error",
        "node8:27106:27302 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-0-3-0 (size 4460544)",
    ]
    verdict = _verdict(lines)
    # THEN the verdict quotes the specific warning, and the class is bootstrap
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert "shared memory" in verdict.summary


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        # a failed RDMA work completion in libibverbs' words, printed by UCX or quoted bare:
        # the link between ranks, as NCCL's NET/IB error is
        (
            "[vegas25:11725:0] rc_verbs_iface.c:52   UCX  ERROR Send completion with error: transport retry counter exceeded",
            HangClass.NETWORK,
        ),
        ("ibv_poll_cq: wc status 'RNR retry counter exceeded'", HangClass.NETWORK),
        ("mlx5: got completion with error: remote access error", HangClass.NETWORK),
        # gardener/gardener-extension-provider-aws#1832: libfabric's EFA provider names a peer
        # its device cannot reach or that never completes the handshake (a security group
        # that blocks EFA traffic, the peer's hardware): the link, as a failed completion is
        (
            "Error 4126: Unresponsive receiver (reachable by EFA device but handshake failed)",
            HangClass.NETWORK,
        ),
        # openucx/ucx#10432: UCX's words for a reset connection (UCS_ERR_CONNECTION_RESET),
        # here after the local NIC failed: a reset, not an orderly close, so the link
        (
            "[2025-01-21 02:08:03.953] [warning] [channel.cc:123] desc:Failed to send RPC message request_id:19189 error:Connection reset by remote peer",
            HangClass.NETWORK,
        ),
        # pytorch/xla#3708 (dev): gRPC's channel to a TPU host whose server had died
        (
            'grpc_remote_master.cc:157] RPC failed with status = "UNAVAILABLE: Socket closed" and grpc_error_string = "{"description":"Error received from peer ipv4:172.16.96.110:51011"}"',
            HangClass.RANK_LOSS,
        ),
        # scitix/sichek#51: the driver says a GPU needs a reset before it runs anything
        # again (NV_ERR_RESET_REQUIRED, no Xid): the GPU, not the program
        (
            "[Sun Jan 11 09:52:01 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874 ",
            HangClass.GPU_HANG,
        ),
        # ENOSPC with nothing else: a full /dev/shm or disk, the host's set-up
        ("[QUESTION] OSError: [Errno 28] No space left on device", HangClass.BOOTSTRAP),
        (
            "RuntimeError: unable to write to file </torch_123_456>: No space left on device (28)",
            HangClass.BOOTSTRAP,
        ),
        # BUS_ADRERR (a mapped tmpfs page with no room behind it), quoted or as UCX's banner:
        # /dev/shm, not a crashed rank
        ("Bus error: nonexistent physical address with signal 7", HangClass.BOOTSTRAP),
        (
            "[gpu-node09:332629:0:332629] Caught signal 7 (Bus error: nonexistent physical address)",
            HangClass.BOOTSTRAP,
        ),
        # Gloo finding no address for its interface, a host name that does not resolve: the
        # store is never reached
        (
            "RuntimeError: [enforce fail at /root/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: bond1",
            HangClass.BOOTSTRAP,
        ),
        (
            "[W socket.cpp:697] [c10d] The IPv6 network addresses of (IDC-COMPUTER, 39067) cannot be retrieved (gai error: -3 - Temporary failure in name resolution).",
            HangClass.BOOTSTRAP,
        ),
        ("ValueError: host not found: Name or service not known", HangClass.BOOTSTRAP),
        # sgl-project/sglang#3226: Gloo's ranks cannot connect to each other while the
        # group is created (an unreachable advertised address)
        (
            "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
            HangClass.BOOTSTRAP,
        ),
        # NVIDIA/open-gpu-kernel-modules#446: the GPU's firmware stopped answering (Xid 119)
        ("Timeout waiting for RPC from GSP!", HangClass.GPU_HANG),
        (
            "[ 1234.5] NVRM: GPU0 Timeout waiting for RPC from GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
            HangClass.GPU_HANG,
        ),
        # ROCm/rccl#1034 and tinygrad#3343: ROCm's words for an illegal address
        (
            "Memory access fault by GPU node-8 (Agent handle: 0x23a5640) on address 0x7f461ec00000. Reason: Page not present or supervisor privilege",
            HangClass.GPU_HANG,
        ),
        # openucx/ucx#4224: ranks of one host in different user namespaces
        (
            " mm_posix.c:445  UCX  ERROR Error returned from open in attach. Permission denied. File name is: /proc/24149/fd/16",
            HangClass.BOOTSTRAP,
        ),
        (
            "  pml_ucx.c:383  Error: ucp_ep_create(proc=6) failed: Shared memory error",
            HangClass.BOOTSTRAP,
        ),
        # PyTorch's ROCm builds: HIP's error strings, as CUDA's are read
        ("RuntimeError: HIP error: an illegal memory access was encountered", HangClass.GPU_HANG),
        ("RuntimeError: HIP error: invalid device ordinal", HangClass.BOOTSTRAP),
        (
            "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
            HangClass.BOOTSTRAP,
        ),
        # torch finding no driver, CUDA failing to start, a torch built without CUDA
        (
            "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
            HangClass.BOOTSTRAP,
        ),
        (
            "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start.",
            HangClass.BOOTSTRAP,
        ),
        ("AssertionError: Torch not compiled with CUDA enabled", HangClass.BOOTSTRAP),
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 10020).",
            HangClass.BOOTSTRAP,
        ),
        # TensorRT-LLM's docs: an Open MPI without SLURM's PMI, started by srun
        ("PMI2_Init failed to initialize.  Return code: 14", HangClass.BOOTSTRAP),
    ],
)
def test_a_line_without_nccls_prefix_is_read_as_its_cause(line: str, cause: HangClass) -> None:
    # GIVEN one such line WHEN the logs are judged THEN the class is its cause
    assert _verdict([line]).hang_class is cause


def test_a_bus_error_of_another_code_is_still_a_lost_rank() -> None:
    # GIVEN a bus error whose code is not BUS_ADRERR WHEN judged THEN the crash is a lost rank
    line = "[gpu-node09:332629:0:332629] Caught signal 7 (Bus error: invalid address alignment)"
    assert _verdict([line]).hang_class is HangClass.RANK_LOSS


def test_a_driver_too_old_for_the_cuda_runtime_is_set_up_not_a_gpu_fault() -> None:
    # GIVEN NCCL's CUDA error 35 (the runtime needs a newer driver) WHEN judged THEN bootstrap
    line = "91: idgsim-gpu-001:47744:47744 [0] init.cu:674 WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'"
    assert _verdict([line]).hang_class is HangClass.BOOTSTRAP


_LEFT_LOOP = [  # pytorch/pytorch#141069: ranks 1-3 wait at work 19, rank 0 prints nothing
    "[rank2]:[E ProcessGroupNCCL.cpp:563] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=19, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800093 milliseconds before timing out.",
    "[rank2]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 2] Timeout at NCCL work: 19, last enqueued NCCL work: 19, last completed NCCL work: 18.",
    "[rank3]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 3] Timeout at NCCL work: 19, last enqueued NCCL work: 19, last completed NCCL work: 18.",
    "[rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 1] Timeout at NCCL work: 19, last enqueued NCCL work: 19, last completed NCCL work: 18.",
]


def test_the_one_rank_silent_while_all_others_time_out_left_the_loop() -> None:
    # GIVEN every rank but rank 0 timed out in collective 19, which each had issued, and
    # nothing says rank 0 was at work WHEN judged THEN rank 0 never issued it: a mismatch
    verdict = _verdict(_LEFT_LOOP)
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert verdict.culprit_ranks == (0,)


def test_the_silent_ranks_crash_outranks_the_left_loop_reading() -> None:
    # GIVEN the same timeouts and rank 0's own crash banner WHEN judged THEN rank 0 was lost
    crash = "[rank0]: Fatal Python error: Segmentation fault"
    assert _verdict([*_LEFT_LOOP, crash]).hang_class is HangClass.RANK_LOSS


def test_a_progress_bar_running_as_long_as_the_collective_waited_is_a_busy_process() -> None:
    # GIVEN huggingface/accelerate#314: a scan's bar at 30:01 when a rank's 30-minute
    # ALLREDUCE timed out (the bar's rate cut off, the watchdog line wrapped by the terminal)
    # WHEN judged THEN a process was at work in its own code: cpu_stuck
    lines = [
        " 35%|████████████████████████                    | 73811210851/208140108456 [30:01<57:14, 39115047.81",
        "[E ProcessGroupNCCL.cpp:485] [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802246 milliseconds before timing ",
        "out.",
    ]
    assert _verdict(lines).hang_class is HangClass.CPU_STUCK


def test_a_short_progress_bar_before_a_timeout_says_nothing() -> None:
    # GIVEN a bar that had run 2 minutes of a 30-minute wait WHEN judged THEN not cpu_stuck
    lines = [
        " 35%|████████                    | 7381/20814 [02:01<57:14, 39.81it/s]",
        "[E ProcessGroupNCCL.cpp:485] [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802246 milliseconds before timing out.",
    ]
    assert _verdict(lines).hang_class is not HangClass.CPU_STUCK


def test_ucxs_mlx5_retry_count_wording_is_the_network() -> None:
    # GIVEN UCX's mlx5 wording of the retry counter ('count', not 'counter') WHEN judged
    # THEN network
    line = "[master:19546:0:19546] ib_mlx5_log.c:139  Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)"
    assert _verdict([line]).hang_class is HangClass.NETWORK


_FIRST_SYNC = [  # EleutherAI/lm-evaluation-harness#1404: rank 0 waits at work 3, one element
    "[E ProcessGroupNCCL.cpp:474] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800668 milliseconds before timing out.",
    "[E ProcessGroupNCCL.cpp:488] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
]


def test_a_timeout_at_the_jobs_first_one_element_synchronisation_is_a_rank_still_starting() -> None:
    # GIVEN the only timeout is a one-element collective among the job's first few and
    # nothing else failed WHEN judged THEN a rank was still at its start-up work
    verdict = _verdict(_FIRST_SYNC)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.CPU_STUCK, ())


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("SeqNum=3,", "SeqNum=300,"),  # far into the job: not its start-up
        ("NumelIn=1, NumelOut=1", "NumelIn=466119168, NumelOut=466119168"),  # gradients
    ],
)
def test_a_late_or_large_timed_out_collective_is_not_read_as_start_up_work(
    old: str, new: str
) -> None:
    # GIVEN the same timeout later in the job, or on a large collective WHEN judged THEN
    # nothing says a rank was busy: not cpu_stuck
    lines = [_FIRST_SYNC[0].replace(old, new), _FIRST_SYNC[1]]
    assert _verdict(lines).hang_class is not HangClass.CPU_STUCK


def test_a_transport_error_beside_an_early_timeout_is_the_network() -> None:
    # GIVEN the early one-element timeout and NCCL's IB completion error WHEN judged THEN
    # the collective could not finish: network, not a rank at work
    error = "node1:91:123 [0] transport/net_ib.cc:881 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<49577> with error 12, opcode 1, len 0, vendor err 129"
    assert _verdict([*_FIRST_SYNC, error]).hang_class is HangClass.NETWORK


@pytest.mark.parametrize(
    "line",
    [
        "the handler Caught signal 15 (SIGTERM) and saved a checkpoint",
        "Killed the stale workers before the restart",
        "Killed processes: 0",
    ],
)
def test_the_words_of_a_crash_in_prose_are_not_a_crash(line: str) -> None:
    # GIVEN a sentence that uses a crash's words, not a runtime's or the shell's banner
    # WHEN read THEN no process exit is read from it
    assert [e.kind for e in parse_text([line], "job.log").events if e.kind == kinds.EXIT] == []


_STORE_WAIT = [  # axolotl-ai-cloud/axolotl#2684: rank 1 waits on the store while a bar runs
    "Tokenizing Prompts (num_proc=64):  92%|█████████▏| 328986/359152 [29:58<12:05, 41.59 examples/s][rank1]:[W516 14:34:56.853490829 socket.cpp:464] [c10d] waitForInput: poll for socket SocketImpl(fd=79, addr=[localhost]:41170, remote=[localhost]:29500) returned 0, likely a timeout",
    "[rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=79, addr=[localhost]:41170, remote=[localhost]:29500) timed out after 1800000ms",
]


def test_a_store_wait_as_long_as_a_running_progress_bar_is_a_busy_process() -> None:
    # GIVEN a rank's wait on the c10d store timed out after 30 minutes while a progress bar
    # had been running 29:58 WHEN judged THEN a process was at work in its own code
    verdict = _verdict(_STORE_WAIT)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.CPU_STUCK, ())
    assert "wait on the store" in verdict.summary


def test_a_store_wait_beside_a_short_bar_is_said_but_not_called_busy() -> None:
    # GIVEN the same store timeout but a bar that had run 2 minutes WHEN judged THEN not
    # cpu_stuck, and the verdict says a rank timed out waiting rather than that the logs
    # hold nothing
    lines = [_STORE_WAIT[0].replace("[29:58<", "[02:01<"), _STORE_WAIT[1]]
    verdict = _verdict(lines)
    assert verdict.hang_class is HangClass.UNKNOWN
    assert "rank 1 timed out waiting" in verdict.summary


def test_a_timeout_no_rule_places_is_reported_not_called_silence() -> None:
    # GIVEN huggingface/accelerate#223's line (torch's older watchdog line, no sequence
    # number), one rank's, with its broadcast made an all-reduce (a broadcast's is read by
    # log_broadcast_source), and nothing else WHEN judged THEN unknown, and the verdict
    # quotes the timeout instead of saying the logs hold no watchdog timeout
    line = ACCELERATE_223.replace("BROADCAST", "ALLREDUCE")
    verdict = _verdict([line])
    assert verdict.hang_class is HangClass.UNKNOWN
    assert "rank 2 timed out waiting" in verdict.summary
    assert "no watchdog" not in verdict.summary


def test_a_lone_traceback_is_quoted_not_called_absent() -> None:
    # GIVEN a traceback of the script's own error and nothing else WHEN judged THEN unknown
    # (nothing says a rank died of it or who waited), and the verdict quotes the exception
    # instead of listing a traceback among what the logs lack
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        '    x = batch["labels"]',
        "KeyError: 'labels'",
    ]
    verdict = _verdict(lines)
    assert verdict.hang_class is HangClass.UNKNOWN
    assert "raised KeyError: 'labels'" in verdict.summary
    assert "traceback" not in verdict.summary.split(";")[0]


@pytest.mark.parametrize(
    "lines",
    [
        # tloen/alpaca-lora#338 (dev): torchrun's failure table, every rank killed by SIGBUS
        [
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "Root Cause (first observed failure):",
            "[0]:",
            "  time      : 2023-04-14_06:35:35",
            "  host      : 32a68c302449",
            "  rank      : 0 (local_rank: 0)",
            "  exitcode  : -7 (pid: 3111)",
            "  error_file: <N/A>",
            "  traceback : Signal 7 (SIGBUS) received by PID 3111",
        ],
        [
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -7) "
            "local_rank: 0 (pid: 5275) of binary: /usr/bin/python"
        ],
        # huggingface/text-generation-inference#446 (dev): its launcher's words, shm unmounted
        ["Error: Download process was signaled to shutdown with signal 7"],
    ],
)
def test_a_bus_error_of_unnamed_kind_is_dev_shm_with_the_lost_rank_as_alternative(
    lines: list[str],
) -> None:
    # GIVEN ranks killed by SIGBUS and nothing naming the bus error's kind or another cause
    # WHEN the logs are judged THEN /dev/shm (bootstrap, low) first, the lost rank second
    verdict = _verdict(lines)
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert "/dev/shm" in verdict.summary
    events = tuple(parse_text(lines, "job.log").events)
    found = candidates(Evidence(job="t", ranks_expected=None, logs=events, log_files=("job.log",)))
    assert HangClass.RANK_LOSS in {c.hang_class for c in found}


def test_a_sigbus_beside_another_signal_is_still_a_lost_rank() -> None:
    # GIVEN one rank killed by SIGBUS and another by SIGSEGV WHEN judged THEN a crash, not /dev/shm
    lines = [
        "  traceback : Signal 7 (SIGBUS) received by PID 3111",
        "  traceback : Signal 11 (SIGSEGV) received by PID 3112",
    ]
    assert _verdict(lines).hang_class is HangClass.RANK_LOSS


def test_a_runtime_short_of_memory_in_dev_shm_is_a_set_up_failure() -> None:
    # GIVEN UCX's posix transport saying /dev/shm has not enough memory (openucx/ucx#1037, dev)
    # WHEN the logs are judged THEN the host's set-up (/dev/shm), not silence
    line = (
        "[1475682365.444036] [pod9:11912:0]       mm_posix.c:88   UCX  ERROR Not enough memory "
        "to write total of 4208440835 bytes. Please check that /dev/shm or the directory you "
        "specified has more available memory."
    )
    assert _verdict([line]).hang_class is HangClass.BOOTSTRAP


# NCCL's per-call trace (NCCL_DEBUG_SUBSYS=COLL), recorded in ROCm/rccl#429 (a dev case):
# three processes called AllReduce where the fourth called AllGather, at the same op counts.
RCCL_429 = [
    "h03r3n06:45006:45006 [0] NCCL INFO AllReduce: opCount 28c sendbuff 0x7f5dd32b2100 recvbuff 0x7f5dd32b2100 count 9984512 datatype 7 op 0 root 0 comm 0x55bef0201370 [nranks=4] stream 0x55bef0208bd0",
    "h03r3n06:45006:45006 [0] NCCL INFO AllReduce: opCount 28d sendbuff 0x7f5dd139b900 recvbuff 0x7f5dd139b900 count 8149504 datatype 7 op 0 root 0 comm 0x55bef0201370 [nranks=4] stream 0x55bef0208bd0",
    "h03r3n06:45012:45012 [2] NCCL INFO AllGather: opCount 28c sendbuff 0x7f1fd894af00 recvbuff 0x7f1ed1c00100 count 59205120 datatype 0 op 0 root 0 comm 0x559c24b55610 [nranks=4] stream 0x559c248a3630",
    "h03r3n06:45012:45012 [2] NCCL INFO AllGather: opCount 28d sendbuff 0x7f1fce20e500 recvbuff 0x7f2032532100 count 15360 datatype 0 op 0 root 0 comm 0x559c24b55610 [nranks=4] stream 0x559c248a3630",
]


def test_nccls_call_trace_with_different_ops_at_one_op_count_is_a_mismatch() -> None:
    # GIVEN two processes' COLL lines of one 4-rank communicator WHEN judged
    events = parse_text(RCCL_429, "job.log").events
    assert {(e.kind, e.op, e.seq) for e in events} == {
        (kinds.NCCL_CALL, "ALLREDUCE", 0x28C),
        (kinds.NCCL_CALL, "ALLREDUCE", 0x28D),
        (kinds.NCCL_CALL, "ALLGATHER", 0x28C),
        (kinds.NCCL_CALL, "ALLGATHER", 0x28D),
    }
    # THEN they called different collectives as the same operation: a collective mismatch
    verdict = _verdict(RCCL_429)
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert "45012" in verdict.summary


def test_op_counts_of_a_process_with_two_communicators_of_one_size_are_not_compared() -> None:
    # GIVEN each process holds two 2-rank communicators (its pointers cannot say which of
    # the other process's is the same one), and they call different ops at op count 0
    lines = [
        f"n{p}:{p}:{p} [0] NCCL INFO {op}: opCount 0 sendbuff 0x1 recvbuff 0x2 count {n} datatype 7 op 0 root 0 comm 0x{p}{c} [nranks=2] stream 0x3"
        for p, c, op, n in [
            (1, 1, "AllReduce", 3),
            (1, 2, "AllGather", 8),
            (2, 1, "AllGather", 8),
            (2, 2, "AllReduce", 3),
        ]
    ]
    # THEN no call is compared with another communicator's
    assert "log_nccl_calls" not in [c.rule for c in candidates(_evidence(lines))]


def _evidence(lines: list[str]) -> Evidence:
    events = parse_text(lines, "job.log").events
    return Evidence(job="t", ranks_expected=None, logs=tuple(events), log_files=("job.log",))


# huggingface/accelerate#223 (a dev case): one rank's watchdog line, in a broadcast, alone.
ACCELERATE_223 = "[E ProcessGroupNCCL.cpp:587] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1802157 milliseconds before timing out. "


def test_ranks_waiting_in_a_broadcast_with_nothing_else_failing_wait_for_a_busy_source() -> None:
    # GIVEN only broadcast timeouts WHEN judged THEN the source was at its own work
    assert _verdict([ACCELERATE_223]).hang_class is HangClass.CPU_STUCK


def test_a_broadcast_timeout_beside_a_transport_error_is_not_a_busy_source() -> None:
    # GIVEN the same timeout and a link NCCL reports failing WHEN judged
    lines = [
        ACCELERATE_223,
        "node1:1:2 [0] transport/net_ib.cc:1238 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<3> with error 12, opcode 2, len 1, vendor err 129",
    ]
    # THEN the broadcast rule stays silent: the failing link is the better reading
    assert "log_broadcast_source" not in [c.rule for c in candidates(_evidence(lines))]


# Lightning-AI/pytorch-lightning#19045 (a dev case): two ranks' traceback fragments, one in a
# broadcast, one in a barrier, and no timeout line in the excerpt.
LIGHTNING_19045 = [
    '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 1906, in broadcast',
    "    work = default_pg.broadcast([tensor], opts)",
    '  File "/opt/conda/lib/python3.8/site-packages/lightning/pytorch/strategies/ddp.py", line 290, in barrier',
    "    torch.distributed.barrier(device_ids=self.determine_ddp_device_ids())",
]


@pytest.mark.parametrize(
    ("frames", "mismatch"), [(LIGHTNING_19045, True), (LIGHTNING_19045[:2], False)]
)
def test_stacks_in_two_different_collectives_are_a_mismatch_even_without_a_timeout_line(
    frames: list[str], mismatch: bool
) -> None:
    # GIVEN frames of two torch.distributed primitives (or of one) and no watchdog line
    found = {c.rule: c.hang_class for c in candidates(_evidence(frames))}
    # THEN two primitives are ranks in different collectives; one alone says nothing of it
    assert (found.get("log_stack_calls") is HangClass.COLLECTIVE_MISMATCH) is mismatch
    assert (_verdict(frames).hang_class is HangClass.COLLECTIVE_MISMATCH) is mismatch


_TIME_LIMIT = "slurmstepd: error: *** STEP 55595933.0 ON maestro-3017 CANCELLED AT 2025-01-10T15:27:25 DUE TO TIME LIMIT ***"


def test_a_job_the_scheduler_cancelled_lost_its_ranks_from_outside() -> None:
    # GIVEN Lightning-AI/pytorch-lightning#20542: training advanced until SLURM cancelled the
    # step at its time limit, and a preemption said the same way
    lines = [
        _TIME_LIMIT,
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
        "[rank: 0] Received SIGTERM: 15",
    ]
    preempted = "slurmstepd: error: *** JOB 37361369 ON learnfair5146 CANCELLED AT 2021-03-15T18:00:46 DUE TO PREEMPTION ***"
    for logs in (lines, [preempted]):
        verdict = _verdict(logs)
        # THEN the ranks were lost to the scheduler, on the host it names, no rank blamed
        assert verdict.hang_class is HangClass.RANK_LOSS
        assert verdict.culprit_ranks == ()
        assert "from outside" in verdict.summary
    said = _verdict(lines).summary
    assert "time limit" in said and "maestro-3017" in said and "more time" in said
    assert "requeue;" in _verdict([preempted]).summary


@pytest.mark.parametrize(
    ("line", "why"),
    [
        # zai-org/ChatGLM2-6B#238: the terminal closed under a torchrun started without nohup
        (
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 8665 got signal: 1",
            "terminal",
        ),
        # modelscope/ms-swift#8193: the host stopped the job at a save
        (
            "W0304 01:00:36.891000 3535919 site-packages/torch/distributed/elastic/agent/server/api.py:725] Received Signals.SIGTERM death signal, shutting down workers",
            "outside the job",
        ),
        (
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 77 got signal: 2",
            "Ctrl-C",
        ),
        # keyu-tian/SparK#19: the exception's name alone, as the title quotes it
        ("torch.distributed.elastic.multiprocessing.api.SignalException", "outside the job"),
    ],
)
def test_torchruns_agent_stopped_by_a_signal_lost_its_ranks_from_outside(
    line: str, why: str
) -> None:
    verdict = _verdict([line])
    assert verdict.hang_class is HangClass.RANK_LOSS and verdict.culprit_ranks == ()
    assert why in verdict.summary


def test_a_hang_that_ran_into_the_time_limit_is_judged_by_its_hang() -> None:
    # GIVEN a watchdog timeout before the cancellation: the job had hung, the time limit
    # only ended it
    watchdog = "[rank2]:[E ProcessGroupNCCL.cpp:563] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=19, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800093 milliseconds before timing out."
    verdict = _verdict([watchdog, _TIME_LIMIT])
    # THEN the cancellation is not the verdict
    assert "cancelled" not in verdict.summary


@pytest.mark.parametrize(
    "line",
    [
        "slurmstepd: error: *** JOB 4242 ON gpu-node-17 CANCELLED AT 2025-03-01T02:11:09 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
        "JOB 4242 ON gpu-node-17 CANCELLED AT 2025-03-01T02:11:09 DUE TO NODE FAILURE",
        "srun: error: Node failure on gpu-node-17",
    ],
)
def test_a_node_failure_is_a_rank_lost_on_that_host(line: str) -> None:
    # GIVEN SLURM's node-failure line, as slurmstepd or srun prints it, or pasted bare
    verdict = _verdict([line])
    # THEN the job lost the ranks of that host: not a cancellation from outside
    assert verdict.hang_class is HangClass.RANK_LOSS
    assert "gpu-node-17" in verdict.summary and "from outside" not in verdict.summary


_CUT_TRACEBACK = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/opt/mace/cli/run_train.py", line 951, in run',
    "[rank0]:     distributed_model = DDP(model, device_ids=[local_rank])",
    '[rank0]:   File "/opt/torch/distributed/utils.py", line 281, in _verify_param_shape_across_processes',
]


@pytest.mark.parametrize(
    ("tail", "cut"),
    [
        ([], True),  # the excerpt ends inside the traceback (ACEsuit/mace#1215 as pasted)
        (["[rank0]: Epoch 3 done"], True),  # another line of the rank's before an exception
        (["[rank0]: RuntimeError: DDP expects same model across all ranks"], False),
    ],
)
def test_a_traceback_cut_before_its_exception_line_is_said_and_asked_for(
    tail: list[str], cut: bool
) -> None:
    # GIVEN a rank's traceback, with or without the exception line it ends with
    events = parse_text(_CUT_TRACEBACK + tail, "job.log").events
    found = [e for e in events if e.kind == kinds.TRACEBACK_CUT]
    # THEN a cut one is an event of its own, with its rank and last frame, and no exception
    assert bool(found) is cut
    if cut:
        assert found[0].rank == 0 and "utils.py:281 in _verify_param_shape" in found[0].text
        assert not [e for e in events if e.kind == kinds.EXCEPTION]
        # AND with nothing else in the logs the verdict says so and asks for the rest
        verdict = classify(
            Evidence(job="t", ranks_expected=None, logs=tuple(events), log_files=("job.log",))
        )
        assert "rank 0's traceback cut before its exception line" in verdict.summary
        assert verdict.missing_evidence[0] == "the traceback's last lines, to its exception"


def test_the_watchdogs_abort_alone_is_said_and_the_lines_before_it_asked_for() -> None:
    # GIVEN only ProcessGroupNCCL's abort, as a user pastes it (karpathy/nanoGPT#55's shape)
    lines = [
        "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to "
        "the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data.",
        "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire "
        "process down.",
    ]
    events = parse_text(lines, "job.log").events
    assert [e.kind for e in events] == [kinds.NCCL_ABORT]
    verdict = classify(
        Evidence(job="t", ranks_expected=None, logs=tuple(events), log_files=("job.log",))
    )
    # THEN the verdict says what the line is, and asks for the line before it
    assert "some NCCL operations failed or timed out" in verdict.summary
    assert verdict.missing_evidence[0].startswith("the lines before ProcessGroupNCCL's")
    # AND beside a first-sync timeout it changes nothing: it is the timeout's consequence
    assert _verdict(_FIRST_SYNC).hang_class is HangClass.CPU_STUCK


def test_a_traceback_cut_inside_the_jobs_set_up_is_a_set_up_failure() -> None:
    # GIVEN a rank's traceback that stops in DDP's constructor (its first broadcast, where
    # NCCL creates the communicator), the excerpt cut before the exception line
    verdict = _verdict(
        [
            "Traceback (most recent call last):",
            '  File "/work/train.py", line 221, in run',
            "    dp_model = torch.nn.parallel.DistributedDataParallel(",
            '  File "/env/lib/python3.8/site-packages/torch/nn/parallel/distributed.py", line 446, in __init__',
            "    self._sync_params_and_buffers(authoritative_rank=0)",
            '  File "/env/lib/python3.8/site-packages/torch/nn/parallel/distributed.py", line 457, in _sync_params_and_buffers',
        ]
    )
    # THEN it is a set-up failure, low, said to be a guess from where the traceback stops
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert verdict.confidence is Confidence.LOW
    assert "_sync_params_and_buffers" in verdict.summary and "a guess" in verdict.summary
    # AND a traceback cut in the training loop says nothing of the kind
    loop = _verdict(
        [
            "Traceback (most recent call last):",
            '  File "/work/train.py", line 80, in <module>',
            "    loss = model(batch)",
        ]
    )
    assert loop.hang_class is not HangClass.BOOTSTRAP


def test_nccls_external_library_errors_at_start_are_set_up_in_any_framework_words() -> None:
    # GIVEN ncclUnhandledCudaError as Paddle prints it, the only line of a failed start
    for line in (
        "OSError: (External)  Nccl error, unhandled cuda error  (at /paddle/paddle/fluid/platform/collective_helper.cc:100)",
        "paddle.fluid.core.EnforceNotMet: unhandled cuda error at [/workspace/paddle/fluid/platform/nccl_helper.h:93]",
    ):
        # THEN it is communicator set-up failing, not a GPU's fault
        assert _verdict([line]).hang_class is HangClass.BOOTSTRAP, line


def test_a_process_refused_a_peers_memory_is_the_hosts_set_up() -> None:
    # GIVEN cross-memory attach and pidfd_getfd refused by the kernel or the container
    for line in (
        "process_vm_readv delivered 0 instead of 480960, error message Operation not permitted",
        "RuntimeError: pidfd_getfd(pidfd=12, fd=40) failed with errno 1: Operation not permitted.",
    ):
        verdict = _verdict([line])
        # THEN it is the host's set-up, and the summary says which setting
        assert verdict.hang_class is HangClass.BOOTSTRAP, line
        assert "ptrace_scope" in verdict.summary


# A reset inside the rendezvous store's creation, as torch raises it from init_process_group.
RESET_IN_SET_UP = [
    "Traceback (most recent call last):",
    '  File "train.py", line 40, in <module>',
    '    dist.init_process_group(backend="nccl")',
    '  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 1177, '
    "in init_process_group",
    "    store, rank, world_size = next(rendezvous_iterator)",
    "RuntimeError: Connection reset by peer",
]


def test_a_connection_that_ends_while_the_rank_sets_up_is_the_set_up() -> None:
    # GIVEN a peer's reset raised inside init_process_group, before any collective ran
    # WHEN judged THEN the set-up failed (bootstrap), naming where, with the link beside it
    verdict = _verdict(RESET_IN_SET_UP)
    assert (verdict.hang_class, verdict.confidence) == (HangClass.BOOTSTRAP, Confidence.LOW)
    assert "still setting up (in init_process_group)" in verdict.summary
    # AND the same reset raised from the training loop is the peer's process ending
    loop = [line.replace("init_process_group", "all_reduce") for line in RESET_IN_SET_UP]
    assert _verdict(loop).hang_class is HangClass.RANK_LOSS


def test_an_exception_line_without_its_traceback_is_a_raised_exception() -> None:
    # GIVEN an excerpt that kept only a Python exception's last line
    events = parse_text(["[rank2]: RuntimeError: k not in range for dimension"], "j.log").events
    # THEN it is the exception rank 2 raised, and the verdict quotes it
    assert [(e.kind, e.rank) for e in events] == [(kinds.EXCEPTION, 2)]
    verdict = _verdict(["RuntimeError: k not in range for dimension"])
    assert "raised RuntimeError: k not in range for dimension" in verdict.summary
    # AND beside the others' timeouts it is the rank that raised and ended
    waits = [
        f"[rank{r}]:[E1121 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum=7, OpType=ALLTOALL, NumelIn=8, NumelOut=8, "
        "Timeout(ms)=600000) ran for 600061 milliseconds before timing out."
        for r in (0, 1)
    ]
    raised = _verdict(["[rank2]: RuntimeError: k not in range for dimension", *waits])
    assert (raised.hang_class, raised.culprit_ranks) == (HangClass.RANK_LOSS, (2,))
    # AND prose that merely mentions an error, or a line another parser reads, is not one
    assert not [
        e
        for e in parse_text(["the RuntimeError: went away after a restart"], "j.log").events
        if e.kind == kinds.EXCEPTION
    ]


def test_a_rank_that_raised_in_its_set_up_while_the_others_wait_is_the_set_up() -> None:
    raised = [
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "train.py", line 22, in <module>',
        '[rank2]:     dist.init_process_group(backend="nccl")',
        '[rank2]:   File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", '
        "line 1177, in init_process_group",
        "[rank2]:     default_pg, _ = _new_process_group_helper(",
        "[rank2]: RuntimeError: the group could not be created",
    ]
    wait = "[rank0]: torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /x"
    # GIVEN a rank's exception inside init_process_group while rank 0 waits on the store
    verdict = _verdict([*raised, wait])
    # THEN the set-up failed on that rank: bootstrap, naming it and where it was
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.BOOTSTRAP, (2,))
    assert "while setting up (in init_process_group)" in verdict.summary
    # AND so with no one waiting, where the launcher says a process exited with an error
    exited = "failed (exitcode: 1) local_rank: 2 (pid: 4042) of binary: /usr/bin/python3"
    assert _verdict([*raised, exited]).hang_class is HangClass.BOOTSTRAP
    # AND a process that a signal ended is still a lost rank, set-up or not
    crashed = exited.replace("exitcode: 1", "exitcode: -11")
    assert _verdict([*raised, crashed]).hang_class is HangClass.RANK_LOSS
    # AND the same exception from the training step is a rank that raised and ended
    in_step = [line.replace("init_process_group", "train_step") for line in raised]
    assert _verdict([*in_step, wait]).hang_class is HangClass.RANK_LOSS
    # AND once collectives had run (a peer waits in the 50th), a set-up frame tells nothing
    late = (
        "[rank0]:[E1121 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=50, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
        "Timeout(ms)=600000) ran for 600061 milliseconds before timing out."
    )
    assert _verdict([*raised, late]).hang_class is HangClass.RANK_LOSS


_OWN_ABORTS = [
    # glog's banner after C++ terminate, Open MPI's tag (PaddlePaddle/Paddle#4235's shape)
    [
        "Wed Sep 20 23:55:19 2017[1,68]<stderr>:terminate called after throwing an instance of 'std::system_error'",
        "Wed Sep 20 23:55:19 2017[1,68]<stderr>:*** SIGABRT (@0x1fb00005371) received by PID 21361 (TID 0x7fc457a4c700) from PID 21361; stack trace: ***",
    ],
    ["Fatal Python error: Aborted"],
    ['Thread 1 "pt_main_thread" received signal SIGABRT, Aborted.'],
    ["/root/run.sh: line 239:  3248 Aborted                 (core dumped) python train.py"],
]


_TIMEOUT = (
    "[rank1]:[E1120 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out."
)


@pytest.mark.parametrize("lines", _OWN_ABORTS)
def test_an_abort_the_rank_reports_is_its_own_loss_unless_a_timeout_came_first(
    lines: list[str],
) -> None:
    # GIVEN a process's own abort banner, and no timeout, NCCL error or lost peer it could
    # follow WHEN the logs are judged THEN the rank died of its own cause
    verdict = _verdict(lines)
    assert (verdict.hang_class, "died of its own cause" in verdict.summary) == (
        HangClass.RANK_LOSS,
        True,
    )
    # at medium confidence, saying what a cut excerpt would change
    assert verdict.confidence is Confidence.MEDIUM and "the watchdog's" in verdict.summary
    # AND after ProcessGroupNCCL's watchdog timed out a collective the abort is the
    # watchdog's: not a rank lost of its own cause
    assert "died of its own cause" not in _verdict([_TIMEOUT, *lines]).summary


def test_the_launchers_report_of_an_abort_alone_is_not_called_the_ranks_own() -> None:
    # GIVEN only torchrun's report that a rank ended on SIGABRT (what the watchdog's abort
    # looks like from outside) WHEN judged THEN it is not a rank lost of its own cause
    verdict = _verdict(["exitcode  : -6 (pid: 4711)"])
    assert verdict.hang_class is not HangClass.RANK_LOSS
    assert "ended on SIGABRT" in verdict.summary


_WAIT_289 = (
    "[rank1]:[E1129 11:56:57.205862232 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=289, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600024 milliseconds before timing out."
)


def test_an_exception_the_interpreter_ignored_ended_no_rank() -> None:
    # GIVEN the data loader's exception at shutdown that Python prints and goes on past,
    # with its traceback and without, beside a rank's timeout
    ignored = [
        "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f8b1234>",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/multiprocessing/process.py", line 160, in is_alive',
        "    assert self._parent_pid == os.getpid(), 'can only test a child process'",
        "AssertionError: can only test a child process",
        "Exception ignored in: <function Pool.__del__ at 0x7f00>",
        "ResourceWarning: unclosed running multiprocessing pool",
    ]
    events = parse_text([*ignored, _WAIT_289], "j.log").events
    # THEN neither is an exception a rank raised, and the verdict is not a rank's loss
    assert [e.kind for e in events if e.kind in (kinds.EXCEPTION, kinds.TRACEBACK_CUT)] == []
    assert _verdict([*ignored, _WAIT_289]).hang_class is not HangClass.RANK_LOSS
    # AND the same exception raised, not ignored, still is
    raised = ignored[1:5]
    assert [e.kind for e in parse_text(raised, "j.log").events] == [kinds.EXCEPTION]
    assert _verdict([*raised, _WAIT_289]).hang_class is HangClass.RANK_LOSS


def test_a_store_connect_retry_is_set_up_only_while_nothing_says_the_job_went_past_it() -> None:
    retry = (
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to "
        "[localhost]:29500 (errno: 99 - Cannot assign requested address)."
    )
    transport = (
        "node02:5678:5690 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from "
        "peer 10.0.0.1<43210> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
    )
    # GIVEN the store client's retry warning alone THEN the set-up is the guess, low
    alone = _verdict([retry])
    assert (alone.hang_class, alone.confidence) == (HangClass.BOOTSTRAP, Confidence.LOW)
    # AND it says a connection was still retried, not that a communicator failed
    assert alone.summary.startswith("the logs end with a connection still retried")
    # AND beside a timeout 289 collectives in, or a transport error, it is history
    assert _verdict([retry, _WAIT_289]).hang_class is not HangClass.BOOTSTRAP
    assert _verdict([retry, transport]).hang_class is HangClass.NETWORK
    # AND the client's final failure, in either release's words, is the set-up's still
    for failed in (
        "torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms "
        "while trying to connect to (10.0.0.1, 29500).",
        "RuntimeError: The client socket has failed to connect to any network address of "
        "(fake-host, 1234).",
    ):
        assert _verdict([retry, failed]).confidence is Confidence.MEDIUM
        assert _verdict([failed]).hang_class is HangClass.BOOTSTRAP


def test_a_retry_yields_to_anything_that_says_the_ranks_connected_or_something_failed() -> None:
    retry = "node01:1234:1290 [0] NCCL INFO Call to connect returned Connection refused, retrying"
    # GIVEN NCCL's retry, then NCCL's communicator up, or a rank's own error in its training
    connected = (
        "node01:1:1 [0] NCCL INFO comm 0x5 rank 0 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE"
    )
    raised = [
        "Traceback (most recent call last):",
        '  File "train.py", line 88, in step',
        "    bucket = self.buckets[id(param)]",
        "KeyError: 139779067778824",
    ]
    # THEN the retry is no finding of its own
    assert _verdict([retry, connected]).hang_class is not HangClass.BOOTSTRAP
    assert _verdict([retry, *raised]).hang_class is not HangClass.BOOTSTRAP
    # AND it outweighs no finding: the job stopped from outside is still that
    stopped = "WARNING:torch.distributed.elastic.agent.server.api:Received Signals.SIGHUP death signal, shutting down workers"
    assert _verdict([retry, stopped]).hang_class is HangClass.RANK_LOSS


def test_ddp_s_own_lines_say_the_ranks_connected_and_train() -> None:
    retry = (
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to "
        "[localhost]:12355 (errno: 99 - Cannot assign requested address)."
    )
    built = "I0607 16:10:35.739390 515217 logger.cpp:173] [Rank 0]: DDP Initialized with:"
    reducer = (
        "[rank0]:[I1129 03:30:09.884120417 reducer.cpp:1089] Reducer: comm-optimized memory "
        "allocator not found, using regular one"
    )
    timed = (
        "[rank3]:[W logger.cpp:337] Warning: Time stats are currently only collected for CPU "
        "and CUDA devices. Please refer to CpuTimer or CudaTimer for how to register timer for "
        "other device type. (function operator())"
    )
    # GIVEN DDP's C++ logger or reducer, which exist once DDP broadcast the model, or the
    # logger's warning from a training step's forward
    kinds_of = [
        [e.kind for e in parse_text([line], "j.log").events] for line in (built, reducer, timed)
    ]
    # THEN the first two say the ranks joined, the third that the job trains
    assert kinds_of == [[kinds.JOINED], [kinds.JOINED], [kinds.PROGRESS]]
    # AND another project's logger.cpp, or a line that only names the file, says nothing
    for other in (
        "I0101 00:00:00.000000 4242 logger.cpp:55] Starting server on port 8000",
        "see reducer.cpp:12) for details",
    ):
        assert kinds.JOINED not in [e.kind for e in parse_text([other], "j.log").events]
    # AND DDP's own error, from torch's reducer, still says it had been built
    raised = (
        "RuntimeError: Expected to have finished reduction in the prior iteration before "
        "starting a new one. (prepare_for_backward at "
        "../torch/csrc/distributed/c10d/reducer.cpp:1234)"
    )
    assert kinds.JOINED in [e.kind for e in parse_text([raised], "j.log").events]
    # AND after the store client's retries they say the ranks connected: no set-up failure
    for after in (built, reducer):
        assert _verdict([retry, after]).hang_class is not HangClass.BOOTSTRAP
    # AND with nothing failed, the training step says the job is healthy
    assert _verdict([retry, timed]).hang_class is HangClass.HEALTHY


def test_only_what_comes_after_a_retry_says_it_connected() -> None:
    retry = "node01:1234:1290 [0] NCCL INFO Call to connect returned Connection refused, retrying"
    registered = "All distributed processes registered. Starting with 4 processes"
    nccl_start = "node01:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"
    # GIVEN the rendezvous done and NCCL starting, then NCCL's own connection retried
    # THEN the retry is still the finding: nothing after it says NCCL connected
    for before in (registered, nccl_start):
        assert _verdict([before, retry]).hang_class is HangClass.BOOTSTRAP
    # AND the rendezvous done after it, in the same file, says the ranks connected
    assert _verdict([retry, registered]).hang_class is not HangClass.BOOTSTRAP


def test_a_rendezvous_that_ended_before_the_last_joining_does_not_end_it() -> None:
    # GIVEN a job whose first rendezvous completed, then whose agent announced joining anew
    # (a restart of its workers)
    lines = [
        "All distributed processes registered. Starting with 2 processes",
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group",
    ]
    # THEN the logs stop as the ranks join again: the rendezvous never completed
    assert _verdict(lines).hang_class is HangClass.BOOTSTRAP
    # AND once it completes again, it is no finding
    done = (
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers."
    )
    assert _verdict([*lines, done]).hang_class is not HangClass.BOOTSTRAP


@pytest.mark.parametrize(
    "progress",
    [
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8",
        ">>> done with compiling and loading fused kernels. Compilation time: 2.345 seconds",
        "node01:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f00 recvbuff 0x7f00 count 1 datatype 7 op 0 root 0 comm 0x55d4c8 [nranks=8] stream 0x5",
    ],
)
def test_lines_that_say_how_far_the_job_got_undo_no_finding(progress: str) -> None:
    deep = _WAIT_289.replace("SeqNum=289", "SeqNum=48211")
    # GIVEN a lone timeout deep into training, or a rank's abort with nothing before it
    for lines, finding in (
        ([deep], HangClass.COLLECTIVE_MISMATCH),
        (["Aborted (core dumped)"], HangClass.RANK_LOSS),
    ):
        assert _verdict(lines).hang_class is finding
        # WHEN the set-up's progress, a finished build or NCCL's call trace comes first
        # THEN the finding stands
        assert _verdict([progress, *lines]).hang_class is finding


def test_a_build_that_said_it_was_done_is_no_compilation_under_way() -> None:
    # GIVEN a JIT build that loaded, or Megatron's fused kernels that it says are done, then
    # a timeout long after
    torch_build = [
        "Emitting ninja build file /root/.cache/torch_extensions/fused_adam/build.ninja...",
        "Building extension module fused_adam...",
        "Loading extension module fused_adam...",
    ]
    megatron = [
        "> compiling and loading fused kernels ...",
        ">>> done with compiling and loading fused kernels. Compilation time: 2.345 seconds",
    ]
    # THEN neither is compile_warmup
    for done in (torch_build, megatron):
        assert _verdict([*done, _WAIT_289]).hang_class is not HangClass.COMPILE_WARMUP
    # AND a build whose last word is its start, while the collective timed out, still is
    assert _verdict([*torch_build[:2], _WAIT_289]).hang_class is HangClass.COMPILE_WARMUP


def _waits(*ranks: int) -> list[str]:
    return [_WAIT_289.replace("rank1", f"rank{r}").replace("Rank 1", f"Rank {r}") for r in ranks]


def test_a_close_a_rank_logs_after_its_own_timeout_is_the_aborts_aftermath() -> None:
    # GIVEN ranks 0, 1 and 3 timed out in collective 289 and rank 2 logged nothing
    silent = _verdict(_waits(0, 1, 3))
    assert (silent.hang_class, silent.culprit_ranks) == (HangClass.COLLECTIVE_MISMATCH, (2,))
    closes = [
        "[rank0]: torch.distributed.DistNetworkError: Connection reset by peer",
        "[rank0]: RuntimeError: NCCL Error 6: remote process exited or there was a network error",
        "[rank0]: ConnectionResetError: [Errno 104] Connection reset by peer",
    ]
    for close in closes:
        # WHEN rank 0 then logs a peer's close (its watchdog aborted the communicator)
        after = _verdict([*_waits(0, 1, 3), close])
        # THEN the verdict is the timeouts' still
        assert (after.hang_class, after.culprit_ranks) == (
            silent.hang_class,
            silent.culprit_ranks,
        ), close
    # AND a close logged before any timeout of its rank is still a peer gone, not the abort's
    before = _verdict([closes[0], *_waits(1, 3)])
    assert before.hang_class is not HangClass.COLLECTIVE_MISMATCH
    # AND NCCL's remote error raised in a collective is the peer's, never the raiser's death
    raised = [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/workspace/train.py", line 88, in train_step',
        "[rank0]:     dist.all_reduce(t)",
        closes[1],
    ]
    assert 0 not in _verdict([*_waits(0, 1, 3), *raised]).culprit_ranks


def test_an_xid_that_records_is_a_suspect_gpu_and_one_that_fails_is_the_cause() -> None:
    records = [
        "NVRM: Xid (PCI:0000:07:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row "
        "(0x0000000000fa1234) Marked for Remapping, reset gpu to activate.",
        "NVRM: Xid (PCI:0000:07:00): 92, pid='<unknown>', name=<unknown>, High single-bit ECC "
        "error rate",
    ]
    killed = [
        "  rank      : 2 (local_rank: 2)",
        "  exitcode  : -9 (pid: 4242)",
        "  traceback : Signal 9 (SIGKILL) received by PID 4242",
    ]
    for record in records:
        # GIVEN a row remapped, or corrected errors counted, alone or beside timeouts
        # THEN the GPU is the suspect, at low confidence, said to be a record
        for lines in ([record], [record, *_waits(0, 1)]):
            suspect = _verdict(lines)
            assert (suspect.hang_class, suspect.confidence) == (HangClass.GPU_HANG, Confidence.LOW)
            assert "a record, not a failure" in suspect.summary
        # AND a rank killed outweighs it
        assert _verdict([record, *killed]).hang_class is HangClass.RANK_LOSS
    # AND an Xid that fails (contained ECC: the process on it ended) is the cause, high
    failed = records[0].replace(": 63,", ": 94,")
    cause = _verdict([failed, *killed])
    assert (cause.hang_class, cause.confidence) == (HangClass.GPU_HANG, Confidence.HIGH)


def test_an_illegal_instruction_after_the_set_up_failed_is_the_set_up_not_a_lost_rank() -> None:
    # GIVEN NCCL's set-up failing, then the process trapping on itself (a C++ runtime's
    # assertion built as ud2)
    lines = [
        "node1:4242:4242 [0] init.cc:1582 NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'",
        "Illegal instruction (core dumped)",
    ]
    # THEN the set-up is the story; alone, the trap is the rank's own end
    assert _verdict(lines).hang_class is HangClass.BOOTSTRAP
    alone = _verdict(lines[1:])
    assert (alone.hang_class, alone.confidence) == (HangClass.RANK_LOSS, Confidence.MEDIUM)


@pytest.mark.parametrize(
    "line",
    [
        "[ 8765.432109] python[24680]: segfault at 0 ip 00007f1e2a2a1b2c sp 00007ffd4c3b2a10 error 4 in libc.so.6[7f1e2a228000+195000]",
        "[ 8765.432109] traps: pt_main_thread[24680] general protection fault ip:7f1e2a2a1b2c sp:7ffd4c3b2a10 error:0 in libtorch_cuda.so[7f1d00000000+40000000]",
    ],
)
def test_the_kernels_line_for_a_crashed_process_names_its_pid(line: str) -> None:
    (event,) = [e for e in parse_text([line], "dmesg.txt").events if e.kind == kinds.EXIT]
    assert (event.pid, event.code) == (24680, -11)


def test_a_data_loader_worker_a_signal_ended_ends_its_rank() -> None:
    (event,) = parse_text(
        ["[rank2]: RuntimeError: DataLoader worker (pid 24680) is killed by signal: Killed. "],
        "job.log",
    ).events
    # the worker's pid is not the rank's: only the label names who ended
    assert (event.kind, event.rank, event.pid, event.code) == (kinds.EXIT, 2, None, -9)


def test_a_retry_after_the_job_ran_collectives_is_as_weak_as_one_before() -> None:
    retry = "[rank1]:node01:1234:1290 [0] NCCL INFO Call to connect returned Connection refused, retrying"
    stats = "[Rank 1 / 4] Training Net unused_parameter_size=0"
    # GIVEN rank 1's NCCL retry alone, and after its DDP statistics said collectives had run
    strengths = [
        [c.strength for c in candidates(_evidence(lines)) if c.rule == "log_bootstrap"]
        for lines in ([retry], [stats, retry])
    ]
    # THEN the retry weighs the same in both: a retry names no cause, whenever it came
    assert strengths[0] == strengths[1] and len(strengths[0]) == 1


def test_a_line_said_again_after_others_is_told_at_its_latest_time() -> None:
    retry = "node01:1234:1290 [0] NCCL INFO Call to connect returned Connection refused, retrying"
    connected = (
        "node01:1:1 [0] NCCL INFO comm 0x5 rank 0 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE"
    )
    # GIVEN rank 0's NCCL retry, its communicator up, then the same retry again, word for word
    lines = ["[rank0]:" + line for line in (retry, retry, connected, retry, retry)]
    # THEN the retry is kept where it came last (the repeat right after it is not)
    kept = [e.kind for e in parse_text(lines, "job.log").events]
    assert kept == [kinds.CONNECT_RETRY, kinds.RANK_INFO, kinds.CONNECT_RETRY]
    # AND nothing after that last retry says the ranks connected: it is the finding
    assert _verdict(lines).hang_class is HangClass.BOOTSTRAP
    # AND a failure's line said twice is still one event
    crash = "Segmentation fault (core dumped)"
    assert len(parse_text([crash, connected, crash], "job.log").events) == 2


def test_a_set_up_warning_before_collectives_that_ran_does_not_explain_a_timeout() -> None:
    # GIVEN NCCL's topology warning (healthy jobs on VMs print it at start), under a rank's
    # label or none, beside that rank's timeout 289 collectives in
    warned = "node01:1234:1234 [1] NCCL WARN Could not find real path of /sys/class/pci_bus/0000:00"
    for label in ("", "[rank1]:"):
        # THEN the timeout is unexplained, not the set-up's failure
        assert _verdict([label + warned, _WAIT_289]).hang_class is HangClass.UNKNOWN
    # AND alone, it is still the set-up's, low
    alone = _verdict([warned])
    assert (alone.hang_class, alone.confidence) == (HangClass.BOOTSTRAP, Confidence.LOW)
