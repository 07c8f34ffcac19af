"""How long aborting a rank's NCCL communicators takes, serially and in parallel threads
(the restart wrapper's abort step), for a rank that belongs to K process groups.

``python3 abort_time.py K serial|parallel``: one rank on cuda:0; the world group and K-1
more groups of it, each with a communicator made by one all_reduce; then every group is
aborted, one after another or each in its own thread. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import torch
import torch.distributed as dist


def main() -> None:
    k, mode = int(sys.argv[1]), sys.argv[2]
    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)
    groups = [dist.group.WORLD] + [dist.new_group([0]) for _ in range(k - 1)]
    x = torch.ones(1024, device=device)
    for group in groups:
        dist.all_reduce(x, group=group)
    torch.cuda.synchronize()
    pgs = list(dist.distributed_c10d._world.pg_map)
    start = time.monotonic()
    if mode == "serial":
        for pg in pgs:
            pg.abort()
    else:
        threads = [threading.Thread(target=pg.abort) for pg in pgs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    took = time.monotonic() - start
    print(json.dumps({"groups": len(pgs), "mode": mode, "abort_s": round(took, 4)}), flush=True)


if __name__ == "__main__":
    main()
