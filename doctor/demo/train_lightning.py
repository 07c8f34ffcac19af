"""The tiny GPT trained by PyTorch Lightning's ``Trainer`` with its DDP strategy (gloo, CPU).

Needs the ``pytorch-lightning`` package (the ``test`` extra). Lightning owns the
loop, the process group and the DDP wrapper; the data comes from ``get_batch``
through an ``IterableDataset``. Start it as ``doctor.demo.train_ddp`` is started::

    torchrun --nproc-per-node 4 -m doctor.demo.train_lightning --data DIR
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Iterator
from typing import Any

from doctor.demo.gpt import get_batch, make_model, shard_path, train_args, write_shards


def main(argv: list[str] | None = None) -> int:
    args = train_args("python -m doctor.demo.train_lightning", argv)
    import pytorch_lightning as pl
    import torch
    from pytorch_lightning.strategies import DDPStrategy
    from torch.utils.data import DataLoader, IterableDataset

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    if not shard_path(args.data, rank).exists():
        write_shards(args.data, world)

    class Shard(IterableDataset):
        def __iter__(self) -> Iterator[Any]:
            for step in range(args.steps):
                yield get_batch(args.data, rank, step, args.batch)

    class GPTModule(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = make_model()

        def training_step(self, batch: Any, index: int) -> Any:
            x, y = batch
            return self.model(x, y)

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    trainer = pl.Trainer(
        accelerator="cpu",
        devices=world,
        num_nodes=1,
        strategy=DDPStrategy(
            process_group_backend="gloo", timeout=datetime.timedelta(seconds=args.timeout)
        ),
        max_steps=args.steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
    )
    trainer.fit(GPTModule(), DataLoader(Shard(), batch_size=None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
