"""DDP with a subgroup for metrics; one code path reduces on the world group instead.

Bug: ranks 0-2 form a ``stats`` subgroup. Ranks 0 and 1 all-reduce their loss on it from
``sync_stats``; rank 2 takes another path (``log_eval_loss``) that calls ``all_reduce``
without ``group=``, on the world group. Rank 3, outside the subgroup, goes on to the next
step and waits in DDP's buffer broadcast, whose root (rank 0) is stuck in the subgroup.
Modelled on https://github.com/flashinfer-ai/flashinfer/pull/3247 (a missing ``group=``
makes a collective expect every rank: a hang) and
https://github.com/pytorch/ignite/pull/2712. Truth: rank 2's main thread is in
``all_reduce`` under ``log_eval_loss``; ranks 0 and 1 under ``sync_stats``.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def sync_stats(loss: torch.Tensor, group) -> None:
    dist.all_reduce(loss, group=group)


def log_eval_loss(loss: torch.Tensor) -> None:
    dist.all_reduce(loss)  # the bug: no group=, so it waits for every rank of the world


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    stats = dist.new_group([0, 1, 2])
    torch.manual_seed(rank)
    model = DDP(
        torch.nn.Sequential(
            torch.nn.Linear(32, 32), torch.nn.BatchNorm1d(32), torch.nn.Linear(32, 1)
        )
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    while True:
        opt.zero_grad(set_to_none=True)
        loss = model(torch.randn(16, 32)).square().sum() / 16
        loss.backward()
        opt.step()
        step += 1
        if step == 10 and rank < 3:
            value = loss.detach().clone()
            if rank == 2:
                log_eval_loss(value)
            else:
                sync_stats(value, stats)


if __name__ == "__main__":
    main()
