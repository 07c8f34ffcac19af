"""A healthy DDP job whose every rank first spends a long while preprocessing its shard.

Not a bug: each rank tokenises and packs its data in Python for a long time with no
collective, then trains. Users report such phases as hangs (and hit the 30-minute
collective timeout when the next collective comes too late): this job is moving, and
must never be called hung. Modelled on https://github.com/huggingface/trl/issues/1563
(dataset packing before training) and https://github.com/axolotl-ai-cloud/axolotl/issues/921.
Truth: every rank's main thread is in ``pack_examples`` and uses CPU.
"""

import random

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def tokenize(text: str) -> list[int]:
    return [hash(word) % 32000 for word in text.split()]


def pack_examples(n: int) -> list[list[int]]:
    rng = random.Random(dist.get_rank())
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    packed, current = [], []
    for _ in range(n):
        current += tokenize(" ".join(rng.choice(words) for _ in range(64)))
        if len(current) >= 512:
            packed.append(current[:512])
            current = current[512:]
    return packed


def main() -> None:
    dist.init_process_group("gloo")
    data = pack_examples(10**8)  # minutes of pure Python on every rank
    model = DDP(torch.nn.Linear(512, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for row in data:
        loss = model(torch.tensor(row, dtype=torch.float32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
