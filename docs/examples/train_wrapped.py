"""A tiny gloo training loop for `nccl-doctor launch --wrap`; rank 1 raises once at step 5."""

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from doctor.restart import current_call

call = current_call()  # the CallWrapper of this iteration (None without --wrap)
dist.init_process_group(
    "gloo",
    store=call.store,
    rank=call.rank,
    world_size=call.world_size,
    timeout=timedelta(minutes=5),
)
value = torch.zeros(1)
for step in range(int(os.environ.get("STEPS", "20"))):
    call.ping()
    if step == 5 and call.iteration == 0 and call.initial_rank == 1 and os.environ.get("INJECT"):
        raise RuntimeError("injected fault at step 5")
    value += 1
    dist.all_reduce(value)
    time.sleep(0.05)
print(f"rank {call.rank}/{call.world_size} iteration {call.iteration}: value {value.item():.0f}")
dist.destroy_process_group()
