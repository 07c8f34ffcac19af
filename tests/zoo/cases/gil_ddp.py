"""DDP training whose metrics thread calls a C function through ``ctypes.PyDLL``.

Bug: ``PyDLL`` functions run *with* the GIL held (only ``CDLL`` releases it), so a
blocking ``read`` in the helper thread keeps every other thread of the process out of
Python. Rank 2's main thread comes back from the autograd engine and waits for the GIL
forever; its peers wait in DDP's gradient all-reduce. Modelled on
https://github.com/rapidsai/rapidsmpf/pull/188 (a blocking native call made with the GIL
held deadlocks the process) and https://github.com/pytorch/pytorch/pull/40495 (a DDP rank
holding the GIL while another thread needs it: a distributed deadlock). Truth: rank 2's
helper thread owns the GIL, its main thread does not.
"""

import ctypes
import os
import threading
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def upload_metrics(pipe_fd: int) -> None:
    """Waits for the metrics collector's reply: a read that never returns, GIL held."""
    time.sleep(1.0)
    libc = ctypes.PyDLL(None)  # the bug: CDLL would release the GIL
    reply = ctypes.create_string_buffer(64)
    libc.read(pipe_fd, reply, 64)


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if rank == 2:
        read_end, _write_end = os.pipe()
        threading.Thread(
            target=upload_metrics, args=(read_end,), name="metrics-uploader", daemon=True
        ).start()
    while True:
        loss = model(torch.randn(32, 128)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
