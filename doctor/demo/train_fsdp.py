"""The tiny GPT trained with FSDP2 (``torch.distributed.fsdp.fully_shard``) on CPU over gloo.

Each transformer block and the whole model are sharded: parameters are
all-gathered before forward and backward, gradients reduce-scattered after
(FSDP's own collectives, issued from its hooks). Start it as
``doctor.demo.train_ddp`` is started::

    torchrun --nproc-per-node 4 -m doctor.demo.train_fsdp --data DIR
"""

from __future__ import annotations

import datetime
import os
import sys

from doctor.demo.gpt import make_model, shard_path, train, train_args, write_shards


def main(argv: list[str] | None = None) -> int:
    args = train_args("python -m doctor.demo.train_fsdp", argv)
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    if not shard_path(args.data, rank).exists():
        write_shards(args.data, world)
    model = make_model()
    for block in model.blocks.layers:
        fully_shard(block)
    fully_shard(model)
    train(model, args, rank)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
