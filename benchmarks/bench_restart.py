"""Restart benchmark: fault -> re-entry of the training function on every rank.

The same 4-rank gloo CPU job (rank 1 raises at step 5) under this wrapper,
NVIDIA nvidia-resiliency-ext 0.4.1 (the ``compare`` extra) and a torchrun
``--max-restarts`` restart; then the hard timeout (6 s, a rank deadlocked in C
holding the GIL) and the step-time overhead (30 ms steps: a sleep standing in for
compute, then an all_reduce; plain and wrapped jobs alternate three times and the
fastest of each is compared). Our restart is repeated ``REPS`` times (20) for its
tail: median and 95th percentile. Exits 1 when a target is missed:
ours < NVIDIA's, ours <= torchrun / 4, p95 < 0.25 s, hard timeout within 7 s,
overhead < 1 %.

    .venv/bin/python benchmarks/bench_restart.py
    .venv/bin/python benchmarks/bench_restart.py --tail 20   # only the restart's tail
    .venv/bin/python benchmarks/bench_restart.py --launchers 20 [plain torchrun launch]

``--launchers`` repeats the restart under each launcher with no key set by hand: a
plain one-process-per-rank launcher (the wrapper embedded; no job id, no job
directory), torchrun (embedded; the wrapper's own loopback store) and ``nccl-doctor
launch --wrap`` under the plain launcher; it prints the load average before and after.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from doctor.trust.subproc import free_port

HERE = Path(__file__).resolve().parent
RANK = HERE / "restart_bench_rank.py"
REPO = HERE.parent
WORLD = 4
REPS = 20
P95_TARGET = 0.25


LAUNCHERS = ("plain", "torchrun", "launch")


def run(
    mode: str, extra: dict[str, str] | None = None, timeout: float = 180, launcher: str = ""
) -> list[str]:
    """Run the 4-rank job (one process per rank, or under torchrun); the log lines.
    ``launcher`` runs our wrapper with no job directory given, under that launcher."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-restart-{mode}-"))
    try:
        if launcher:
            return _under(tmp, launcher, timeout)
        return _run_in(tmp, mode, extra, timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _under(tmp: Path, launcher: str, timeout: float) -> list[str]:
    """The wrapper's job under ``launcher``, the way a user starts it: no key, no job dir."""
    log, port = tmp / "log", str(free_port())
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("NCCL_DOCTOR_JOB", "NCCL_DOCTOR_STORE"))
    }
    env.update(
        MODE="launch" if launcher == "launch" else "ours",
        BENCH_LOG=str(log),
        PYTHONPATH=str(REPO),
        NCCL_DOCTOR_HOME=str(tmp / "home"),
        TORCH_CPP_LOG_LEVEL="ERROR",
    )
    script = [sys.executable, str(RANK)]
    if launcher == "torchrun":
        torchrun = str(Path(sys.executable).with_name("torchrun"))
        argv = [torchrun, "--nproc-per-node", str(WORLD), "--log-dir", str(tmp / "logs")]
        argv += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", str(RANK)]
        commands = [(argv, env)]
    else:
        if launcher == "launch":
            script = [sys.executable, "-m", "doctor", "launch", "--wrap", "--job", "bench"]
            script += ["--", "python", str(RANK)]
        common = {**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "4"}
        commands = [(script, {**common, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(4)]
    procs = [
        subprocess.Popen(argv, env=e, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for argv, e in commands
    ]
    _wait_all(procs, timeout)
    return log.read_text().splitlines() if log.exists() else []


def _wait_all(procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    """Wait for ``procs``; past ``timeout`` they are killed (a failed run, counted as one)."""
    try:
        for proc in procs:
            proc.wait(timeout)
    except subprocess.TimeoutExpired:
        print(f"  a run did not end within {timeout:g}s: killed, counted as failed", flush=True)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _run_in(tmp: Path, mode: str, extra: dict[str, str] | None, timeout: float) -> list[str]:
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
    _wait_all(procs, timeout)
    lines = log.read_text().splitlines() if log.exists() else []
    events = tmp / "job" / "events.jsonl"  # the wrapper's restart events, as "event {json}"
    return lines + (
        [f"event {e}" for e in events.read_text().splitlines()] if events.exists() else []
    )


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
    lines = run("ours", {"HANG": "gil"}, timeout=60)
    hang = [float(line.split()[1]) for line in lines if line.startswith("hang ")]
    events = [json.loads(line[6:]) for line in lines if line.startswith("event ")]
    faults = [f for e in events for f in e["faults"]]  # type: ignore[attr-defined]
    hard = [f["time"] for f in faults if f["cause"] == "hard_timeout"]
    return (hard[0] - hang[0]) if hang and hard else None


def restart_tail(reps: int, launcher: str = "") -> list[float]:
    """Fault -> re-entry of ``reps`` repetitions of our restart (failed runs left out)."""
    seen = []
    for _ in range(reps):
        took = fault_to_reentry(run("ours", launcher=launcher))
        if took is not None:
            seen.append(took)
    return seen


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (the value at rank ceil(q * n)): no interpolation."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def describe_tail(tail: list[float]) -> str:
    if not tail:
        return "no restart completed"
    return (
        f"{len(tail)} restarts: median {statistics.median(tail):.3f}s, "
        f"p95 {percentile(tail, 0.95):.3f}s, max {max(tail):.3f}s (target p95 < {P95_TARGET}s)"
    )


def step_time(mode: str) -> float:
    """Mean over ranks of each rank's median step time (medians shrug off scheduler noise)."""
    lines = run(mode, {"STEPS": "150", "STEP_SLEEP": "0.03"})
    return statistics.mean(float(line.split()[2]) for line in lines if line.startswith("steps "))


def per_launcher(reps: int, launchers: list[str]) -> int:
    """The tail under each launcher, with the load average around it (a shared machine)."""
    print(f"fault -> re-entry on every rank (4 ranks, gloo, rank 1 raises at step 5), {reps} each")
    missed = []
    for launcher in launchers or LAUNCHERS:
        before = os.getloadavg()[0]
        tail = restart_tail(reps, launcher)
        after = os.getloadavg()[0]
        print(
            f"  {launcher:9} {describe_tail(tail)}, {reps - len(tail)} runs failed; "
            f"load average {before:.1f} -> {after:.1f}",
            flush=True,
        )
        if len(tail) < reps or percentile(tail, 0.95) >= P95_TARGET:
            missed.append(launcher)
    print("targets missed: " + ", ".join(missed) if missed else "all targets met")
    return 1 if missed else 0


def main() -> int:
    if sys.argv[1:2] == ["--launchers"]:
        return per_launcher(int(sys.argv[2]) if len(sys.argv) > 2 else REPS, sys.argv[3:])
    if sys.argv[1:2] == ["--tail"]:
        tail = restart_tail(int(sys.argv[2]) if len(sys.argv) > 2 else REPS)
        print("fault -> re-entry on every rank (4 ranks, gloo, rank 1 raises at step 5)")
        print(f"  {describe_tail(tail)}")
        print("  all: " + " ".join(f"{t:.3f}" for t in tail))
        return 0 if tail and percentile(tail, 0.95) < P95_TARGET else 1
    try:
        import nvidia_resiliency_ext  # noqa: F401

        have_nvidia = True
    except ImportError:
        have_nvidia = False
        print(
            "nvidia-resiliency-ext is not installed: pip install 'nccl-doctor[compare]' "
            "(nvidia-resiliency-ext==0.4.1) to compare; NVIDIA's number is MISSING"
        )
    tail = restart_tail(REPS)
    ours = statistics.median(tail) if tail else None
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
    print(f"  nccl-doctor wrapper        {fmt(ours)} (median; {describe_tail(tail)})")
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
    if not tail or percentile(tail, 0.95) >= P95_TARGET:
        missed.append(f"p95 under {P95_TARGET} s")
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
