"""DDP whose loop skips a batch with a non-finite loss on the rank that sees it.

Bug: the skip decision is rank-local (``continue`` before ``backward``), so rank 1, whose
batch 5 gives a NaN loss, makes one gradient all-reduce fewer than its peers. The
collectives pair up off by one until the end: rank 1 reaches the ``barrier`` after its
loop while ranks 0, 2 and 3 wait in their last step's all-reduce. Modelled on
https://github.com/ai2cm/ace/pull/850 (a NaN loss on a subset of the ranks: the others
hang in backward's all-reduce) and https://github.com/NVIDIA-NeMo/Automodel/pull/2468
(a per-rank, data-dependent skip of backward under DDP hangs). Truth: rank 1's main
thread is in ``barrier`` under ``main``; the others in backward.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 20


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    if rank == 1 and step == 5:
        x[0, 0] = float("nan")  # one corrupt sample in rank 1's shard
    return x, y


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        x, y = batch(rank, step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        if not torch.isfinite(loss):
            continue  # the bug: skipped on this rank only
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.barrier()  # wait for everyone before saving
    if rank == 0:
        torch.save(model.state_dict(), "/dev/null")


if __name__ == "__main__":
    main()
