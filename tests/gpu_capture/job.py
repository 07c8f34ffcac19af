"""The ProcessGroupNCCL jobs recorded on the GPU host: every rank on cuda:0.

``python3 job.py ok``: a few collectives, then a clean shutdown (one rank: a real
communicator's NCCL_DEBUG=INFO log; two ranks on one GPU: NCCL's duplicate-GPU error).
``python3 job.py hang DIR``: warm-up collectives, then an all_reduce queued behind a
long spinning kernel, so the watchdog times it out; before that the rank writes its own
Flight Recorder dump and ``DIR/hung`` (its pid) so a triage can look at it live, while it
waits in ``torch.cuda.synchronize`` (``hang-item``: in ``.item()``, as a training loop that
reads its loss waits, with no Python frame of torch's above it).
"""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    mode = sys.argv[1]
    timeout = datetime.timedelta(seconds=float(os.environ.get("CAP_PG_TIMEOUT", "30")))
    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", timeout=timeout, device_id=device)
    rank = dist.get_rank()
    x = torch.ones(1 << 20, device=device)
    for _ in range(3):
        dist.all_reduce(x)
    dist.broadcast(x, 0)
    dist.all_gather_into_tensor(torch.empty(x.numel() * dist.get_world_size(), device=device), x)
    dist.barrier()
    torch.cuda.synchronize()
    print(f"rank {rank}: warm-up done, x[0]={x[0].item()}", flush=True)
    if mode == "ok":
        dist.destroy_process_group()
        print(f"rank {rank}: clean exit", flush=True)
        return
    out = sys.argv[2]
    torch.cuda._sleep(int(2e11))  # about 100 s of spinning at 1.98 GHz
    dist.all_reduce(x)
    c10d = torch._C._distributed_c10d
    for name in ("_dump_nccl_trace", "_dump_fr_trace", "_dump_nccl_trace_json"):
        fn = getattr(c10d, name, None)
        try:
            data = fn()
            suffix = "json" if isinstance(data, str) else "pkl"
            with open(os.path.join(out, f"self{name}_rank_{rank}.{suffix}"), "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
            print(f"rank {rank}: wrote its own dump with {name}", flush=True)
        except Exception as exc:  # noqa: BLE001 - the hang matters more than this dump
            print(f"rank {rank}: {name} failed: {exc!r}", flush=True)
    with open(os.path.join(out, "hung"), "w") as f:
        f.write(str(os.getpid()))
    print(f"rank {rank}: all_reduce queued behind the spin at {time.time():.3f}", flush=True)
    if mode == "hang-item":
        print(f"rank {rank}: loss {x[0].item()} (not expected)", flush=True)
        return
    torch.cuda.synchronize()
    print(f"rank {rank}: synchronize returned (not expected)", flush=True)


if __name__ == "__main__":
    main()
