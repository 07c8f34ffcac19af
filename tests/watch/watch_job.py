"""One rank of the watch test job, run by ``nccl-doctor launch --wrap --watch -- python THIS``.

A gloo loop that pings every step. ``FAULT=kind:rank:step`` injects ``kind`` on
initial rank ``rank`` at ``step``:

* ``wrong_collective``: all_gather where the others all_reduce, in every iteration (a bug);
* ``dataloader``: a loader that never delivers, once;
* ``gil``: a pure-Python loop that holds the GIL (a tokenizer gone wrong), once;
* ``gpu_kernel``: a kernel that never finishes, in every iteration (the GPU is broken);
  with ``XID_FLEET`` set, that fake NVML fleet replaces the one named by
  ``NCCL_DOCTOR_FAKE_NVML`` at the fault, as the GPU's Xid appears;
* ``none``.

``UNEVEN=1`` draws each step's time between STEP/4 and 2 x STEP, with every fifth step
3 x STEP (an evaluation). Writes ``fault-<rank>`` (the time of the fault) and
``result-<rank>.json`` to ``OUT_DIR``.
"""

from __future__ import annotations

import json
import os
import queue
import random
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from doctor.restart import current_call

STEPS = int(os.environ.get("STEPS", "12"))
STEP = float(os.environ.get("STEP", "0.3"))
KIND, FAULT_RANK, FAULT_STEP = (os.environ.get("FAULT", "none:-1:-1").split(":") + ["", ""])[:3]
OUT = Path(os.environ["OUT_DIR"])
HANG = 120.0
PING = os.environ.get("PING", "1") == "1"
"""``PING=0``: a job that never pings (its progress is sampled from Flight Recorder)."""


def step_time(step: int, rng: random.Random) -> float:
    if not os.environ.get("UNEVEN"):
        return STEP
    return 3 * STEP if step % 5 == 4 else rng.uniform(STEP / 4, 2 * STEP)


def faulty(call: object, step: int, every_iteration: bool) -> bool:
    due = KIND != "none" and call.initial_rank == int(FAULT_RANK) and step == int(FAULT_STEP)
    return due and (every_iteration or call.iteration == 0)


def mark_fault() -> None:
    """One line per injection; the first is the fault (the later ones are its repeats)."""
    with (OUT / f"fault-{call.initial_rank}").open("a") as f:
        f.write(f"{time.time()}\n")


def load_batch(step: int) -> torch.Tensor:
    if KIND == "dataloader" and faulty(call, step, every_iteration=False):
        mark_fault()
        try:
            queue.Queue().get(timeout=HANG)  # the worker that would fill it died
        except queue.Empty:
            pass
    return torch.ones(1, dtype=torch.float64)


def tokenize(step: int) -> None:
    if KIND == "gil" and faulty(call, step, every_iteration=False):
        mark_fault()
        deadline, total = time.monotonic() + HANG, 0
        while time.monotonic() < deadline:
            for i in range(10_000):
                total += i * i % 7


def wait_for_gpu_kernel(step: int) -> None:
    if KIND == "gpu_kernel" and faulty(call, step, every_iteration=True):
        if os.environ.get("XID_FLEET"):
            fleet = Path(os.environ["NCCL_DOCTOR_FAKE_NVML"])
            fleet.write_text(Path(os.environ["XID_FLEET"]).read_text())
        mark_fault()
        time.sleep(HANG)  # cudaStreamSynchronize on a GPU that threw an Xid


def sync_gradients(value: torch.Tensor, step: int) -> None:
    if KIND == "wrong_collective" and faulty(call, step, every_iteration=True):
        mark_fault()
        dist.all_gather([torch.empty_like(value) for _ in range(call.world_size)], value)
    else:
        dist.all_reduce(value)


call = current_call()
dist.init_process_group(
    "gloo",
    store=call.store,
    rank=call.rank,
    world_size=call.world_size,
    timeout=timedelta(seconds=300),
)
rng = random.Random(7)  # the same draws on every rank: the job, not one rank, is uneven
value = torch.zeros(1, dtype=torch.float64)
durations = []
for step in range(STEPS):
    if PING:
        call.ping()
    began = time.monotonic()
    value += load_batch(step)
    tokenize(step)
    wait_for_gpu_kernel(step)
    time.sleep(step_time(step, rng))
    sync_gradients(value, step)
    durations.append(time.monotonic() - began)
result = {
    "initial_rank": call.initial_rank,
    "rank": call.rank,
    "world_size": call.world_size,
    "iteration": call.iteration,
    "value": value.item(),
    "step_times": durations,
}
(OUT / f"result-{call.initial_rank}.json").write_text(json.dumps(result))
dist.destroy_process_group()
