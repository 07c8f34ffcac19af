"""One rank of the restart benchmark job: 4 ranks, gloo, rank 1 raises at step 5.

MODE=ours | launch | nvidia | torchrun | plain (``launch``: run by ``nccl-doctor launch
--wrap``, the wrapper's ``current_call()``; ``ours``: the wrapper embedded, under any
launcher). Appends ``entry <rank> <iteration> <time>`` and ``fault <time> <iteration>``
lines to $BENCH_LOG; ``steps <rank> <mean step seconds>`` at the end. With $BENCH_ERR_DIR,
the rank's stdout and stderr go to ``rank<RANK>.err`` there (the same under every
launcher).
"""

import os
import statistics
import time
from datetime import timedelta

import torch
import torch.distributed as dist

if os.environ.get("BENCH_ERR_DIR"):  # this rank's stdout and stderr, for a missed restart
    _err = os.open(
        f"{os.environ['BENCH_ERR_DIR']}/rank{os.environ.get('RANK', 'x')}.err",
        os.O_WRONLY | os.O_CREAT | os.O_APPEND,
        0o644,
    )
    os.dup2(_err, 1)
    os.dup2(_err, 2)

MODE = os.environ["MODE"]
LOG = os.environ["BENCH_LOG"]
STEPS = int(os.environ.get("STEPS", "10"))
FAULT_STEP = int(os.environ.get("FAULT_STEP", "5"))
HANG = os.environ.get("HANG", "")  # "gil": rank 2 deadlocks in C holding the GIL
RESTARTS = int(os.environ.get("RESTARTS", "0"))
"""A burst: iterations 0 .. RESTARTS-1 each end with rank (iteration % world) raising."""


def log(line: str) -> None:
    with open(LOG, "a") as f:
        f.write(line + "\n")


def _faulty(rank: int, world: int, iteration: int) -> bool:
    if RESTARTS:
        return iteration < RESTARTS and rank == iteration % world
    return iteration == 0 and rank == 1


def train(store, rank: int, world: int, iteration: int, ping=None) -> None:
    log(f"entry {rank} {iteration} {time.time()}")
    kwargs = {"store": store} if store is not None else {}
    dist.init_process_group(
        "gloo", rank=rank, world_size=world, timeout=timedelta(seconds=20), **kwargs
    )
    value = torch.zeros(1)
    durations = []
    for step in range(STEPS):
        began = time.perf_counter()
        if step == FAULT_STEP and _faulty(rank, world, iteration) and MODE != "plain" and not HANG:
            log(f"fault {time.time()} {iteration}")
            raise RuntimeError("injected fault at step 5")
        if HANG and step == FAULT_STEP and rank == 2 and iteration == 0:
            import ctypes

            log(f"hang {time.time()}")
            mutex = ctypes.create_string_buffer(64)
            ctypes.PyDLL(None).pthread_mutex_lock(mutex)
            ctypes.PyDLL(None).pthread_mutex_lock(mutex)
        value += 1
        dist.all_reduce(value)
        time.sleep(float(os.environ.get("STEP_SLEEP", "0.01")))
        if ping is not None:
            ping()
        durations.append(time.perf_counter() - began)
    if STEPS > 2:
        log(f"steps {rank} {statistics.median(durations[1:])}")
    dist.destroy_process_group()


def main() -> None:
    if MODE in ("ours", "overhead"):
        from doctor.restart import CallWrapper, Wrapper

        soft, hard = (4, 6) if HANG else (30, 60)

        def fn(call_wrapper: CallWrapper) -> None:
            train(
                call_wrapper.store,
                call_wrapper.rank,
                call_wrapper.world_size,
                call_wrapper.iteration,
                call_wrapper.ping,
            )

        Wrapper(
            soft_timeout=soft, hard_timeout=hard, barrier_timeout=120, termination_grace_time=1
        )(fn)()
    elif MODE == "launch":
        from doctor.restart import current_call

        call = current_call()
        train(call.store, call.rank, call.world_size, call.iteration, call.ping)
    elif MODE == "nvidia":  # set up as in NVIDIA's examples/inprocess/basic_example.py
        from nvidia_resiliency_ext import inprocess

        port = int(os.environ["MASTER_PORT"])

        def nfn(call_wrapper: inprocess.CallWrapper = None):
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            store = dist.TCPStore(
                os.environ["MASTER_ADDR"],
                port + 2 + call_wrapper.iteration,
                world,
                rank == 0,
                multi_tenant=True,
                wait_for_workers=True,
            )
            train(store, rank, world, call_wrapper.iteration)

        inprocess.Wrapper(
            store_kwargs={"port": port + 1},
            soft_timeout=timedelta(seconds=30),
            hard_timeout=timedelta(seconds=60),
            barrier_timeout=timedelta(seconds=120),
        )(nfn)()
    else:  # torchrun restarts the whole process group; plain = no wrapper at all
        train(
            None,
            int(os.environ["RANK"]),
            int(os.environ["WORLD_SIZE"]),
            int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
        )


if __name__ == "__main__":
    main()
