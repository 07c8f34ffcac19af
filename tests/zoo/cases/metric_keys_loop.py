"""DDP that averages its logged metrics across ranks, one ``all_reduce`` per key.

Bug: the metrics are a rank-local dict, and a key is only present when the rank saw it
(an auxiliary loss logged only on steps that have one): at step 10 rank 2 holds one key
more than its peers and so calls one ``all_reduce`` more. Its peers are done and wait in
the ``barrier`` before rank 0 writes the log line; rank 2 waits in its extra all-reduce.
Modelled on https://github.com/Lightning-AI/pytorch-lightning/issues/19106 ("deadlock on
``log_dict`` with different keys across ranks") and
https://github.com/bo-ke/llm-internal-medicine/pull/45 (a rank whose metric dict differs
skips a collective; the others block until the job is killed). Truth: rank 2's main thread
is in ``all_reduce`` under ``sync_metrics``; the others in ``barrier``.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def sync_metrics(metrics: dict[str, torch.Tensor]) -> dict[str, float]:
    """The mean of each metric across ranks."""
    out = {}
    for name in sorted(metrics):  # the bug: the keys are this rank's own
        value = metrics[name].detach().clone()
        dist.all_reduce(value)
        out[name] = float(value) / dist.get_world_size()
    return out


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, 100000):
        x, y = torch.randn(16, 32), torch.randn(16, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        metrics = {"loss": loss}
        if rank == 2 and step == 10:  # this batch had an auxiliary target on rank 2 only
            metrics["aux_loss"] = loss * 0.1
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            logged = sync_metrics(metrics)
            dist.barrier()  # rank 0 writes the line once every rank has its numbers
            if rank == 0:
                print(f"step {step}: {logged}", flush=True)


if __name__ == "__main__":
    main()
