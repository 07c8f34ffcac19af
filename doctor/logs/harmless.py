"""Warnings that working jobs print, known from the sources that print them.

A user who pastes the only lines that looked alarming often pastes one of these: torchrun's
``OMP_NUM_THREADS`` banner, DDP's note that no parameter went unused, ProcessGroupNCCL's
guess of a barrier's GPU. Their words (``hang``, ``failed``, ``deadlocks``) are a fault's
words, so the word model read them as one. Each is recognised here with why it is harmless;
the reader keeps no word of it, and logs that hold nothing else are a working job's
(``doctor.verdict.log_rules``), unless one of them names a hang it can come before (the
barrier's guess: "This can potentially cause a hang"), which is then said with what to check.

Only warnings whose message says by itself that nothing failed: not a retried connection
(``CONNECT_RETRY``, which a failing set-up prints too) nor ``destroy_process_group() was not
called`` (``EXITING``: what hangs after it hangs in the teardown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Harmless:
    key: str
    """A literal every line of the warning holds: the cheap test before the pattern."""
    pattern: re.Pattern[str]
    why: str
    """Why a working job prints it, said to the user."""
    hang_if: str = ""
    """When the warning itself names a hang it can come before: where that is so, and what
    to check. Logs holding it prove no working job (``doctor.verdict.log_rules``)."""


WARNINGS = (
    Harmless(
        "OMP_NUM_THREADS",
        re.compile(r"Setting OMP_NUM_THREADS environment variable for each process to be 1"),
        "torchrun's banner whenever it starts more than one process per node "
        "(torch/distributed/run.py)",
    ),
    Harmless(
        "find_unused_parameters",
        re.compile(r"find_unused_parameters=True was specified in DDP constructor, but did not"),
        "DDP's note that no parameter went unused, printed after a backward pass ran "
        "(reducer.cpp): a cost, not a fault",
    ),
    Harmless(
        "to perform barrier",
        re.compile(
            r"using (?:best-guess )?GPU \d{1,4} to perform barrier as devices used by this "
            r"process are currently unknown"
        ),
        "ProcessGroupNCCL's guess of the GPU a barrier runs on (ProcessGroupNCCL.cpp): "
        "harmless where each rank set its own device",
        "two ranks that share one GPU hang in that barrier (check that each rank calls "
        "torch.cuda.set_device(local_rank), or passes device_id to init_process_group, "
        "before its first collective)",
    ),
    Harmless(
        "No device id is provided",
        re.compile(r"No device id is provided via `init_process_group` or `barrier"),
        "c10d's note that a barrier uses the device the rank set (distributed_c10d.py)",
    ),
    Harmless(
        "errno: 97",
        re.compile(r"The client socket cannot be initialized to connect to .{1,300}\(errno: 97"),
        "c10d's store client trying IPv6 on a host without it, before IPv4 (socket.cpp)",
    ),
    Harmless(
        "ncclCollNetPlugin",
        re.compile(r"NET/Plugin ?: Failed to find ncclCollNetPlugin"),
        "NCCL's net plugin has no CollNet (SHARP) symbols: NCCL runs without CollNet "
        "(plugin loading in NCCL's net.cc)",
    ),
    Harmless(
        "worker processes in total",
        re.compile(r"This DataLoader will create \d{1,6} worker processes in total"),
        "the DataLoader's advice on its worker count (torch/utils/data/dataloader.py)",
        "more workers than the host has CPUs can freeze the loader, as the warning says (a "
        "rank stuck in its data loader: lower num_workers and look at its stack)",
    ),
    Harmless(
        "use_reentrant",
        re.compile(r"the use_reentrant parameter should be passed explicitly"),
        "activation checkpointing's deprecation notice (torch/utils/checkpoint.py)",
    ),
    Harmless(
        "Disabling parallelism to avoid deadlocks",
        re.compile(r"The current process just got forked, after parallelism has already"),
        "Hugging Face tokenizers turning their own threads off in forked data-loader "
        "workers, which prevents the deadlock it names",
    ),
    Harmless(
        "WARNING:",
        re.compile(r"^\s*WARNING:[\w.]{1,100}:\s*$"),
        "a logging record's prefix alone: its message follows on the next lines",
    ),
    Harmless(
        "to the list of known hosts",
        re.compile(r"Warning: Permanently added .{1,300} to the list of known hosts\."),
        "ssh's note that it saved a host's key on first connecting (sshconnect.c), which "
        "launchers over ssh (mpirun, pdsh, DeepSpeed's runner) print for every new host",
    ),
    Harmless(
        "tried to bind a process but failed",
        re.compile(r"Open MPI tried to bind a process but failed\.  ?This is a"),
        "Open MPI's binding warning, which goes on to say it is a warning only and the job "
        "continues (its binding help text): a cost, not a fault",
    ),
    Harmless(
        "client reregistration",
        re.compile(r"UCX +WARN +IB Async event on \w{1,64}: client reregistration on port"),
        "the subnet manager asking an InfiniBand port to register again, which UCX handles "
        "and now logs as a diagnostic (UCX pull request 7349)",
    ),
    Harmless(
        "Multiple GPUs are visible to each MPI rank",
        re.compile(r"Multiple GPUs are visible to each MPI rank, but the number of GPUs per"),
        "AMReX's note that it guessed the rank-to-GPU mapping: a cost at most",
    ),
    Harmless(
        "Grad strides do not match bucket view strides",
        re.compile(r"Grad strides do not match bucket view strides"),
        "DDP's performance note on gradient layouts (reducer.cpp)",
    ),
)


def find(text: str) -> Harmless | None:
    """The warning ``text`` holds, or None where it is none of these."""
    for warning in WARNINGS:
        if warning.key in text and warning.pattern.search(text):
            return warning
    return None
