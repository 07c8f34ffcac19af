"""One rank of the fault-injection job: a tiny gloo training loop inside the Wrapper.

``FAULT=kind:rank:step`` injects ``kind`` on initial rank ``rank`` at ``step``
of iteration 0 (every iteration for ``repeat``). Prints ``RESULT {json}``.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from doctor.restart import CallWrapper, HookState, RankAssignment, Wrapper

STEPS = int(os.environ.get("STEPS", "8"))
STOP_FILE = os.environ.get("STOP_FILE")
"""When set, the loop runs until this file exists rather than for ``STEPS`` steps."""
KIND, FAULT_RANK, FAULT_STEP = (os.environ.get("FAULT", "none:-1:-1").split(":") + ["", ""])[:3]
INITIAL = int(os.environ["RANK"])
OUT = Path(os.environ["OUT_DIR"])
BACKEND = os.environ.get("BACKEND", "gloo")
GROUPS = int(os.environ.get("PG_GROUPS", "1"))
"""``nccl`` on a GPU host (tests/gpu_capture/restart.sh): each rank on ``cuda:LOCAL_RANK``;
``PG_GROUPS=K`` puts every rank in K-1 more process groups, each with its communicator made;
``EAGER=1`` binds the world group to the device (its communicators made at once, and the
new groups' split from it)."""


def expected(world_size: int, steps: int) -> float:
    """Each step adds one on every rank and all-reduces: t <- (t + 1) * W."""
    value = 0.0
    for _ in range(steps):
        value = (value + 1) * world_size
    return value


def inject(call: CallWrapper, step: int) -> None:
    due = INITIAL == int(FAULT_RANK) and step == int(FAULT_STEP)
    if not due or (call.iteration > 0 and KIND != "repeat"):
        return
    if KIND in ("raise", "repeat", "during_restart"):
        raise RuntimeError(f"injected fault at step {step}")
    if KIND == "exit":
        sys.exit(3)
    if KIND in ("sigkill", "sigterm"):
        os.kill(os.getpid(), signal.SIGKILL if KIND == "sigkill" else signal.SIGTERM)
    if KIND == "hang_gil_released":
        time.sleep(3600)
    if KIND == "hang_gil_held":  # a C deadlock holding the GIL; signals do not end it
        mutex = ctypes.create_string_buffer(64)
        libc = ctypes.PyDLL(None)
        libc.pthread_mutex_lock(mutex)
        libc.pthread_mutex_lock(mutex)
    if KIND == "busy_loop":
        while True:
            pass
    if KIND == "atomic":
        with call.atomic():
            (OUT / "atomic-begin").write_text(str(time.time()))
            time.sleep(1.0)
            (OUT / "atomic-end").write_text(str(time.time()))


def wait_for(path: Path, timeout: float = 60) -> None:
    """Until ``path`` exists (another rank's ready file); the deadline only bounds a hang."""
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            raise RuntimeError(f"{path} never appeared")
        time.sleep(0.01)


def go_on(step: int) -> bool:
    """Whether to make step ``step``: ``STEPS`` of them, or (``STOP_FILE``) until the file
    exists on any rank, agreed by an all-reduce so every rank stops at the same step."""
    if STOP_FILE is None:
        return step < STEPS
    seen = torch.tensor([float(Path(STOP_FILE).exists())])
    dist.all_reduce(seen, op=dist.ReduceOp.MAX)
    return seen.item() == 0.0


def train(call_wrapper: CallWrapper) -> dict[str, object]:
    call = call_wrapper
    device = torch.device("cpu")
    if BACKEND == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    dist.init_process_group(
        BACKEND,
        store=call.store,
        rank=call.rank,
        world_size=call.world_size,
        timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))),
        device_id=device if BACKEND == "nccl" and os.environ.get("EAGER") else None,
    )
    value = torch.zeros(1, dtype=torch.float64, device=device)
    groups = [dist.new_group(list(range(call.world_size))) for _ in range(GROUPS - 1)]
    for group in groups:  # held, as a Megatron rank holds one group per parallelism
        dist.all_reduce(torch.zeros_like(value), group=group)
    step = 0
    while go_on(step):
        call.ping()
        if KIND == "atomic" and INITIAL == 1 and step == int(FAULT_STEP) and call.iteration == 0:
            wait_for(OUT / "atomic-begin")  # rank 2 is inside its atomic section now
            raise RuntimeError("injected fault while rank 2 is in atomic()")
        inject(call, step)
        value += 1
        dist.all_reduce(value)
        time.sleep(float(os.environ.get("STEP_SLEEP", "0.02")))
        step += 1
    dist.destroy_process_group()
    if INITIAL == int(os.environ.get("SLOW_RANK", "-1")):  # the others wait to complete
        end = time.monotonic() + float(os.environ.get("SLOW_RETURN", "0"))
        while time.monotonic() < end:
            call.ping()
            time.sleep(0.05)
    return {
        "value": value.item(),
        "expected": expected(call.world_size, step),
        "steps": step,
        "world_size": call.world_size,
        "rank": call.rank,
        "iteration": call.iteration,
    }


def finalize(state: HookState) -> None:
    if KIND == "during_restart" and INITIAL == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    if INITIAL == int(os.environ.get("SLOW_RANK", "-1")):  # the others wait at the barrier
        time.sleep(float(os.environ.get("SLOW_FINALIZE", "0")))


def main() -> None:
    wrapper = Wrapper(
        soft_timeout=float(os.environ.get("SOFT", "2")),
        hard_timeout=float(os.environ.get("HARD", "4")),
        heartbeat_timeout=5,
        barrier_timeout=20,
        completion_timeout=20,
        last_call_wait=0.5,
        termination_grace_time=0.5,
        max_iterations=int(os.environ.get("MAX_ITER", "5")),
        finalize=finalize,
        timeout_policy=os.environ.get("TIMEOUT_POLICY", "warn"),
        rank_assignment=RankAssignment(spares=int(os.environ.get("SPARES", "0"))),
    )
    if KIND == "during_restart" and INITIAL == 1:
        os.environ["FAULT"] = "raise:1:2"
    result = wrapper(train)()
    print("RESULT " + json.dumps({"initial_rank": INITIAL, "result": result}), flush=True)


if __name__ == "__main__":
    main()
