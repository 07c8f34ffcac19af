"""Start the demo job on this host and stop it again: for tests, benchmarks and ``make demo``.

Three launches, as users run jobs:

* ``torchrun``: ``python -m torch.distributed.run --rdzv-id JOB`` (ranks carry
  ``TORCHELASTIC_RUN_ID=JOB``);
* ``per-rank``: one process per rank, as ``srun`` starts them (``SLURM_JOB_ID=JOB``);
  a dead rank stays a zombie child of its launcher, as under a real one;
* ``agent``: one process per rank, each registered in the launch registry with
  the in-rank agent running, as ``nccl-doctor launch`` leaves them
  (``python -m doctor.demo.local --agent-rank ...`` is that prologue).

``LocalJob`` waits for every rank's line in the ready file (no sleeps) and,
on ``stop()``, terminates, then kills, then reaps every process it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from doctor.trust.subproc import free_port

LAUNCHES = ("torchrun", "per-rank", "agent")


TERM_GRACE_S = 1.0
"""How long ``stop`` waits after SIGTERM before SIGKILL. A launcher, or a rank between
steps, is gone well within it; a rank blocked in a gloo wait never runs its Python SIGTERM
handler (its main thread is in C), so a longer grace only waits for the SIGKILL (it was
5 s: 5 s per hung job a test stopped)."""


class LocalJob:
    """A demo job of ``world`` ranks; use as a context manager or call ``stop()``."""

    def __init__(
        self,
        job: str,
        fault: str,
        workdir: Path,
        *,
        launch: str = "torchrun",
        world: int = 4,
        fault_rank: int = 2,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        if launch not in LAUNCHES:
            raise ValueError(f"launch must be one of {LAUNCHES}")
        self.job, self.fault, self.world, self.launch = job, fault, world, launch
        self.fault_rank = fault_rank
        self.workdir = workdir
        self.ready_file = workdir / f"{job}.ready"
        self.home = workdir / "registry"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.base_env = {
            **(env if env is not None else os.environ),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(free_port()),
            "NCCL_DOCTOR_HOME": str(self.home),
            "PYTHONUNBUFFERED": "1",
            # torch.compile's cache, in the job's folder rather than the shared TMPDIR
            "TORCHINDUCTOR_CACHE_DIR": str(workdir / "inductor"),
        }
        self.program = ["-m", "doctor.demo.job"]
        self.torchrun_args: list[str] = [
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{free_port()}",
            "--rdzv-id",
            job,
        ]
        self.job_args = [
            "--fault",
            fault,
            "--rank",
            str(fault_rank),
            "--step",
            "3",
            "--steps",
            "100000",
            "--ready-file",
            str(self.ready_file),
            "--hang-limit",
            "300",
            "--linger",
            "300",
            *args,
        ]

    def _spawn(self, argv: list[str], env: Mapping[str, str], log: Path) -> None:
        with log.open("ab") as out:
            self.procs.append(
                subprocess.Popen(
                    argv,
                    env=dict(env),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def spawn_ranks(self) -> LocalJob:
        """Spawn the ranks without waiting for them: a test starts its next job while it
        judges this one (a start is mostly CPU-bound imports), then calls ``start``."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ready_file.unlink(missing_ok=True)
        py = sys.executable
        if self.launch == "torchrun":
            self._spawn(
                [
                    py,
                    "-m",
                    "torch.distributed.run",
                    "--nnodes",
                    "1",
                    "--nproc-per-node",
                    str(self.world),
                    *self.torchrun_args,
                    *self.program,
                    *self.job_args,
                ],
                self.base_env,
                self.workdir / f"{self.job}.log",
            )
        else:
            module = (
                ["-m", "doctor.demo.local", "--agent-rank"]
                if self.launch == "agent"
                else self.program
            )
            for rank in range(self.world):
                env = {
                    **self.base_env,
                    "RANK": str(rank),
                    "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": str(self.world),
                    "LOCAL_WORLD_SIZE": str(self.world),
                    "SLURM_JOB_ID": self.job,
                    "NCCL_DOCTOR_JOB": self.job,
                }
                self._spawn(
                    [py, *module, *self.job_args], env, self.workdir / f"{self.job}.rank{rank}.log"
                )
        return self

    def start(self, timeout: float = 90.0) -> LocalJob:
        """Spawn the ranks (unless ``spawn_ranks`` did), then wait until each reached its fault."""
        if not self.procs:
            self.spawn_ranks()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float, lines: int | None = None) -> None:
        """Until ``lines`` ready lines (default: one per rank) are in the ready file."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.ready_file.exists() and len(self.ready_file.read_text().splitlines()) >= (
                lines or self.world
            ):
                return
            if self.procs and all(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"demo job {self.job} ({self.fault}) did not reach its fault point")

    def stop(self) -> None:
        """Terminate, then kill, then reap everything this job started, children included."""
        import psutil

        tree: list[psutil.Process] = []
        for proc in self.procs:
            try:
                top = psutil.Process(proc.pid)
                tree += [top, *top.children(recursive=True)]
            except psutil.Error:
                continue
        for member in tree:  # a stopped process handles SIGTERM only once continued
            try:
                member.send_signal(signal.SIGCONT)
            except psutil.Error:
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for member in tree:
                try:
                    member.send_signal(sig)
                except psutil.Error:
                    pass
            _gone, tree = psutil.wait_procs(
                tree, timeout=TERM_GRACE_S if sig == signal.SIGTERM else 5
            )
            if not tree:
                break
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._remove_torchrun_folder()

    def _remove_torchrun_folder(self) -> None:
        """torchrun's log folder (``$TMPDIR/torchelastic_*/<run id>_*``, a mkdtemp it
        leaves behind whenever it is killed): this job's evidence, gone with the job."""
        for run in Path(tempfile.gettempdir()).glob(f"torchelastic_*/{self.job}_*"):
            if all(p.name.startswith(f"{self.job}_") for p in run.parent.iterdir()):
                shutil.rmtree(run.parent, ignore_errors=True)

    def triage(
        self, *args: str, timeout: float = 120, by_pids: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """``nccl-doctor triage --job JOB ARGS`` in a fresh interpreter, as a user runs it;
        ``by_pids``: ``--pids`` of the processes it started (a rank each, but under
        ``torchrun``), as a user who kept ``srun``'s does once every rank ended."""
        env = {"PATH": os.environ["PATH"], "NCCL_DOCTOR_HOME": str(self.home)}
        env.update({k: os.environ[k] for k in ("TMPDIR",) if k in os.environ})
        job = (
            ["--pids", ",".join(str(p.pid) for p in self.procs)] if by_pids else ["--job", self.job]
        )
        return subprocess.run(
            [sys.executable, "-m", "doctor", "triage", *job, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )

    def __enter__(self) -> LocalJob:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def agent_rank(argv: list[str]) -> int:
    """One rank as ``nccl-doctor launch`` leaves it: registered, agent running, then the job."""
    from doctor.demo import job
    from doctor.jobdir import agent
    from doctor.jobdir.registry import RankRecord, job_dir, register_rank
    from doctor.launch.prologue import registered
    from doctor.trust.process_identity import this_process

    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    directory = job_dir(env["NCCL_DOCTOR_JOB"], env)
    me = this_process()
    register_rank(
        RankRecord(
            env["NCCL_DOCTOR_JOB"],
            rank,
            world,
            int(env["LOCAL_RANK"]),
            socket.gethostname(),
            me.pid,
            time.time(),
            agent=True,
            pid_start=me.start,
        ),
        directory,
    )
    with registered(directory, rank, me), agent.Agent(directory, rank):
        return job.main(argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--agent-rank"]:
        sys.exit(agent_rank(sys.argv[2:]))
    sys.exit("usage: python -m doctor.demo.local --agent-rank JOB-ARGS...")
