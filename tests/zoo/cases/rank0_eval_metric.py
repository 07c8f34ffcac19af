"""DDP whose validation runs on rank 0 only, with a metric that all-reduces its counts.

Bug: the evaluation sits inside ``if rank == 0`` to save time, but its accuracy metric
sums its counts across ranks with ``all_reduce``: rank 0 waits in that all-reduce while
the other ranks wait in the ``barrier`` after validation. Modelled on
https://github.com/pytorch/examples/issues/461 (validation on rank 0 behind an ``if``
"locks up": the all_reduce still runs) and
https://github.com/Lightning-AI/pytorch-lightning/issues/7129 (metrics reduced on rank 0
only: training stuck until the timeout). Truth: rank 0's main thread is in ``all_reduce``
under ``evaluate``; the others in ``barrier``.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Accuracy:
    """Counts right answers; ``compute`` sums the counts of every rank."""

    def __init__(self) -> None:
        self.counts = torch.zeros(2)

    def update(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        self.counts += torch.tensor([float((pred == target).sum()), float(target.numel())])

    def compute(self) -> float:
        dist.all_reduce(self.counts)  # the sync that every rank must join
        return float(self.counts[0] / self.counts[1])


def evaluate(model) -> float:
    metric = Accuracy()
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(8, 16)
            metric.update(model.module(x).argmax(1), torch.randint(0, 4, (8,)))
    return metric.compute()


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(1000):
        for _ in range(5):
            loss = torch.nn.functional.cross_entropy(
                model(torch.randn(8, 16)), torch.randint(0, 4, (8,))
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:  # the bug: validation (and its metric sync) on one rank
            print(f"epoch {epoch}: accuracy {evaluate(model):.3f}", flush=True)
        dist.barrier()


if __name__ == "__main__":
    main()
