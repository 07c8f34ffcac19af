"""A gloo job whose fault is switched while it runs, so one job serves many tests.

Each rank reads the control file (``--control``) at the start of every step:
one line ``<phase> <fault> <rank>``. The first time a rank sees a phase it
appends ``seen <phase> <rank>`` to the ready file (``--ready``); the faulty
rank appends ``fault <phase> <rank>`` when it enters the fault. Tests wait on
those lines, never on sleeps.

Faults: ``none``; ``straggler`` (sleeps in ``load_batch`` every step);
``dataloader`` (blocks on a queue in ``load_batch``, GIL released) and
``gil`` (a pure-Python loop in ``forward_backward``), both until the control
file names another phase; ``wrong-collective`` (all_gather where the others
all_reduce: the job hangs for good); ``kill`` (SIGKILLs itself).
Start it with srun: RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE come from
SLURM's variables, MASTER_ADDR/MASTER_PORT from the job script.
"""

from __future__ import annotations

import argparse
import datetime
import os
import queue
import signal
import sys
import time
from pathlib import Path
from typing import Any

GRAD_SIZE = 1024


class Control:
    def __init__(self, path: Path, ready: Path, rank: int) -> None:
        self.path, self.ready, self.rank = path, ready, rank
        self.phase, self.fault, self.culprit = "", "none", -1
        self.mtime = 0.0

    def read(self) -> None:
        try:
            mtime = self.path.stat().st_mtime
            if mtime == self.mtime:
                return
            phase, fault, rank = self.path.read_text().split()
        except (OSError, ValueError):
            return
        self.mtime = mtime
        if phase != self.phase:
            self.phase, self.fault, self.culprit = phase, fault, int(rank)
            self.note(f"seen {phase} {self.rank}")

    def mine(self, fault: str) -> bool:
        return self.fault == fault and self.culprit == self.rank

    def note(self, line: str) -> None:
        fd = os.open(self.ready, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def still(self, phase: str) -> bool:
        self.read()
        return self.phase == phase


def load_batch(torch: Any, ctl: Control, step: int) -> Any:
    if ctl.mine("straggler"):
        time.sleep(0.3)
    if ctl.mine("dataloader"):
        phase = ctl.phase
        ctl.note(f"fault {phase} {ctl.rank}")
        while ctl.still(phase):
            _next_batch_from_workers(0.2)
    return torch.full((GRAD_SIZE,), float(step + 1))


def _next_batch_from_workers(limit: float) -> None:
    try:
        queue.Queue().get(timeout=limit)
    except queue.Empty:
        pass


def forward_backward(ctl: Control, batch: Any) -> Any:
    if ctl.mine("gil"):
        phase = ctl.phase
        ctl.note(f"fault {phase} {ctl.rank}")
        _tokenize_in_python(ctl, phase)
    time.sleep(0.05)
    return batch * 2


def _tokenize_in_python(ctl: Control, phase: str) -> None:
    total, n = 0, 0
    while True:
        for i in range(200_000):
            total += i * i % 7
        n += 1
        if not ctl.still(phase):
            return


def sync_gradients(dist: Any, torch: Any, ctl: Control, grads: Any, world: int) -> None:
    if ctl.mine("wrong-collective"):
        ctl.note(f"fault {ctl.phase} {ctl.rank}")
        dist.all_gather([torch.empty_like(grads) for _ in range(world)], grads)
    else:
        dist.all_reduce(grads)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--control", type=Path, required=True)
    p.add_argument("--ready", type=Path, required=True)
    a = p.parse_args()
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(
        "gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=900)
    )
    ctl = Control(a.control, a.ready, rank)
    step = 0
    while True:
        ctl.read()
        if ctl.fault == "stop":
            break
        if ctl.mine("kill"):
            ctl.note(f"fault {ctl.phase} {rank}")
            os.kill(os.getpid(), signal.SIGKILL)
        batch = load_batch(torch, ctl, step)
        grads = forward_backward(ctl, batch)
        sync_gradients(dist, torch, ctl, grads, world)
        step += 1
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
