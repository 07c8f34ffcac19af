"""Warnings working jobs print (``doctor.logs.harmless``): recognised, kept out of the word
model, and logs holding nothing else read as a working job's."""

from __future__ import annotations

import pytest
from verdict.test_log_rules import WATCHDOG, judge

from doctor.logs import harmless, kinds
from doctor.logs.parse import parse_text
from doctor.model import Confidence, HangClass

SAMPLES = (
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
    "avoid your system being overloaded, please further tune the variable for optimal "
    "performance in your application as needed.",
    "[W reducer.cpp:1050] Warning: find_unused_parameters=True was specified in DDP "
    "constructor, but did not find any unused parameters. This flag results in an extra "
    "traversal of the autograd graph every iteration, which can adversely affect performance.",
    "[rank0]:[W106 17:08:04.766730880 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 0]  "
    "using GPU 0 to perform barrier as devices used by this process are currently unknown. "
    "This can potentially cause a hang if this rank to GPU mapping is incorrect.",
    "[W ProcessGroupNCCL.cpp:1569] Rank 1 using best-guess GPU 1 to perform barrier as devices "
    "used by this process are currently unknown. This can potentially cause a hang if this "
    "rank to GPU mapping is incorrect.",
    "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py:4807: UserWarning: "
    "No device id is provided via `init_process_group` or `barrier `. Using the current "
    "device set by the user.",
    "[W socket.cpp:697] [c10d] The client socket cannot be initialized to connect to "
    "[node7.cluster]:3442 (errno: 97 - Address family not supported by protocol).",
    "node1:2048:2048 [0] NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin_v6 symbol.",
    "/opt/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create 16 "
    "worker processes in total. Our suggested max number of worker in current system is 8.",
    "/opt/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: the "
    "use_reentrant parameter should be passed explicitly.",
    "huggingface/tokenizers: The current process just got forked, after parallelism has "
    "already been used. Disabling parallelism to avoid deadlocks...",
    "WARNING:__main__:",
    "[W reducer.cpp:325] Warning: Grad strides do not match bucket view strides. This may "
    "indicate grad was not created according to the gradient layout contract.",
    "Warning: Permanently added 'worker-3.train' (ED25519) to the list of known hosts.",
    "WARNING: Open MPI tried to bind a process but failed.  This is a",
    "[1700000000.123456] [gpu07:4242:0]      ib_device.c:482  UCX  WARN  IB Async event on "
    "mlx5_2: client reregistration on port 1",
    "Multiple GPUs are visible to each MPI rank, but the number of GPUs per socket or node has "
    "not been provided.",
)
"""One line of each warning, as its source prints it."""

LOOKALIKES = (
    "ddp: find_unused_parameters=True",  # a setting, not DDP's note
    "[W socket.cpp:697] [c10d] The client socket cannot be initialized to connect to "
    "[node7.cluster]:29500 (errno: 113 - No route to host).",  # a real set-up failure
    "WARNING:__main__: rank 3 lost its GPU",  # a record with a message
    "NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",  # the net plugin itself
    "[1700000000.123456] [gpu07:4242:0]      ib_device.c:482  UCX  ERROR IB Async event on "
    "mlx5_2: port error on port 1",  # a port that went down
    "Open MPI failed to bind internal memory",  # not the binding warning's own words
)


def test_every_warning_is_recognised_and_every_entry_has_a_sample() -> None:
    # GIVEN one line of each catalogued warning, and lines that only resemble them
    found = {harmless.find(line) for line in SAMPLES}
    # THEN each is found, every entry of the catalogue by some line
    assert None not in found
    assert found == set(harmless.WARNINGS)
    # AND the look-alikes are not
    assert [harmless.find(line) for line in LOOKALIKES] == [None] * len(LOOKALIKES)


@pytest.mark.parametrize("line", SAMPLES)
def test_a_harmless_warning_is_told_and_gives_the_word_model_no_word(line: str) -> None:
    parsed = parse_text([line], "pasted.log")
    assert [e.kind for e in parsed.events] == [kinds.HARMLESS]
    assert parsed.words == set()


def test_logs_of_harmless_warnings_alone_are_a_working_job_s() -> None:
    # GIVEN torchrun's banner as it prints it, and DDP's note on unused parameters
    lines = ["WARNING:__main__:", "*" * 41, SAMPLES[0], "*" * 41, SAMPLES[1]]
    verdict = judge(lines)
    # THEN the job is a working one, at low confidence, saying why each warning is harmless
    assert (verdict.hang_class, verdict.confidence) == (HangClass.HEALTHY, Confidence.LOW)
    assert "torchrun's banner" in verdict.summary and ": ;" not in verdict.summary
    assert "no parameter went unused" in verdict.summary


@pytest.mark.parametrize("warning", [SAMPLES[2], SAMPLES[3], SAMPLES[7]])
def test_a_warning_that_names_a_hang_proves_no_working_job_and_says_what_to_check(
    warning: str,
) -> None:
    # GIVEN torchrun's banner and a warning that names a hang it can come before (the
    # barrier's guess of its GPU: "This can potentially cause a hang"; the DataLoader's
    # worker count: "might get DataLoader running slow or even freeze")
    verdict = judge(["WARNING:__main__:", "*" * 41, SAMPLES[0], "*" * 41, warning])
    # THEN the logs are no working job's for sure: unknown, saying where it hangs and what
    # to check, never healthy
    entry = harmless.find(warning)
    assert entry is not None and entry.hang_if
    assert verdict.hang_class is HangClass.UNKNOWN
    assert entry.hang_if in verdict.summary


@pytest.mark.parametrize(
    "fault",
    [
        WATCHDOG.format(r=1, seq=42, op="ALLREDUCE"),
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "srun: error: node3: task 2: Killed",
    ],
)
def test_a_harmless_warning_beside_a_fault_says_nothing_of_health(fault: str) -> None:
    assert judge([SAMPLES[2], fault]).hang_class is not HangClass.HEALTHY
