"""The bug zoo: hang bugs from public threads, each a real training script (``cases/``).

Each case is a 4-rank CPU/gloo job under torchrun whose bug is in the script's own code
(the docstring of each script cites the thread it is modelled on). ``ZooJob`` starts it,
waits until the *truth* holds in the ranks' stacks (read here, apart from triage: in a
Python read, then in a ``py-spy dump --native`` read 0.5 s later), then runs
``nccl-doctor triage --pids ... --once --json`` as a user would, ``runs`` times.
``tests/zoo/test_zoo.py`` asserts on every run; run this file to measure more runs per
case and print the table for docs/triage.md (the bug zoo)::

    .venv/bin/python tests/zoo/zoo.py [--runs N] [--cases a,b]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from doctor.triage.sources.pyspy import pyspy_binary
from doctor.trust.subproc import free_port

CASES_DIR = Path(__file__).parent / "cases"
WORLD = 4
Threads = list[dict[str, Any]]
"""One rank's ``py-spy dump --native --json``: its threads."""


def _main_frames(threads: Threads) -> list[str]:
    main = next((t for t in threads if t.get("thread_name") == "MainThread"), None)
    return [f["name"] for f in (main or {}).get("frames", [])]


def _in(threads: Threads, *names: str) -> bool:
    frames = _main_frames(threads)
    return all(any(n == f or f.endswith(f".{n}") for f in frames) for n in names)


def _apart(stacks: dict[int, Threads], odd: int, its: Sequence[str], others: str) -> bool:
    """Rank ``odd``'s main thread is in every frame of ``its``; every other rank's in ``others``."""
    return _in(stacks[odd], *its) and all(_in(t, others) for r, t in stacks.items() if r != odd)


def _gil_held_by_helper(threads: Threads) -> bool:
    """A thread other than the main one owns the GIL while idle (in ``read``, where native
    frames show it); the main thread does not own it."""
    main = next((t for t in threads if t.get("thread_name") == "MainThread"), {})
    return not main.get("owns_gil") and any(
        t is not main and t.get("owns_gil") and not t.get("active") and _reads(t["frames"])
        for t in threads
    )


def _reads(frames: list[dict[str, Any]]) -> bool:
    native = [f["name"] for f in frames if f.get("module")]
    return not native or "read" in native


@dataclass(frozen=True)
class Case:
    script: str
    right: frozenset[tuple[str, tuple[int, ...]]]
    """Verdicts (class, culprits) that are right for this bug."""
    truth: Callable[[dict[int, Threads]], bool]
    """What the ranks' native stacks must show before triage runs."""
    hang: bool = True
    settle_s: float = 150.0


def _one_apart(
    script: str, odd: int, its: tuple[str, ...], others: str = "_engine_run_backward"
) -> Case:
    """A rank-conditional collective: rank ``odd`` in ``its``, every other rank waiting in
    ``others``; the right verdict blames rank ``odd`` for a mismatch."""
    return Case(
        script,
        frozenset({("collective_mismatch", (odd,))}),
        lambda s: _apart(s, odd, its, others),
    )


CASES: dict[str, Case] = {
    "gil_ddp": Case(
        "gil_ddp.py",
        frozenset({("cpu_stuck", (2,))}),
        lambda s: _gil_held_by_helper(s[2]),
    ),
    "gil_lightning": Case(
        "gil_lightning.py",
        frozenset({("cpu_stuck", (2,))}),
        lambda s: _gil_held_by_helper(s[2]),
    ),
    "uneven_buffers": Case(
        "uneven_buffers.py",
        frozenset({("collective_mismatch", (3,))}),
        lambda s: _in(s[3], "barrier", "main") and all(_in(s[r], "train_step") for r in (0, 1, 2)),
    ),
    "subgroup_wrong_group": Case(
        "subgroup_wrong_group.py",
        frozenset({("collective_mismatch", (2,))}),
        lambda s: (
            _in(s[2], "all_reduce", "log_eval_loss")
            and _in(s[0], "all_reduce", "sync_stats")
            and _in(s[1], "all_reduce", "sync_stats")
            and _in(s[3], "_distributed_broadcast_coalesced")
        ),
    ),
    "rank0_barrier": _one_apart("rank0_barrier.py", 0, ("barrier", "save_checkpoint")),
    "nan_skip_step": _one_apart("nan_skip_step.py", 1, ("barrier", "main")),
    "rank0_eval_metric": _one_apart(
        "rank0_eval_metric.py", 0, ("all_reduce", "evaluate"), others="barrier"
    ),
    "healthy_long_phase": Case(
        "healthy_long_phase.py",
        frozenset({("healthy", ())}),
        lambda s: all(_in(s[r], "pack_examples") for r in range(WORLD)),
        hang=False,
    ),
}


@dataclass
class Look:
    seconds: float
    verdict: dict[str, Any]

    @property
    def found(self) -> tuple[str, tuple[int, ...]]:
        return self.verdict["hang_class"], tuple(self.verdict["culprit_ranks"])


@dataclass
class ZooJob:
    """One case's job under torchrun, its truth checked, then looked at by triage."""

    name: str
    workdir: Path
    case: Case = field(init=False)
    proc: subprocess.Popen[bytes] | None = None
    pids: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.case = CASES[self.name]

    def __enter__(self) -> ZooJob:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH", "NCCL_"))}
        env.update(OMP_NUM_THREADS="1", RES_OPTIONS="timeout:1 attempts:1")
        with (self.workdir / f"{self.name}.log").open("wb") as log:
            self.proc = self._start(env, log)
        return self

    def _start(self, env: dict[str, str], log: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                f"--nproc-per-node={WORLD}",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{free_port()}",
                f"--rdzv-id=zoo-{self.name}",
                f"--log-dir={self.workdir / 'torchrun-logs'}",  # else a torchelastic_* in TMPDIR
                str(CASES_DIR / self.case.script),
            ],
            cwd=self.workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def __exit__(self, *exc: object) -> None:
        """Kill the ranks (torchrun starts each in a session of its own), then torchrun."""
        if self.proc is None:
            return
        try:
            ranks = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            ranks = []
        for child in ranks:
            with contextlib.suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(ranks, timeout=10)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def log(self) -> str:
        return (self.workdir / f"{self.name}.log").read_text(errors="replace")[-3000:]

    def _find_ranks(self, deadline: float) -> None:
        assert self.proc is not None
        while time.monotonic() < deadline and self.proc.poll() is None:
            ranks = {}
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                try:
                    rank = child.environ().get("RANK")
                except psutil.Error:
                    continue
                if rank is not None and self.case.script in " ".join(child.cmdline()):
                    ranks[int(rank)] = child.pid
            if len(ranks) == WORLD:
                self.pids = ranks
                return
            time.sleep(0.3)
        raise AssertionError(f"{self.name}: {WORLD} ranks did not start\n{self.log()}")

    def dump(self, native: bool) -> dict[int, Threads]:
        """Every rank's threads (with native frames if ``native``), read apart from triage."""
        binary = pyspy_binary(os.environ)
        assert binary is not None, "py-spy is not installed"
        out = {}
        for rank, pid in self.pids.items():
            done = subprocess.run(
                [binary, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else []),
                capture_output=True,
                text=True,
                timeout=30,
            )
            out[rank] = json.loads(done.stdout) if done.returncode == 0 else []
        return out

    def wait_for_truth(self) -> float:
        """Seconds until the truth held in a Python read and then in a native read (native
        frames cost about a second a rank: only once the cheap read agrees); fails past
        settle_s."""
        start = time.monotonic()
        deadline = start + self.case.settle_s
        self._find_ranks(deadline)
        while time.monotonic() < deadline:
            if self.case.truth(self.dump(native=False)):
                time.sleep(0.5)
                if self.case.truth(self.dump(native=True)):
                    return time.monotonic() - start
            time.sleep(0.3)
        raise AssertionError(f"{self.name}: the truth never held\n{self.log()}")

    def look(self) -> Look:
        pids = ",".join(str(self.pids[r]) for r in sorted(self.pids))
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "doctor", "triage", "--pids", pids, "--once", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.monotonic() - start
        assert done.stdout.strip(), done.stderr
        return Look(took, json.loads(done.stdout)["verdict"])


def right(case: Case, look: Look) -> bool:
    """Whether a verdict is right: one of the case's; for a healthy job on a loaded host,
    also a rank that honestly lags (a straggler of medium confidence, never a hang)."""
    if look.found in case.right:
        return True
    honest_lag = look.found[0] == "straggler" and look.verdict["confidence"] == "medium"
    return not case.hang and honest_lag


def run_case(name: str, workdir: Path, runs: int) -> tuple[float, list[Look]]:
    with ZooJob(name, workdir) as job:
        settled = job.wait_for_truth()
        looks = [job.look() for _ in range(runs)]
    print(f"zoo {name}: truth after {settled:.1f}s, looks {[round(x.seconds, 1) for x in looks]}")
    return settled, looks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args(argv)
    import tempfile

    print("| case | runs | right | wrong verdicts | median s |\n|---|---|---|---|---|")
    failed = 0
    for name in args.cases.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            _, looks = run_case(name, Path(tmp), args.runs)
        good = [x for x in looks if right(CASES[name], x)]
        wrong = sorted({f"{c} {list(r)}" for c, r in (x.found for x in looks if x not in good)})
        failed += len(looks) - len(good)
        median = statistics.median(x.seconds for x in looks)
        print(
            f"| {name} | {len(looks)} | {len(good)} | {', '.join(wrong) or '-'} | {median:.1f} |",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
