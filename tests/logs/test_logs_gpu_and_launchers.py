"""Kernel Xid lines, nvidia-smi, CUDA errors, launcher exits and tracebacks -> events."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.evidence import Evidence
from doctor.logs import kinds, parse_lines, parse_text
from doctor.model import HangClass
from doctor.verdict.classify import classify

REAL = Path(__file__).parents[1] / "fixtures" / "real"


def test_xid_lines_from_dmesg_and_journalctl() -> None:
    events = parse_lines(
        [
            "[ 6523.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has "
            "fallen off the bus.",
            "Mar 01 12:00:00 gpu-node-7 kernel: NVRM: Xid (PCI:0000:b7:00): 48, pid='<unknown>', "
            "name=<unknown>, An uncorrectable double bit error (DBE) has been detected",
            "[ 100.2] NVRM: Xid (PCI:0000:18:00): 13, pid=777, Graphics SM Warp Exception",
        ]
    )
    assert [(e.kind, e.code, e.device, e.pid, e.host) for e in events] == [
        (kinds.GPU_FAULT, 79, "0000:3b:00", 1234, ""),
        (kinds.GPU_FAULT, 48, "0000:b7:00", None, "gpu-node-7"),
        # AND an Xid a program raises is a CUDA error of that rank, not a broken GPU
        (kinds.CUDA_ERROR, 13, "0000:18:00", 777, ""),
    ]


def test_several_line_driver_notices() -> None:
    for case, name in (
        ("nvsentinel-155-fallen-off-bus", "dmesg.txt"),
        ("aicr-1858-h100-probe-failed", "dmesg.txt"),
    ):
        text = (REAL / case / name).read_text().splitlines()
        faults = [e for e in parse_lines(text) if e.kind == kinds.GPU_FAULT]
        assert faults and faults[0].device, case


def test_nvidia_smi_table_reports_gpus_in_error() -> None:
    table = [
        "+-----------------------------------------------------------------------------+",
        "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |",
        "|-------------------------------+----------------------+----------------------+",
        "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |",
        "|===============================+======================+======================|",
        "|   0  NVIDIA A100-SXM...  On   | 00000000:07:00.0 Off |                    0 |",
        "| N/A   32C    P0    63W / 400W |      4MiB / 81920MiB |      0%      Default |",
        "+-------------------------------+----------------------+----------------------+",
        "|   1  NVIDIA A100-SXM...  On   | 00000000:0F:00.0 Off |                    2 |",
        "| N/A   33C    P0    61W / 400W |      4MiB / 81920MiB |      0%      Default |",
        "+-------------------------------+----------------------+----------------------+",
        "|   2  NVIDIA A100-SXM...  On   | 00000000:47:00.0 Off |                 ERR! |",
        "|ERR!  ERR!   ERR!   ERR! / ERR!|      4MiB / 81920MiB |    ERR!      Default |",
        "+-------------------------------+----------------------+----------------------+",
        "Unable to determine the device handle for GPU 0000:B7:00.0: Unknown Error",
    ]
    faults = [e for e in parse_lines(table) if e.kind == kinds.GPU_FAULT]
    assert [e.device for e in faults] == ["0000:0f:00", "0000:47:00", "0000:b7:00"]


def test_cuda_errors_by_whose_fault() -> None:
    events = parse_lines(
        [
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            # as users paste them: the space after the colon lost, and an error quoted in a
            # JSON fragment that never closes (read as the line it is, not dropped)
            '{"detail": {"reason": "worker 3 stopped: CUDA error:uncorrectable ECC error',
            "see the worker log",
            "RuntimeError: CUDA error:an illegal memory access was encountered",
            # CUDA's own strings without "CUDA error:" (old torch's THCudaCheck, a C++ what())
            "THCudaCheck FAIL file=THCTensorCopy.cu line=87 error=77 : an illegal memory access "
            "was encountered",
            "  what():  Error at: CUDAUtils.cpp:22: unspecified launch failure",
            "provided PTX was compiled with an unsupported toolchain",
        ]
    )
    assert [e.kind for e in events if e.kind != kinds.EXCEPTION] == [
        kinds.GPU_FAULT,
        kinds.CUDA_ERROR,
        kinds.OOM,
        kinds.GPU_FAULT,
        kinds.CUDA_ERROR,
        kinds.CUDA_ERROR,
        kinds.CUDA_ERROR,
        kinds.BOOTSTRAP,
    ]


def test_cuda_errors_that_say_the_call_does_not_fit_the_machine_are_set_up() -> None:
    # GIVEN CUDA errors of calls the driver, the build or the GPUs refuse, in the words of
    # NCCL (old and new), vLLM's custom all-reduce, TensorRT-LLM and NCCL's NVLS set-up
    refused = [
        "gpu1:4411:4411 [0] NCCL WARN Cuda failure 1 'invalid argument'",
        "host:77:77 [3] NCCL WARN Cuda failure 'named symbol not found'",
        "host:77:77 [3] NCCL WARN Cuda failure 'invalid resource handle'",
        "Failed: Cuda error /build/csrc/custom_all_reduce.cuh:307 'peer access is not supported "
        "between these two devices'",
        "[TensorRT-LLM][ERROR] CUDA runtime error in error: peer access is not supported between "
        "these two devices",
        "Failed to bind NVLink SHARP (NVLS) Multicast memory: CUDA error 401",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    ]
    # AND errors of a GPU's own work, and NCCL's own error class (not a CUDA message)
    stopped = [
        "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/x.cu:1",
        "host:77:77 [3] NCCL WARN Cuda failure 700 'an illegal memory access was encountered'",
        "RuntimeError: CUDA error: unspecified launch failure",
    ]
    # WHEN read THEN the first are set-up failures, the others stopped GPU work
    assert [e.kind for e in parse_lines(refused)] == [kinds.BOOTSTRAP] * len(refused)
    assert [e.kind for e in parse_lines(stopped)] == [kinds.CUDA_ERROR] * len(stopped)
    nccl_class = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:260, unhandled cuda error"
    assert kinds.CUDA_ERROR not in {e.kind for e in parse_lines([nccl_class])}


def test_a_refused_cuda_call_inside_nccl_is_set_up_with_its_own_advice() -> None:
    # GIVEN NCCL's NVLS set-up failing on a driver without multicast, the job's only failure
    verdict = classify(
        Evidence(
            job="t",
            ranks_expected=None,
            logs=tuple(
                parse_lines(
                    [
                        "[rank0]:[W init.cc:1] NCCL WARN Cuda failure 1 'invalid argument'",
                        "torch.distributed.DistBackendError: NCCL error in: "
                        "ProcessGroupNCCL.cpp:1970, unhandled cuda error",
                    ]
                )
            ),
            log_files=("job.log",),
        )
    )
    # THEN it is a set-up failure whose advice is about versions and features, not a GPU
    assert verdict.hang_class is HangClass.BOOTSTRAP
    assert "not a failing GPU" in verdict.summary and "NCCL_NVLS_ENABLE=0" in verdict.summary


def test_torchelastic_summary_marks_the_first_failure() -> None:
    text = (REAL / "transformers-17106-preprocess-timeout" / "output.log").read_text()
    exits = [e for e in parse_lines(text.splitlines()) if e.kind == kinds.EXIT]
    assert [(e.rank, e.host, e.pid, e.code) for e in exits] == [
        (1, "ido-branch-s2n2k-pxvf4", 5733, 1)
    ]
    assert exits[0].text.startswith("first observed failure")


def test_launchers_say_which_task_died_and_how() -> None:
    events = parse_lines(
        [
            "srun: error: node-3: tasks 4-5: Killed",
            "srun: error: node-4: task 9: Exited with exit code 1",
            "mpirun noticed that process rank 3 with PID 1234 on node n1 exited on signal 9 "
            "(Killed).",
            "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with "
            "signal SIGSEGV",
            # horovodrun (through a shell: 128 + the signal) and Open MPI's first failure
            "Process 6 exit with status code 137.",
            "  Process name: [[30367,1],7]",
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=1234.0. Some of your "
            "processes may have been killed by the cgroup out-of-memory handler.",
            "[ 99.1] Out of memory: Killed process 4321 (python) total-vm:1kB",
            # Kubernetes' reason for a container its cgroup's OOM killer ended
            "      Reason:       OOMKilled",
            # Ray's memory monitor, which kills before the kernel's killer would
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on "
            "memory.",
            # Open MPI's report of a rank that called MPI_Abort
            "MPI_ABORT was invoked on rank 8 in communicator MPI_COMM_WORLD with errorcode 1.",
        ]
    )
    exits = [(e.rank, e.code, e.host) for e in events if e.kind == kinds.EXIT]
    assert exits == [
        (4, -9, "node-3"),
        (5, -9, "node-3"),
        (9, 1, "node-4"),
        (3, -9, "n1"),
        (2, -11, ""),
        (6, -9, ""),
        (7, None, ""),
        (8, None, ""),
    ]
    killed = [(e.pid, e.code) for e in events if e.kind == kinds.OOM]
    assert killed == [(None, kinds.KILLED), (4321, kinds.KILLED)] + [(None, kinds.KILLED)] * 2


@pytest.mark.parametrize(
    "line",
    [
        "ORTE has lost communication with a remote daemon.",
        "An MPI communication peer process has unexpectedly disconnected.",
        "Terminating process because the JAX distributed service detected fatal errors. This "
        "most likely indicates that another task died; see the other task logs for more details.",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
        "The actor died because its node has died. Node Id: 9f2d6c",
    ],
)
def test_a_runtime_that_says_a_process_of_the_job_is_gone_is_a_lost_rank(line: str) -> None:
    # GIVEN Open MPI's, JAX's or Ray's own word that a process (or its node) is gone
    # WHEN judged alone THEN a rank was lost, though the line does not say which
    verdict = classify(Evidence("job", None, logs=tuple(parse_lines([line]))))
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.RANK_LOSS, ())


def test_traceback_gives_the_exception_and_where_it_was_raised() -> None:
    lines = [
        "[rank2]: Traceback (most recent call last):",
        "[rank0]: Traceback (most recent call last):",
        '[rank2]:   File "/opt/train/loader.py", line 42, in next_batch',
        "[rank2]:     return self.items[key]",
        '[rank0]:   File "/opt/train/step.py", line 9, in step',
        "[rank2]: KeyError: 'shard-7'",
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970",
    ]
    found = [(e.rank, e.text) for e in parse_lines(lines) if e.kind == kinds.EXCEPTION]
    assert found == [
        (2, "KeyError: 'shard-7' [at loader.py:42 in next_batch]"),
        (
            0,
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970 "
            "[at step.py:9 in step]",
        ),
    ]


def test_pyspy_text_dump_becomes_a_stack() -> None:
    dump = [
        "Process 48211: python train.py",
        "Python v3.11.9 (/usr/bin/python3.11)",
        "",
        'Thread 48211 (idle): "MainThread"',
        "    wait (torch/distributed/distributed_c10d.py:2501)",
        "    all_reduce (torch/distributed/distributed_c10d.py:2495)",
        "    step (train.py:88)",
        'Thread 48300 (active+gil): "pin_memory"',
        "    _worker (torch/utils/data/_utils/pin_memory.py:54)",
    ]
    parsed = parse_text(dump, "rank_3.txt", file_rank=3)
    (stack,) = parsed.stacks
    assert (stack.rank, stack.pid, len(stack.threads)) == (3, 48211, 2)
    main, pin = stack.threads
    assert main.is_main and main.frames[1].name == "all_reduce" and pin.holds_gil


def test_a_driver_older_than_the_runtime_and_a_failed_fabric_manager_are_set_up_faults() -> None:
    # GIVEN torch's warning that the driver is older than its CUDA, and a host whose fabric
    # manager service exited with a failure after refusing the loaded driver's version
    events = parse_lines(
        [
            "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old "
            "(found version 10020).",
            "    Process: 812 ExecStart=/usr/bin/nv-fabricmanager -c /etc/fm.cfg "
            "(code=exited, status=1/FAILURE)",
            "NVIDIA GPU driver interface version 535.104.05 don't match with driver version "
            "535.86.10",
        ]
    )
    # THEN each is the job's set-up (bootstrap), not a GPU fault
    assert [e.kind for e in events] == [kinds.BOOTSTRAP] * 3


def test_the_iommu_refusing_a_gpus_dma_is_a_blocked_peer_to_peer_path() -> None:
    # GIVEN the kernel's IOMMU faults as Intel's and AMD's drivers print them, old and new
    # forms, and NCCL's init line that ties a bus id to a rank
    lines = [
        "[1478401.486621] DMAR: DRHD: handling fault status reg 502",
        "[1478401.486981] DMAR: [DMA Write] Request device [3b:00.0] fault addr cd139000 "
        "[fault reason 05] PTE Write access is not set",
        "DMAR: [DMA Write NO_PASID] Request device [0000:5e:00.0] fault addr 0x7f000 "
        "[fault reason 0x05] PTE Write access is not set",
        "[ 1234.5] AMD-Vi: Event logged [IO_PAGE_FAULT device=41:00.0 domain=0x000e "
        "address=0x7f000 flags=0x0020]",
        "Nov 27 01:02:03 node7 kernel: nvidia 0000:c1:00.0: AMD-Vi: Event logged "
        "[IO_PAGE_FAULT domain=0x000e address=0x7f000 flags=0x0020]",
    ]
    init = (
        "node7:4242:4300 [0] NCCL INFO comm 0x5581 rank 2 nranks 4 cudaDev 0 nvmlDev 0 "
        "busId 3b000 commId 0x1 - Init COMPLETE"
    )
    events = parse_text([init, *lines], "dmesg.txt").events
    faults = [e for e in events if e.kind == kinds.IOMMU_FAULT]
    # THEN each fault names the device by bus id (domain 0000 where the line has none)
    assert [e.device for e in faults] == ["0000:3b:00", "0000:5e:00", "0000:41:00", "0000:c1:00"]
    assert faults[-1].host == "node7"
    # AND the verdict is a blocked peer-to-peer path, on the rank whose GPU it is, with the fix
    verdict = classify(
        Evidence(job="t", ranks_expected=None, logs=tuple(events), log_files=("dmesg.txt",))
    )
    assert verdict.hang_class is HangClass.NETWORK
    assert verdict.culprit_ranks == (2,)
    assert "IOMMU refused DMA" in verdict.summary and "iommu=pt" in verdict.summary


@pytest.mark.parametrize(
    "line",
    [
        "Nov 21 10:02:11 node7 kernel: ixgbe 0000:01:00.0 eth0: NIC Link is Down",
        "kernel: mlx5_core 0000:3b:00.0 ens1f0: Link down",
        "kernel: mlx5_core 0000:3b:00.0: mlx5_port_module_event:1114:(pid 0): Port module "
        "event: module 0, Cable unplugged",
        "Nov 21 10:02:11 node7 systemd-networkd[812]: eth0: Lost carrier",
    ],
)
def test_a_nic_that_lost_its_link_is_the_network(line: str) -> None:
    # GIVEN a NIC driver's (or networkd's) word that a link went down WHEN judged alone
    verdict = classify(Evidence("job", None, logs=tuple(parse_lines([line]))))
    # THEN the network, saying which interface where the line names it
    assert verdict.hang_class is HangClass.NETWORK
    assert "lost its link" in verdict.summary or "unplugged" in verdict.summary


def test_a_link_that_came_up_or_an_nvlink_is_not_a_nic_down() -> None:
    lines = ["kernel: ixgbe 0000:01:00.0 eth0: NIC Link is Up 10 Gbps", "GPU 0: NVLink down"]
    assert not [e for e in parse_lines(lines) if e.kind == kinds.NETWORK]
