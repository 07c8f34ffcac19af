"""PyTorch Lightning training whose callback starts a telemetry thread that reads a pipe
through ``ctypes.PyDLL``.

Bug: ``PyDLL`` keeps the GIL through the ``read``. The thread wakes while rank 2's main
thread is in the callback's ``barrier`` (the GIL released), takes the GIL and blocks for
good: rank 2's main thread can never return to Python, and its peers wait for it in the
next collective. Modelled on https://github.com/NVIDIA/apex/issues/1814 (C extensions
that block without releasing the GIL stall every other thread) and
https://github.com/rapidsai/rapidsmpf/pull/188. Truth: rank 2's helper thread owns the
GIL, its main thread does not.
"""

import ctypes
import datetime
import os
import threading

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from pytorch_lightning.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset


def flush_when_asked(flush: threading.Event, pipe_fd: int) -> None:
    """Flushes the batch's telemetry and waits for the collector's acknowledgement."""
    libc = ctypes.PyDLL(None)  # the bug: CDLL would release the GIL
    reply = ctypes.create_string_buffer(64)
    while flush.wait():
        flush.clear()
        libc.read(pipe_fd, reply, 64)  # no acknowledgement ever comes


class Telemetry(pl.Callback):
    def __init__(self):
        self.flush = threading.Event()

    def on_train_start(self, trainer, module):
        if trainer.global_rank == 2:
            read_end, self._keep = os.pipe()
            threading.Thread(
                target=flush_when_asked,
                args=(self.flush, read_end),
                name="telemetry",
                daemon=True,
            ).start()

    def on_train_batch_end(self, trainer, module, outputs, batch, index):
        if index == 20:
            self.flush.set()  # rank 2's thread takes the GIL while the barrier waits
        dist.barrier()  # keep the ranks' logs in step


class Regressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
        )

    def training_step(self, batch, index):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    torch.set_num_threads(1)
    world = int(os.environ["WORLD_SIZE"])
    data = TensorDataset(torch.randn(100000, 64), torch.randn(100000, 1))
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=world,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=datetime.timedelta(seconds=600)),
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[Telemetry()],
    )
    trainer.fit(Regressor(), DataLoader(data, batch_size=16))


if __name__ == "__main__":
    main()
