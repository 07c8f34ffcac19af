"""Real training stacks with faults from outside: DDP, Lightning and accelerate jobs.

``TrainingJob`` starts one of the tiny-GPT trainers (``doctor.demo.train_ddp``,
``train_lightning``, ``train_accelerate``, ``train_fsdp``) under torchrun or one process per
rank (as srun starts them), with ``doctor.demo.inject`` on the ranks'
``sitecustomize``, waits until every rank has made ``step`` optimizer steps,
then does the fault to rank ``fault_rank`` from outside the training code
(under torchrun with ``max_restarts``, a killed rank makes torchrun restart
every rank: ``start`` returns once the new ranks made their steps too):

=======  ==============================================================
none     nothing (a healthy job)
sigstop  ``kill -STOP`` the rank
kill     ``kill -9`` the rank
fifo     its data shard becomes a FIFO no one writes: ``get_batch`` blocks
gil      a file the rank's injected hook watches for appears: a thread of the
         rank starts holding the GIL in a C call
slow     (injected) every optimizer step of the rank sleeps ``delay`` s
=======  ==============================================================

Every fault but ``slow`` can also be done later to a running job (``inflict``), so one job
can carry several faults in turn: a slow rank that then holds the GIL, then is killed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from doctor.demo import inject
from doctor.demo.gpt import shard_path, write_shards
from doctor.demo.local import LocalJob

FRAMEWORKS = {
    "ddp": "doctor.demo.train_ddp",
    "lightning": "doctor.demo.train_lightning",
    "accelerate": "doctor.demo.train_accelerate",
    "fsdp": "doctor.demo.train_fsdp",
}
EXTERNAL = ("none", "sigstop", "kill", "fifo", "gil")
INJECTED = ("slow",)
FAULTS = EXTERNAL + INJECTED
_OWN_STORE_PER_ATTEMPT = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
"""torchrun's restarts need it (pytorch/pytorch#135712, still so on torch 2.13): by default
the ranks use the agent's TCPStore, which outlives an attempt, and process groups key their
peers' addresses without the attempt, so a restarted rank can read a dead rank's gloo
address from attempt 0 and fail in ``connectFullMesh`` ("Connection refused"). With this,
rank 0 of each attempt hosts a fresh store."""


class TrainingJob(LocalJob):
    """A real-stack training job of ``world`` ranks with one fault done from outside."""

    def __init__(
        self,
        job: str,
        framework: str,
        fault: str,
        workdir: Path,
        *,
        launch: str = "per-rank",
        world: int = 4,
        fault_rank: int = 2,
        step: int = 3,
        delay: float = 0.5,
        max_restarts: int = 0,
    ) -> None:
        if framework not in FRAMEWORKS or fault not in FAULTS:
            raise ValueError(f"framework in {sorted(FRAMEWORKS)}, fault in {FAULTS}")
        site, gil_file = workdir / f"{job}.site", workdir / f"{job}.gil"
        super().__init__(
            job,
            fault,
            workdir,
            launch=launch,
            world=world,
            fault_rank=fault_rank,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(site), os.environ.get("PYTHONPATH", "")])
                ),
                inject.FAULT_ENV: fault if fault in INJECTED else "none",
                inject.RANK_ENV: str(fault_rank),
                inject.STEP_ENV: str(step),
                inject.READY_ENV: str(workdir / f"{job}.ready"),
                inject.DELAY_ENV: str(delay),
                inject.GIL_FILE_ENV: str(gil_file),
                **(_OWN_STORE_PER_ATTEMPT if max_restarts else {}),
            },
        )
        self.framework, self.site, self.data = framework, site, workdir / f"{job}.data"
        self.gil_file = gil_file
        self.program = ["-m", FRAMEWORKS[framework]]
        self.job_args = ["--data", str(self.data)]
        self.max_restarts = max_restarts
        self.torchrun_args += ["--max-restarts", str(max_restarts)]

    def spawn_ranks(self) -> TrainingJob:
        self.site.mkdir(parents=True, exist_ok=True)
        (self.site / "sitecustomize.py").write_text(inject.sitecustomize_text())
        write_shards(self.data, self.world)
        super().spawn_ranks()
        return self

    def start(self, timeout: float = 120.0) -> TrainingJob:
        super().start(timeout)
        self.inflict()
        if self.launch == "torchrun" and self.max_restarts and self.fault == "kill":
            self.wait_ready(timeout, lines=2 * self.world)  # torchrun restarted every rank
        return self

    def rank_pids(self) -> dict[int, int]:
        """The pid of every live rank, read from the processes this job started."""
        found: dict[int, int] = {}
        for proc in self.procs:
            try:
                top = psutil.Process(proc.pid)
                tree = [top, *top.children(recursive=True)]
            except psutil.Error:
                continue
            for member in tree:
                try:
                    rank = member.environ().get("RANK")
                except psutil.Error:
                    continue
                if rank is not None and int(rank) not in found:
                    found[int(rank)] = member.pid
        return found

    def inflict(self, fault: str | None = None, rank: int | None = None) -> None:
        """Do the fault (default: the job's) to the rank (default: the job's fault rank) from
        outside; ``slow`` is already on. A restarted job's attempt can get another."""
        fault = self.fault if fault is None else fault
        rank = self.fault_rank if rank is None else rank
        if fault == "gil":
            self._hold_gil(rank)
            return
        pid = self.rank_pids().get(rank)
        if fault in ("sigstop", "kill") and pid is not None:
            os.kill(pid, signal.SIGSTOP if fault == "sigstop" else signal.SIGKILL)
        elif fault == "fifo":
            shard = shard_path(self.data, rank)
            fifo = shard.with_suffix(".fifo")
            os.mkfifo(fifo)
            fifo.replace(shard)
        end = time.monotonic() + 10
        while fault == "kill" and pid is not None and time.monotonic() < end:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    return
            except psutil.NoSuchProcess:
                return
            time.sleep(0.02)

    def _hold_gil(self, rank: int, timeout: float = 30.0) -> None:
        """Create the file the rank's hook watches for; return once its GIL holder runs."""
        if rank != self.fault_rank:
            raise ValueError(f"the GIL fault is armed on rank {self.fault_rank} only")
        self.gil_file.touch()
        end = time.monotonic() + timeout
        while "held" not in self.gil_file.read_text():
            if time.monotonic() > end:
                raise RuntimeError(f"rank {rank} of {self.job} did not start holding the GIL")
            time.sleep(0.05)
