"""Preflight startup budget: `nccl-doctor preflight` (no --bench) must take at most half of a
bare `python -c "import torch"` on the same machine.

Both run as fresh interpreters, interleaved so that load from other processes hits both
alike; the medians are compared. Exits 1 when preflight is over half.

    .venv/bin/python benchmarks/bench_preflight.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUDGET = 0.5


def wall(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "USER")}
    env["PYTHONPATH"] = str(REPO)
    torch_cmd = [sys.executable, "-c", "import torch"]
    preflight_cmd = [sys.executable, "-m", "doctor", "preflight"]
    with tempfile.TemporaryDirectory() as cwd:
        wall(torch_cmd, env, cwd)  # warm the page cache for both
        wall(preflight_cmd, env, cwd)
        torch_s, preflight_s = [], []
        for _ in range(runs):
            torch_s.append(wall(torch_cmd, env, cwd))
            preflight_s.append(wall(preflight_cmd, env, cwd))
    t, p = statistics.median(torch_s), statistics.median(preflight_s)
    print(f"python -c 'import torch'      median {t:.3f}s  (min {min(torch_s):.3f}s, {runs} runs)")
    print(f"nccl-doctor preflight         median {p:.3f}s  (min {min(preflight_s):.3f}s)")
    print(f"ratio {p / t:.2f} (budget {BUDGET:.2f}): {'OK' if p <= BUDGET * t else 'OVER BUDGET'}")
    return 0 if p <= BUDGET * t else 1


if __name__ == "__main__":
    sys.exit(main())
