"""The bug zoo: hang bugs from public threads, each a real training script (``cases/``).

Each case is a 4-rank CPU/gloo job under torchrun whose bug is in the script's own code
(the docstring of each script cites the thread it is modelled on). ``run_zoo`` starts the
jobs in waves (hang cases several at once, healthy ones last), waits until each one's
*truth* holds in its ranks' stacks (read here, apart from triage: once its ranks are idle,
in two Python reads, then in a ``py-spy dump --native`` read), then runs ``nccl-doctor
triage --pids ... --once --json`` on each as a user would, ``runs`` times.
``tests/zoo/test_zoo.py`` asserts on every run; run this file to measure more runs per
case and print the table of docs/bug-zoo.md::

    .venv/bin/python tests/zoo/zoo.py [--runs N] [--cases a,b] [--parallel N]
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from doctor.triage.sources.native import MISSED
from doctor.triage.sources.pyspy import pyspy_binary
from doctor.trust.subproc import free_port

CASES_DIR = Path(__file__).parent / "cases"
WORLD = 4
PARALLEL = 6
"""Jobs at once: a job spends most of its 20-40 s start waiting (4 ranks importing torch);
6 jobs are 24 ranks, about 5 GB."""
LOOK_TRIES = 3
QUIET_CPU_S = 0.3
"""CPU seconds a rank of a hung job may use in a second: more, and it still starts (imports
torch, trains); its stacks are read only after (a read costs the other jobs CPU)."""
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
    settle_s: float = 420.0
    """From the job's start: several jobs start at once on 2 cores."""


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
    "dataloader_fork_lock": Case(
        "dataloader_fork_lock.py",
        frozenset({("cpu_stuck", (1,))}),
        lambda s: _apart(s, 1, ("__next__", "main"), "_engine_run_backward"),
    ),
    "metric_keys_loop": _one_apart(
        "metric_keys_loop.py", 2, ("all_reduce", "sync_metrics"), others="barrier"
    ),
    "except_collective": _one_apart(
        "except_collective.py", 3, ("all_reduce", "report_skip"), others="barrier"
    ),
    "healthy_long_eval": Case(
        "healthy_long_eval.py",
        frozenset({("healthy", ())}),
        lambda s: all(_in(s[r], "evaluate") for r in range(WORLD)),
        hang=False,
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
    skipped: list[dict[str, Any]] = field(default_factory=list)
    """What triage could not read (its ``skipped``): why a wrong look went wrong."""
    cut: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """The verdicts of earlier runs whose native dump came too late (run again)."""

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
        env["TMPDIR"] = str(self.workdir)  # a killed DataLoader leaves its pymp-* folder
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
                    worker = "RANK" in child.parent().environ()  # a rank's DataLoader worker
                except (psutil.Error, AttributeError):
                    continue
                if (
                    rank is not None
                    and not worker
                    and self.case.script in " ".join(child.cmdline())
                ):
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
        out: dict[int, Threads] = {}
        for rank, pid in self.pids.items():
            argv = [binary, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else [])
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            except subprocess.TimeoutExpired:  # a loaded host: no read this time, read again
                out[rank] = []
                continue
            out[rank] = json.loads(done.stdout) if done.returncode == 0 else []
        return out

    def wait_for_truth(self) -> float:
        """Seconds until the truth held in two Python reads a second apart and then in a
        native read (native frames cost about a second a rank, and a moving job passes
        through a hang's Python frames now and then: only once the cheap reads agree);
        fails past settle_s."""
        start = time.monotonic()
        deadline = start + self.case.settle_s
        self._find_ranks(deadline)
        held = 0
        busy = self._cpu()
        while time.monotonic() < deadline:
            was, busy = busy, self._cpu()
            if self.case.hang and any(busy.get(r, 0) - t > QUIET_CPU_S for r, t in was.items()):
                held = 0  # a hung job's ranks sit idle: no py-spy reads while they still work
                time.sleep(1.0)
                continue
            held = held + 1 if self.case.truth(self.dump(native=False)) else 0
            if held >= 2 and self.case.truth(self.dump(native=True)):
                return time.monotonic() - start
            time.sleep(1.0)
        raise AssertionError(f"{self.name}: the truth never held\n{self.log()}")

    def _cpu(self) -> dict[int, float]:
        """Each rank's CPU seconds so far."""
        out = {}
        for rank, pid in self.pids.items():
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(pid).cpu_times()
                out[rank] = times.user + times.system
        return out

    def look(self) -> Look:
        """One ``triage --once`` as a user runs it; again (up to ``LOOK_TRIES`` times) while
        triage says a native dump did not finish in time: on a loaded host the evidence
        was cut short, which is not a verdict to judge."""
        pids = ",".join(str(self.pids[r]) for r in sorted(self.pids))
        cut: list[tuple[str, tuple[int, ...]]] = []
        for attempt in range(1, LOOK_TRIES + 1):
            start = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "doctor", "triage", "--pids", pids, "--once", "--json"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            took = time.monotonic() - start
            assert done.stdout.strip(), done.stderr
            doc = json.loads(done.stdout)
            look = Look(took, doc["verdict"], doc["skipped"], tuple(cut))
            if attempt == LOOK_TRIES or all(s["reason"] != MISSED for s in doc["skipped"]):
                return look
            cut.append(look.found)
        raise AssertionError("unreachable")


def right(case: Case, look: Look) -> bool:
    """Whether a verdict is right: one of the case's; for a healthy job on a loaded host,
    also a rank that honestly lags (a straggler of medium confidence, never a hang)."""
    if look.found in case.right:
        return True
    honest_lag = look.found[0] == "straggler" and look.verdict["confidence"] == "medium"
    return not case.hang and honest_lag


@dataclass
class Outcome:
    """One case's run: seconds until its truth held and its looks, or why there are none."""

    name: str
    settled: float = 0.0
    looks: list[Look] = field(default_factory=list)
    error: str = ""


def waves(names: Sequence[str], parallel: int) -> list[list[str]]:
    """Hang cases ``parallel`` at a time, then the healthy ones: a healthy job keeps its 4
    ranks on the CPU, which would slow the other cases' reads and looks."""
    hangs = [n for n in names if CASES[n].hang]
    healthy = [n for n in names if not CASES[n].hang]
    out = [hangs[i : i + parallel] for i in range(0, len(hangs), parallel)]
    return [w for w in out + [healthy] if w]


def run_wave(names: Sequence[str], workdir: Path, runs: int) -> dict[str, Outcome]:
    """Start every case's job at once, wait until each one's truth holds (in parallel:
    mostly waiting), then look at them one after another on a host where every job has
    settled, and stop them."""
    outcomes = {n: Outcome(n) for n in names}
    with contextlib.ExitStack() as stack:
        jobs = {n: stack.enter_context(ZooJob(n, _folder(workdir, n))) for n in names}

        def settle(name: str) -> None:
            try:
                outcomes[name].settled = jobs[name].wait_for_truth()
            except AssertionError as exc:
                outcomes[name].error = str(exc)

        with ThreadPoolExecutor(len(names)) as pool:
            list(pool.map(settle, names))
        for name in names:
            if not outcomes[name].error:
                outcomes[name].looks = [jobs[name].look() for _ in range(runs)]
    return outcomes


def _folder(workdir: Path, name: str) -> Path:
    folder = workdir / name
    folder.mkdir(exist_ok=True)
    return folder


def run_zoo(
    names: Sequence[str], workdir: Path, runs: int, parallel: int = PARALLEL
) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}
    for wave in waves(names, parallel):
        start = time.monotonic()
        outcomes.update(run_wave(wave, workdir, runs))
        print(f"zoo wave of {len(wave)}: {time.monotonic() - start:.0f}s", flush=True)
    for o in outcomes.values():
        looks = [(round(x.seconds, 1), len(x.cut)) for x in o.looks]
        print(f"zoo {o.name}: truth after {o.settled:.1f}s, looks (s, runs cut) {looks}")
    return outcomes


def table(outcomes: dict[str, Outcome]) -> tuple[str, int]:
    """The Markdown table of the runs and the number of wrong or missing looks."""
    rows = [
        "| case | looks | right | wrong verdicts | median s to verdict |",
        "|---|---|---|---|---|",
    ]
    failed = 0
    for name, o in outcomes.items():
        good = [x for x in o.looks if right(CASES[name], x)]
        wrong = sorted({f"{c} {list(r)}" for c, r in (x.found for x in o.looks if x not in good)})
        failed += len(o.looks) - len(good) + (1 if o.error else 0)
        median = f"{statistics.median(x.seconds for x in o.looks):.1f}" if o.looks else "-"
        why = ", ".join(wrong) or ("no truth: " + o.error.splitlines()[0] if o.error else "-")
        rows.append(f"| {name} | {len(o.looks)} | {len(good)} | {why} | {median} |")
    return "\n".join(rows), failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--parallel", type=int, default=PARALLEL)
    args = parser.parse_args(argv)
    import tempfile

    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = run_zoo(args.cases.split(","), Path(tmp), args.runs, args.parallel)
    text, failed = table(outcomes)
    for o in outcomes.values():
        for x in o.looks:
            if not right(CASES[o.name], x):
                print(f"{o.name}: {x.verdict['summary']}; skipped {x.skipped}")
    print(text)
    print(f"{len(outcomes)} cases in {time.monotonic() - start:.0f}s; load {os.getloadavg()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
