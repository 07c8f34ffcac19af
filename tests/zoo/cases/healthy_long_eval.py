"""A healthy DDP job whose every rank runs a long evaluation with no collective in it.

Not a bug: after a few training steps every rank evaluates its whole validation shard
(forward passes under ``no_grad``, an argmax and a count per batch) and only then reduces
the counts once. The evaluation takes minutes; users see no step logged and report a hang
(or, with a short collective timeout, a watchdog timeout in the reduction after it).
Modelled on https://github.com/huggingface/accelerate/issues/314 (a watchdog timeout
right after a long evaluation; the answer was a longer timeout) and
https://github.com/EleutherAI/lm-evaluation-harness/pull/1404 (multi-GPU evaluation longer
than the 30-minute timeout; merged fix: a longer timeout). Truth: every rank's main thread
is under ``evaluate``.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def evaluate(model: torch.nn.Module, batches: int) -> float:
    right = torch.zeros(2)
    with torch.no_grad():
        for _ in range(batches):
            x = torch.randn(64, 128)
            pred = model(x).argmax(1)
            right += torch.tensor([float((pred == 0).sum()), 64.0])
    dist.all_reduce(right)  # once, at the end: every rank gets here
    return float(right[0] / right[1])


def main() -> None:
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x in torch.randn(5, 32, 128):  # a short training phase first
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    print(f"accuracy {evaluate(model.module, 10**8):.3f}", flush=True)


if __name__ == "__main__":
    main()
