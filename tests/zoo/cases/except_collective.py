"""DDP whose periodic validation catches a bad batch and tells the other ranks about it.

Bug: the ``except`` block announces the skipped batch with a collective (``all_reduce`` of
a flag, so every rank can count skipped batches) but only the rank that raised runs the
handler. Rank 3's validation batch at step 20 holds a label out of range: it enters the
handler and waits in its ``all_reduce``; the others never raise and wait in the
``barrier`` that ends each validation. Modelled on
https://github.com/EvolvingLMMs-Lab/lmms-eval/pull/1304 (one rank's exception handled
locally: the others block on the next collective until the timeout) and
https://github.com/tier4/Diffusion-Planner/pull/336 (a failure on one rank must be agreed
on by every rank, or the others wait at the barrier). Truth: rank 3's main thread is in
``all_reduce`` under ``report_skip``; the others in ``barrier``.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

CLASSES = 4


def report_skip() -> None:
    flag = torch.ones(1)
    dist.all_reduce(flag)  # the bug: only a rank that raised gets here


def validate(model, rank: int, step: int) -> float:
    x, y = torch.randn(8, 16), torch.randint(0, CLASSES, (8,))
    if rank == 3 and step == 20:
        y[0] = CLASSES  # a mislabelled example in rank 3's validation shard
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(model.module(x), y))


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, CLASSES)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, 100000):
        loss = torch.nn.functional.cross_entropy(
            model(torch.randn(8, 16)), torch.randint(0, CLASSES, (8,))
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            try:
                print(f"rank {rank} step {step}: val {validate(model, rank, step):.3f}")
            except (IndexError, RuntimeError) as exc:
                print(f"rank {rank}: skipping validation at step {step}: {exc}", flush=True)
                report_skip()
            dist.barrier()  # validation ends together


if __name__ == "__main__":
    main()
