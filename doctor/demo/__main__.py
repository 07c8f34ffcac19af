"""``make demo``: preflight this host, then hang a real DDP training job and triage it.

The job is ``doctor.demo.train_ddp``: a small GPT trained with
``DistributedDataParallel`` over gloo on 4 CPU ranks, whose gradient
all-reduces run from DDP's backward hooks. The fault is done to it from
outside, as a user meets it: by default rank 2's data shard turns into a FIFO
that nobody writes, so its ``get_batch`` blocks while the others wait in DDP's
reducer. Every step runs the real ``nccl-doctor`` command a user would type, so
the demo shows exactly what they will see. It exits 0 only when triage names
the class and rank that were injected, so a broken demo cannot look like a good one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from doctor.demo.training import TrainingJob
from doctor.errors import TorchMissing
from doctor.torchjob.torchdep import require_torch

EXPECTED = {
    "fifo": "cpu_stuck",
    "sigstop": "cpu_stuck",
    "gil": "cpu_stuck",
    "kill": "rank_loss",
}


def doctor(*args: str, echo: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``nccl-doctor ARGS``; with ``echo``, show it as a user would see it."""
    done = subprocess.run(
        [sys.executable, "-m", "doctor", *args], text=True, capture_output=True, timeout=timeout
    )
    if echo:
        print(f"\n$ nccl-doctor {' '.join(args)}", flush=True)
        print(done.stdout + done.stderr, end="", flush=True)
        print(f"(exit {done.returncode})", flush=True)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m doctor.demo", description=__doc__)
    parser.add_argument("--fault", choices=sorted(EXPECTED), default="fifo")
    parser.add_argument("--rank", type=int, default=2, help="the rank that misbehaves")
    args = parser.parse_args(argv)
    try:
        require_torch("the demo job")
    except TorchMissing as exc:
        print(f"python -m doctor.demo: {exc}", file=sys.stderr)
        return 2

    print("== 1. preflight: is this environment going to hang? (single-node lane)")
    doctor("preflight", "--lane", "single-node")

    job = "nccl-doctor-demo"
    # torchrun's agent tears every rank down when one dies: a lost rank hangs its peers only
    # under a launcher that leaves them running, as srun does (one process per rank)
    launch = "per-rank" if args.fault == "kill" else "torchrun"
    print(
        f"\n== 2. a 4-rank DDP training job ({launch}, gloo, CPU); at step 3 rank "
        f"{args.rank} gets fault '{args.fault}' from outside; waiting until it hangs",
        flush=True,
    )
    with (
        tempfile.TemporaryDirectory(prefix="nccl-doctor-demo-") as tmp,
        TrainingJob(
            job, "ddp", args.fault, Path(tmp), launch=launch, fault_rank=args.rank
        ) as running,
    ):
        print(f"   job {running.job} is hung; triaging it without stopping it", flush=True)
        print("\n== 3. live triage of the hung job")
        bundle = Path(tmp) / "evidence.tar.gz"
        doctor("triage", "--job", job, "--once", "--bundle", str(bundle))
        print("\n== 4. post-mortem: the bundle alone gives the same verdict elsewhere")
        doctor("analyze", str(bundle))
        judged = doctor("analyze", str(bundle), "--json", echo=False)
    if judged.returncode == 2:
        print("\nthe demo failed: triage produced no bundle to judge (see above)")
        return 1
    verdict = json.loads(judged.stdout)["verdict"]
    want = EXPECTED[args.fault]
    right = verdict["hang_class"] == want and verdict["culprit_ranks"] == [args.rank]
    print(
        f"\ninjected: {want} on rank {args.rank}; found: {verdict['hang_class']} on ranks "
        f"{verdict['culprit_ranks']} -> {'RIGHT' if right else 'WRONG'}"
    )
    return 0 if right else 1


if __name__ == "__main__":
    sys.exit(main())
