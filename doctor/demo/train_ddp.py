"""Data-parallel training of the tiny GPT with ``torch.nn.parallel.DistributedDataParallel``.

The loop of public GPT training scripts, on CPU with gloo: ``get_batch`` reads the
rank's shard, the forward pass runs through DDP, and ``loss.backward()`` makes
DDP's reducer all-reduce gradient buckets from autograd hooks: no collective is
called from Python. Start it under torchrun, or one process per rank with
``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set::

    torchrun --nproc-per-node 4 -m doctor.demo.train_ddp --data DIR

Faults are injected from outside (``doctor.demo.inject``, signals, the shard files).
"""

from __future__ import annotations

import datetime
import os
import sys

from torch.distributed.elastic.multiprocessing.errors import record

from doctor.demo.gpt import make_model, train, train_args, write_shards


@record  # torchrun's advice: a rank that raises leaves its error in error.json
def main(argv: list[str] | None = None) -> int:
    args = train_args("python -m doctor.demo.train_ddp", argv)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    if rank == 0 and not (args.data / "train_0.bin").exists():
        write_shards(args.data, world)
    dist.barrier()
    model = DistributedDataParallel(make_model())
    train(model, args, rank)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
