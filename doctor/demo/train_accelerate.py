"""The tiny GPT trained with Hugging Face ``accelerate`` (multi-CPU, gloo).

Needs the ``accelerate`` package (the ``test`` extra). ``Accelerator`` sets up
the process group and wraps the model in DDP; ``accelerator.backward`` runs the
backward pass. Start it as ``doctor.demo.train_ddp`` is started::

    torchrun --nproc-per-node 4 -m doctor.demo.train_accelerate --data DIR
"""

from __future__ import annotations

import datetime
import os
import sys

from doctor.demo.gpt import get_batch, make_model, shard_path, train_args, write_shards


def main(argv: list[str] | None = None) -> int:
    args = train_args("python -m doctor.demo.train_accelerate", argv)
    import torch
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    torch.set_num_threads(1)
    timeout = InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=args.timeout))
    accelerator = Accelerator(cpu=True, kwargs_handlers=[timeout])
    rank, world = accelerator.process_index, accelerator.num_processes
    if not shard_path(args.data, rank).exists():
        write_shards(args.data, world)
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    for step in range(args.steps):
        x, y = get_batch(args.data, int(os.environ["RANK"]), step, args.batch)
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        accelerator.backward(loss)
        optimizer.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
