"""Restart benchmark: fault -> re-entry of the training function on every rank.

The same 4-rank gloo CPU job (rank 1 raises at step 5) under this wrapper,
NVIDIA nvidia-resiliency-ext 0.4.1 (the ``compare`` extra) and a torchrun
``--max-restarts`` restart; then the hard timeout (6 s, a rank deadlocked in C
holding the GIL) and the step-time overhead (30 ms steps: a sleep standing in for
compute, then an all_reduce; plain and wrapped jobs alternate three times and the
fastest of each is compared). Exits 1 when a target is missed:
ours < NVIDIA's, ours <= torchrun / 4, hard timeout within 7 s, overhead < 1 %.

    .venv/bin/python benchmarks/bench_restart.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from doctor.subproc import free_port

HERE = Path(__file__).resolve().parent
RANK = HERE / "restart_bench_rank.py"
REPO = HERE.parent
WORLD = 4


def run(mode: str, extra: dict[str, str] | None = None, timeout: float = 180) -> list[str]:
    """Run the 4-rank job (one process per rank, or under torchrun); the log lines."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-restart-{mode}-"))
    log = tmp / "log"
    env = {
        **os.environ,
        "MODE": mode,
        "BENCH_LOG": str(log),
        "PYTHONPATH": str(REPO),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": str(WORLD),
        "NCCL_DOCTOR_JOB_DIR": str(tmp / "job"),
        "TORCH_CPP_LOG_LEVEL": "ERROR",
        **(extra or {}),
    }
    if mode == "torchrun":
        torchrun = Path(sys.executable).with_name("torchrun")
        procs = [
            subprocess.Popen(
                [
                    str(torchrun),
                    "--nproc-per-node",
                    str(WORLD),
                    "--max-restarts",
                    "1",
                    "--master-port",
                    env["MASTER_PORT"],
                    str(RANK),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        ]
    else:
        procs = [
            subprocess.Popen(
                [sys.executable, str(RANK)],
                env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for r in range(WORLD)
        ]
    try:
        for proc in procs:
            proc.wait(timeout)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    return log.read_text().splitlines() if log.exists() else []


def fault_to_reentry(lines: list[str]) -> float | None:
    faults = [float(line.split()[1]) for line in lines if line.startswith("fault ")]
    entries = [
        float(line.split()[3])
        for line in lines
        if line.startswith("entry ") and line.split()[2] == "1"
    ]
    if not faults or len(entries) < WORLD:
        return None
    return max(entries) - faults[0]


def hard_timeout_delay() -> float | None:
    """Hang start -> SIGTERM of a GIL-holding rank, hard_timeout = 6 s."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-restart-hard-"))
    lines = run("ours", {"HANG": "gil", "NCCL_DOCTOR_JOB_DIR": str(tmp)}, timeout=60)
    hang = [float(line.split()[1]) for line in lines if line.startswith("hang ")]
    events = tmp / "events.jsonl"
    if not hang or not events.exists():
        return None
    import json

    faults = [f for e in map(json.loads, events.read_text().splitlines()) for f in e["faults"]]
    hard = [f["time"] for f in faults if f["cause"] == "hard_timeout"]
    return (hard[0] - hang[0]) if hard else None


def step_time(mode: str) -> float:
    """Mean over ranks of each rank's median step time (medians shrug off scheduler noise)."""
    lines = run(mode, {"STEPS": "150", "STEP_SLEEP": "0.03"})
    return statistics.mean(float(line.split()[2]) for line in lines if line.startswith("steps "))


def main() -> int:
    try:
        import nvidia_resiliency_ext  # noqa: F401

        have_nvidia = True
    except ImportError:
        have_nvidia = False
        print(
            "nvidia-resiliency-ext is not installed: pip install 'nccl-doctor[compare]' "
            "(nvidia-resiliency-ext==0.4.1) to compare; NVIDIA's number is MISSING"
        )
    ours = fault_to_reentry(run("ours"))
    nvidia = fault_to_reentry(run("nvidia")) if have_nvidia else None
    torchrun = fault_to_reentry(run("torchrun"))
    hard = hard_timeout_delay()
    plain, wrapped = [], []
    for _ in range(3):  # alternate, so a burst of load elsewhere hits both
        plain.append(step_time("plain"))
        wrapped.append(step_time("overhead"))
    overhead = (min(wrapped) - min(plain)) / min(plain)

    def fmt(x: float | None) -> str:
        return "failed" if x is None else f"{x:.3f}s"

    print("fault -> re-entry on every rank (4 ranks, gloo, rank 1 raises at step 5)")
    print(f"  nccl-doctor wrapper        {fmt(ours)}")
    print(f"  nvidia-resiliency-ext 0.4.1 {fmt(nvidia) if have_nvidia else 'not installed'}")
    print(f"  torchrun --max-restarts 1  {fmt(torchrun)}")
    print(f"hard timeout 6s fired after  {fmt(hard)} (target <= 7s)")
    print(
        f"step time: plain {min(plain) * 1e3:.2f} ms, wrapped {min(wrapped) * 1e3:.2f} ms, "
        f"overhead {overhead * 100:+.2f}% (target < 1%)"
    )
    missed = []
    if ours is None or (have_nvidia and (nvidia is None or ours >= nvidia)):
        missed.append("faster than NVIDIA's")
    if ours is None or torchrun is None or ours > torchrun / 4:
        missed.append("at most a quarter of torchrun's")
    if hard is None or hard > 7:
        missed.append("hard timeout within 7 s")
    if overhead >= 0.01:
        missed.append("overhead under 1 %")
    if not have_nvidia:
        missed.append("NVIDIA comparison (not installed)")
    print("targets missed: " + ", ".join(missed) if missed else "all targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
