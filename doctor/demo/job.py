"""A CPU training-like loop over gloo with one injectable fault, Flight Recorder on.

Start it under torchrun, or one process per rank with ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` in the environment::

    torchrun --nproc-per-node 4 -m doctor.demo.job --fault wrong-collective --rank 2 --step 3

Every step does what a data-parallel job does, each part in its own function so
a stack names it: ``load_batch`` -> ``forward_backward`` -> ``sync_gradients``
(all_reduce on the world group) -> ``sync_subgroup`` (all_reduce inside a
``new_group`` half of the world) -> ``log_metrics`` (a one-element all_reduce).

Faults (``--fault NAME``, on rank ``--rank`` at step ``--step``):

=================  ==============================================================
none               healthy
wrong-collective   the rank issues all_gather where the others all_reduce
except-clause      the rank raises; its ``except`` clause calls barrier
skip-metric        the rank skips the metric all_reduce
subgroup-mismatch  the rank issues all_gather inside its sub-group
straggler          the rank sleeps ``--straggle`` s in ``load_batch`` from that step on
dataloader         the rank blocks on a queue in ``load_batch`` (GIL released)
gil                the rank spins in a pure-Python loop (GIL held)
compile            the rank runs cold ``torch.compile`` over and over
kill               the rank SIGKILLs itself
early-exit         the rank leaves the loop and its program ends, exit code 0, as one
                   whose share of the data ran out
=================  ==============================================================

``dataloader``, ``gil`` and ``compile`` hold the rank for ``--hang-limit``
seconds, then it goes on (so a forgotten job ends; a peer whose ``--timeout``
is shorter fails first, as in a real job).

On a collective error (or SIGTERM, which torchrun sends to the survivors when
one rank fails) every rank writes its own Flight Recorder trace to
``--fr-dump-dir/rank_<N>`` (pickle, or JSON with ``--fr-dump-format json``),
and it also does so at the end of a run that finished, then waits
``--linger`` seconds before exiting (so live triage can still look at it).
``--ready-file`` gets one line per rank when it reaches the fault point:
tests wait on those lines, not on sleeps.
"""

from __future__ import annotations

import argparse
import datetime
import os
import queue
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doctor.demo.inject import append_line

FAULTS = (
    "none",
    "wrong-collective",
    "except-clause",
    "skip-metric",
    "subgroup-mismatch",
    "straggler",
    "dataloader",
    "gil",
    "compile",
    "kill",
    "early-exit",
)
GRAD_SIZE = 1024
FR_BUFFER_ENTRIES = "2000"


@dataclass(frozen=True)
class Options:
    fault: str
    fault_rank: int
    fault_step: int
    steps: int
    timeout: float
    step_time: float
    straggle: float
    hang_limit: float
    linger: float
    fr_dump_dir: Path | None
    fr_dump_format: str
    ready_file: Path | None


def parse(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(
        prog="python -m doctor.demo.job", description=__doc__.split("\n")[0]
    )
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--rank", type=int, default=1, help="the rank that misbehaves")
    p.add_argument("--step", type=int, default=2, help="the step at which it does")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument(
        "--timeout", type=float, default=300.0, help="process group (collective) timeout, seconds"
    )
    p.add_argument("--step-time", type=float, default=0.05, help="compute time per step, s")
    p.add_argument("--straggle", type=float, default=0.2, help="straggler delay per step, s")
    p.add_argument(
        "--hang-limit",
        type=float,
        default=120.0,
        help="how long dataloader/gil/compile hold the rank, s",
    )
    p.add_argument("--linger", type=float, default=0.0, help="stay alive after an error, s")
    p.add_argument("--fr-dump-dir", type=Path)
    p.add_argument("--fr-dump-format", choices=("pickle", "json"), default="pickle")
    p.add_argument("--ready-file", type=Path)
    a = p.parse_args(argv)
    return Options(
        a.fault,
        a.rank,
        a.step,
        a.steps,
        a.timeout,
        a.step_time,
        a.straggle,
        a.hang_limit,
        a.linger,
        a.fr_dump_dir,
        a.fr_dump_format,
        a.ready_file,
    )


class LeftLoop(Exception):
    """The rank's loop ends early (its data ran out): its program ends with exit code 0."""


class Job:
    """One rank's state: its groups, its 'model', and the fault it may inject."""

    def __init__(self, opts: Options, rank: int, world: int) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.opts, self.rank, self.world = opts, rank, world
        half = max(world // 2, 1)
        # new_group is collective: every rank creates both halves, uses its own.
        halves = [list(range(0, half)), list(range(half, world))]
        # made with the start-up timeout (new_group waits for every rank), then given the
        # collective timeout, which new_group would not inherit
        start = datetime.timedelta(seconds=max(opts.timeout, START_TIMEOUT_S))
        groups = [dist.new_group(ranks, timeout=start) for ranks in halves if ranks]
        self.subgroup = groups[0] if rank < half else groups[-1]
        _set_collective_timeout(opts.timeout, self.subgroup)
        self.weights = torch.ones(GRAD_SIZE)

    def faulty(self, step: int, fault: str) -> bool:
        o = self.opts
        return o.fault == fault and self.rank == o.fault_rank and step >= o.fault_step

    def step(self, step: int) -> None:
        if step == self.opts.fault_step:
            self.ready(step)
        if self.faulty(step, "kill"):
            os.kill(os.getpid(), signal.SIGKILL)
        if self.faulty(step, "early-exit"):
            raise LeftLoop(step)
        batch = load_batch(self, step)
        try:
            if self.faulty(step, "except-clause") and step == self.opts.fault_step:
                raise ValueError(f"corrupt batch at step {step}")
            loss, grads = forward_backward(self, batch, step)
        except ValueError:
            self.dist.barrier()  # "wait for everyone before failing": a different collective
            raise
        sync_gradients(self, grads, step)
        sync_subgroup(self, grads, step)
        log_metrics(self, loss, step)

    def ready(self, step: int) -> None:
        if self.opts.ready_file is None:
            return
        append_line(
            self.opts.ready_file, f"ready rank={self.rank} step={step} fault={self.opts.fault}\n"
        )


def load_batch(job: Job, step: int) -> Any:
    """The data loader; the straggler and the stuck-loader faults live here."""
    if job.faulty(step, "straggler"):
        time.sleep(job.opts.straggle)
    if job.faulty(step, "dataloader") and step == job.opts.fault_step:
        _next_batch_from_workers(job.opts.hang_limit)
    return job.torch.full((GRAD_SIZE,), float(step + 1))


def _next_batch_from_workers(limit: float) -> None:
    """Wait for a batch no worker will ever produce (queue.get releases the GIL)."""
    try:
        queue.Queue().get(timeout=limit)
    except queue.Empty:
        pass


def forward_backward(job: Job, batch: Any, step: int) -> tuple[Any, Any]:
    if job.faulty(step, "gil") and step == job.opts.fault_step:
        _tokenize_in_python(job.opts.hang_limit)
    if job.faulty(step, "compile") and step == job.opts.fault_step:
        _compile_model(job, job.opts.hang_limit)
    time.sleep(job.opts.step_time)
    grads = batch * job.weights
    return grads.mean(), grads


def _tokenize_in_python(limit: float) -> None:
    """A pure-Python loop: it holds the GIL for the whole time."""
    deadline = time.monotonic() + limit
    total = 0
    while time.monotonic() < deadline:
        for i in range(10_000):
            total += i * i % 7


def _compile_model(job: Job, limit: float) -> None:
    """Cold torch.compile, again and again (reset in between) until ``limit``."""
    import torch._dynamo

    torch = job.torch
    deadline = time.monotonic() + limit
    x = torch.randn(64, 64)
    while time.monotonic() < deadline:
        torch._dynamo.reset()

        def block(t: Any) -> Any:
            for _ in range(8):
                t = torch.nn.functional.gelu(t @ t.T) + t.sin()
            return t.softmax(-1)

        torch.compile(block)(x)


def sync_gradients(job: Job, grads: Any, step: int) -> None:
    if job.faulty(step, "wrong-collective") and step == job.opts.fault_step:
        job.dist.all_gather([job.torch.empty_like(grads) for _ in range(job.world)], grads)
    else:
        job.dist.all_reduce(grads)


def sync_subgroup(job: Job, grads: Any, step: int) -> None:
    if job.faulty(step, "subgroup-mismatch") and step == job.opts.fault_step:
        size = job.dist.get_world_size(job.subgroup)
        job.dist.all_gather(
            [job.torch.empty_like(grads) for _ in range(size)], grads, group=job.subgroup
        )
    else:
        job.dist.all_reduce(grads, group=job.subgroup)


def log_metrics(job: Job, loss: Any, step: int) -> None:
    if job.faulty(step, "skip-metric") and step == job.opts.fault_step:
        return  # e.g. "only log when the loss is finite" evaluated per rank
    job.dist.all_reduce(loss.reshape(1))


START_TIMEOUT_S = 120.0
"""How long the ranks wait for each other to start (rendezvous, gloo's connections,
``new_group``); the collectives then wait ``--timeout``."""


def _set_collective_timeout(seconds: float, group: Any = None) -> None:
    """The timeout of ``group``'s collectives (the default group's when None)."""
    # private c10d API, absent from torch's stubs; init_process_group's timeout is also
    # the start-up's
    from torch.distributed import distributed_c10d

    distributed_c10d._set_pg_timeout(datetime.timedelta(seconds=seconds), group)


def dump_flight_recorder(opts: Options, rank: int) -> None:
    """Write this rank's own trace, atomically, as ``DIR/rank_<rank>``."""
    if opts.fr_dump_dir is None:
        return
    import torch._C._distributed_c10d as c10d

    # private c10d API (what torch's own dump on timeout calls), absent from torch's stubs
    if opts.fr_dump_format == "json":
        data = c10d._dump_fr_trace_json(True, True)  # type: ignore[attr-defined]
    else:
        data = c10d._dump_fr_trace(True, True, False)  # type: ignore[attr-defined]
    opts.fr_dump_dir.mkdir(parents=True, exist_ok=True)
    tmp = opts.fr_dump_dir / f".rank_{rank}.tmp"
    tmp.write_bytes(data)
    tmp.replace(opts.fr_dump_dir / f"rank_{rank}")


def enable_flight_recorder(env: dict[str, str]) -> None:
    """Flight Recorder reads its buffer size when the first process group is made."""
    env.setdefault("TORCH_FR_BUFFER_SIZE", FR_BUFFER_ENTRIES)


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    enable_flight_recorder(os.environ)  # type: ignore[arg-type]
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    # torchrun SIGTERMs the surviving ranks when one fails: dump before going.
    def dump_and_exit(*_: object) -> None:
        dump_flight_recorder(opts, rank)
        os._exit(143)

    signal.signal(signal.SIGTERM, dump_and_exit)
    # start-up (the store's rendezvous, gloo's connections) waits for the slowest rank's
    # import of torch, which on a loaded machine takes longer than a test's collective timeout
    start = datetime.timedelta(seconds=max(opts.timeout, START_TIMEOUT_S))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=start)
    _set_collective_timeout(opts.timeout)
    code = 0
    try:
        job = Job(opts, rank, world)
        for step in range(opts.steps):
            job.step(step)
    except LeftLoop:
        dump_flight_recorder(opts, rank)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # the peers wait in the collective it never issues; no teardown with them
    except Exception as exc:  # a collective timeout or a peer's death: record, then exit 1
        print(f"rank {rank}: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
        code = 1
    dump_flight_recorder(opts, rank)
    if code:
        time.sleep(opts.linger)
        os._exit(code)  # a broken gloo group can block in destroy_process_group
    dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main())
