"""DDP with a BatchNorm model (buffers) and a different number of batches per rank.

Bug: the ranks' shards are uneven and nothing joins the ranks (no ``model.join()``):
rank 3 runs out of batches, leaves its loop and waits in the ``barrier`` before saving,
while the others are still inside the next training step, in DDP's buffer broadcast
(forward) or gradient all-reduce (backward). Modelled on
https://github.com/pytorch/pytorch/issues/33148 ("DDP instances processing more input
batches will hang") and https://github.com/microsoft/PyMarlin/issues/80. Truth: rank 3's
main thread is in ``barrier`` under ``main``; every other rank is under ``train_step``.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
    )


def train_step(model, opt, batch) -> None:
    x, y = batch
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DDP(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = 10 if rank == 3 else 1000  # the shards are uneven: the bug
    for _ in range(batches):
        train_step(model, opt, (torch.randn(16, 32), torch.randn(16, 1)))
    dist.barrier()  # wait for everyone before rank 0 saves
    if rank == 0:
        torch.save(model.state_dict(), "/dev/null")


if __name__ == "__main__":
    main()
