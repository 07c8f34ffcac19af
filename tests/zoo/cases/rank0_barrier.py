"""DDP whose rank 0 saves a checkpoint and then calls ``barrier`` inside ``if rank == 0``.

Bug: only rank 0 reaches the ``barrier`` (it sits inside the rank-0 branch), so the other
ranks go on to the next step and wait in DDP's gradient all-reduce. Modelled on
https://runebook.dev/en/docs/pytorch/distributed/torch.distributed.barrier ("calling
barrier() only under a conditional statement that isn't entered by all processes") and
https://discuss.pytorch.org/t/torch-distributed-barrier-hangs-in-ddp/114522. Truth: rank
0's main thread is in ``barrier`` under ``save_checkpoint``.
"""

import io

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def save_checkpoint(model) -> None:
    torch.save(model.state_dict(), io.BytesIO())
    dist.barrier()  # the bug: the other ranks never get here


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(
        torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(100000):
        loss = model(torch.randn(16, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 10 and rank == 0:
            save_checkpoint(model)


if __name__ == "__main__":
    main()
