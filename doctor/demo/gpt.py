"""A tiny GPT and its token shards: the model and data every real-stack demo job trains.

The layout is the one public GPT training scripts use: a ``uint16`` token file per
data shard, read with ``numpy.memmap`` on every call to ``get_batch`` (so a shard
that a faulty filesystem cannot deliver blocks the rank right there), and a
decoder-only transformer small enough to train on a CPU in milliseconds a step.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

VOCAB = 256
BLOCK = 32
WIDTH = 64
LAYERS = 2
HEADS = 4
TOKENS_PER_SHARD = 1 << 16


def shard_path(data_dir: Path, rank: int) -> Path:
    """Each rank reads its own shard, as data-parallel jobs that pre-split their data do."""
    return data_dir / f"train_{rank}.bin"


def write_shards(data_dir: Path, world: int, seed: int = 0) -> None:
    """Random tokens, one shard per rank (the demo trains on noise: only the steps matter)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for rank in range(world):
        tokens = rng.integers(0, VOCAB, TOKENS_PER_SHARD, dtype=np.uint16)
        tmp = shard_path(data_dir, rank).with_suffix(".tmp")
        tokens.tofile(tmp)
        tmp.replace(shard_path(data_dir, rank))


def get_batch(data_dir: Path, rank: int, step: int, batch: int) -> tuple[Any, Any]:
    """``batch`` windows of ``BLOCK`` tokens and their next tokens, read from the shard now."""
    import torch

    data = np.memmap(shard_path(data_dir, rank), dtype=np.uint16, mode="r")
    rng = np.random.default_rng(step * 1000 + rank)
    starts = rng.integers(0, len(data) - BLOCK - 1, batch)
    window = [data[i : i + BLOCK + 1].astype(np.int64) for i in starts]
    x = torch.stack([torch.from_numpy(w[:-1]) for w in window])
    y = torch.stack([torch.from_numpy(w[1:]) for w in window])
    return x, y


def make_model() -> Any:
    """A decoder-only transformer (token and position embeddings, blocks, a head)."""
    import torch
    from torch import nn

    class TinyGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(VOCAB, WIDTH)
            self.positions = nn.Embedding(BLOCK, WIDTH)
            layer = nn.TransformerEncoderLayer(
                WIDTH, HEADS, 4 * WIDTH, dropout=0.0, batch_first=True, norm_first=True
            )
            self.blocks = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
            self.head = nn.Linear(WIDTH, VOCAB)
            mask = torch.triu(torch.full((BLOCK, BLOCK), float("-inf")), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, idx: Any, targets: Any = None) -> Any:
            pos = torch.arange(idx.shape[1], device=idx.device)
            h = self.tokens(idx) + self.positions(pos)
            mask: Any = self.mask  # a registered buffer: a Tensor, typed Tensor | Module
            h = self.blocks(h, mask=mask[: idx.shape[1], : idx.shape[1]], is_causal=True)
            logits = self.head(h)
            if targets is None:
                return logits
            return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

    torch.manual_seed(0)
    return TinyGPT()


def train(model: Any, args: argparse.Namespace, rank: int) -> None:
    """The plain loop of GPT scripts (batch, forward, backward, AdamW step), which DDP and
    FSDP drive from their hooks: the collectives run inside ``loss.backward()``."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(args.steps):
        x, y = get_batch(args.data, rank, step, args.batch)
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def train_args(prog: str, argv: list[str] | None) -> argparse.Namespace:
    """The options every demo trainer takes."""
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--data", type=Path, required=True, help="folder of train_<rank>.bin shards")
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--timeout", type=float, default=1800.0, help="collective timeout, s")
    return p.parse_args(argv)
