"""DDP whose dataset reads a token cache behind a lock that a refresh thread holds.

Bug: rank 1 refreshes the shared token cache on a thread of its own, and the refresh holds
the cache's lock for as long as the download takes. The next epoch's ``DataLoader`` forks
its worker while the lock is held: the worker starts with a copy of a held lock that no
thread of it will ever release, and blocks in its first ``__getitem__``. Rank 1's main
thread waits for a batch in the DataLoader forever; its peers wait in the first step's
gradient all-reduce. Modelled on https://github.com/ultralytics/ultralytics/pull/26085 (a
worker forked while another thread held a lock: the worker blocks forever, confirmed and
fixed by ordering) and https://github.com/RolnickLab/ami-data-companion/issues/140 (the
main thread hangs in the DataLoader's ``queue.get``). Truth: rank 1's main thread is in the
DataLoader's ``__next__``; the others in backward.
"""

import threading
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset


class TokenCache:
    """Token ids by example; a refresh swaps in new ones under the lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tokens = torch.randn(256, 32)

    def refresh_async(self) -> None:
        """Starts the refresh; returns once it holds the lock, so readers see new data."""
        holding = threading.Event()

        def refresh() -> None:
            with self.lock:
                holding.set()
                time.sleep(3600)  # a slow download, lock held throughout
                self.tokens = torch.randn(256, 32)

        threading.Thread(target=refresh, name="cache-refresh", daemon=True).start()
        holding.wait()


class Examples(Dataset):
    def __init__(self, cache: TokenCache) -> None:
        self.cache = cache

    def __len__(self) -> int:
        return 256

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        with self.cache.lock:  # in a forked worker: a copy of a held lock
            x = self.cache.tokens[index]
        return x, x.sum(0, keepdim=True)


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    cache = TokenCache()
    loader = DataLoader(Examples(cache), batch_size=16, num_workers=1)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(100):
        if epoch == 1 and rank == 1:
            cache.refresh_async()  # the bug: the next iter(loader) forks with the lock held
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
