"""The watcher: its own process, beside the ranks, so a rank that holds the GIL or is stopped
cannot stop it.

Every tick it reads the ranks' progress (``doctor.watch.progress``), feeds the
detector, and on a stall: diagnoses once (the bundle is written first), decides by
policy, acts, writes the event line. It ends when every rank of the job has exited,
or after a stop, once the ranks are gone. ``launch --watch`` starts one per job (from
initial rank 0); ``nccl-doctor watch --job ID`` runs the same loop from outside.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from doctor.errors import EXIT_FOUND
from doctor.jobconfig.watch_settings import Action, WatchConfig
from doctor.jobdir.registry import read_states
from doctor.ranks import rank_ranges
from doctor.restart.watchdog import ProgressRecord
from doctor.trust.process_identity import ProcessId, this_process
from doctor.trust.safeio import UnsafePath, private_dir, read_text, write_atomic
from doctor.watch.actions import carry_out
from doctor.watch.detector import Detector, Stall
from doctor.watch.diagnose import Collect, diagnose, job_collect, report_beside
from doctor.watch.events import build_event, record_event, summary
from doctor.watch.policy import Decision, JobShape, Past, decide
from doctor.watch.progress import Sampler, moved, ping_reading, pinging, read_boards
from doctor.watch.roster import Member, RegistryRoster, Roster, end_ranks
from doctor.watch.stopper import stop_path

TICK = 0.1
"""Seconds between looks at the progress files (a few small reads)."""
NO_RANK_WAIT = 300.0
"""How long a watcher waits for the first rank to register before it gives up."""
STOP_GRACE = 5.0
"""Seconds the ranks get to exit after a stop before they are signalled."""
PID_FILE = "watcher.pid"
DIAGNOSIS_WINDOW = 1.0
"""Seconds of sampling in a diagnosis (triage's default window)."""
IDENTITY = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "NCCL_DOCTOR_JOB",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
)
"""Variables that would make discovery take the watcher for a rank of the job."""


@dataclass
class Watcher:
    """One job's watcher; ``run()`` returns its exit code (0, or the stop's 93/94)."""

    job: str
    directory: Path
    config: WatchConfig
    collect: Collect
    roster: Roster
    signal_ranks: bool = True
    """End ranks still alive after a stop's grace (the in-job watcher); a watcher from
    outside only reports, and its exit code tells the caller."""
    history: list[Past] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.detector = Detector(self.config.stall_factor, self.config.min_stall)
        self.sampler = Sampler(self.config.sample_interval)
        self.live: list[Member] = []
        self.spares: set[int] = set()
        """Ranks waiting this iteration out (inactive in the wrapper): nothing to sample."""
        self.excluded: set[int] = set()
        """Ranks this watcher took out of the job: no longer watched, while they exit."""

    def run(self) -> int:
        started = time.monotonic()
        next_look = 0.0
        while True:
            now = time.monotonic()
            if now >= next_look:
                next_look = now + self.roster.refresh
                self.live = [m for m in self.roster.members() if m.rank not in self.excluded]
                self.spares = {
                    int(s.get("initial_rank", rank))
                    for rank, s in read_states(self.directory).items()
                    if s.get("active") is False
                }
                if not self.live and (self.roster.known() or now - started > NO_RANK_WAIT):
                    return 0
            boards = self._observe()
            stall = self.detector.check(time.monotonic())
            if stall is not None:
                try:
                    code = self.handle(stall, boards)
                except Exception as exc:  # a watcher that dies leaves the job unwatched
                    print(f"nccl-doctor watch: diagnosis failed: {exc!r}", file=sys.stderr)
                    self.detector.snooze()
                    code = None
                if code is not None:
                    return code
            time.sleep(TICK)

    def _observe(self) -> dict[int, ProgressRecord]:
        # the boards of ranks that left the roster too: one that left through the wrapper's
        # exit says so there (unarmed, judged no more); one killed mid-step stays a stall
        watched = {m.rank for m in self.live} | (self.detector.tracked() - self.excluded)
        boards = read_boards(self.directory, sorted(watched))
        for rank, record in boards.items():
            self.detector.observe(ping_reading(rank, record))
        told = pinging(boards) | self.spares
        quiet = [m.target for m in self.live if m.rank not in told]
        if quiet and self.sampler.due(time.monotonic()):
            segments = {rank: rec.iteration for rank, rec in boards.items()}
            try:
                readings = self.sampler.sample(quiet, segments)
            except Exception as exc:  # a sampling source failed: the pings still count
                print(f"nccl-doctor watch: sampling failed: {exc!r}", file=sys.stderr)
                readings = []
            for reading in readings:
                self.detector.observe(reading)
        return boards

    @property
    def wrapped(self) -> bool:
        return any(m.wrapped for m in self.live)

    def shape(self) -> JobShape:
        live = {m.rank: m.target.host for m in self.live}
        active = frozenset(set(live) - self.spares) if self.wrapped else frozenset(live)
        return JobShape(live, active, self.wrapped)

    def handle(self, stall: Stall, boards: Mapping[int, ProgressRecord]) -> int | None:
        """Diagnose, decide, act, record; the exit code once the job was stopped."""
        diagnosis = diagnose(self.collect, self.directory, len(self.history) + 1)
        verdict = diagnosis.snapshot.verdict
        after = read_boards(self.directory, list(boards))
        if moved(boards, after, stall.ranks):
            decision = Decision(
                Action.NONE, "the job moved again while it was diagnosed", Action.NONE
            )
        else:
            decision = decide(
                verdict, diagnosis.place, self.history, self.shape(), self.config, time.time()
            )
        iteration = max((b.iteration for b in boards.values()), default=0)
        line = summary(build_event(self.job, stall, diagnosis, decision, "", time.time()))
        try:
            outcome = carry_out(
                decision, diagnosis, self.job, self.directory, iteration, self.wrapped, line
            )
        except Exception as exc:  # the job ended or its store went away while acting
            outcome = f"failed: {exc}"
        record_event(
            self.directory, build_event(self.job, stall, diagnosis, decision, outcome, time.time())
        )
        report_beside(diagnosis)
        self.history.append(
            Past(time.time(), verdict.hang_class.value, diagnosis.place, decision.action)
        )
        if decision.action is Action.NONE:
            if verdict.hang_class.is_hang and not (self.wrapped or self.signal_ranks):
                return EXIT_FOUND  # from outside, nothing here can cure it: tell the caller
            self.detector.snooze()
        elif decision.action is Action.EXCLUDE:
            self.excluded.update(decision.ranks)
            self.live = [m for m in self.live if m.rank not in self.excluded]
            for rank in decision.ranks:
                self.detector.forget(rank)
            self.detector.acted()
        elif decision.action in (Action.RESTART, Action.RESTART_ONCE):
            self.detector.acted()
        elif decision.action is Action.STOP:
            print_playbook(verdict.playbook)
            if self.signal_ranks:
                self._end(self.live)
            return decision.exit_code
        return None

    @staticmethod
    def _end(members: list[Member]) -> None:
        signalled = end_ranks(members, STOP_GRACE)
        if signalled:
            print(
                f"nccl-doctor watch: rank(s) {rank_ranges(signalled)} still ran "
                f"{STOP_GRACE:g}s after the stop: signalled",
                file=sys.stderr,
                flush=True,
            )


def print_playbook(name: str) -> None:
    """The playbook's "What to do" section, under the stop line."""
    from doctor import playbooks

    try:
        text = playbooks.load(name)
    except Exception:  # no playbook: the stop line and the bundle still say everything
        return
    section = text.split("## What to do", 1)[-1].split("\n## ", 1)[0].strip()
    print(f"nccl-doctor watch: what to do ({name}):\n{section}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def claimed(directory: Path) -> Iterator[None]:
    """``<jobdir>/watch/watcher.pid`` while this watcher runs: one watcher per job."""
    path = private_dir(directory / "watch") / PID_FILE
    write_atomic(path, this_process().to_text() + "\n")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def running_watcher(directory: Path) -> int | None:
    """The pid of the job's watcher when one runs now."""
    from doctor.watch.roster import alive

    try:
        process = ProcessId.from_text(read_text(directory / "watch" / PID_FILE, 64))
    except (OSError, UnsafePath):
        return None
    return process.pid if process is not None and alive(process) else None


def watcher_env(env: Mapping[str, str]) -> dict[str, str]:
    """The rank's environment without what would make the watcher look like a rank."""
    return {k: v for k, v in env.items() if k not in IDENTITY}


def spawn(job: str, directory: Path, config_file: str | None, env: Mapping[str, str]) -> int:
    """Start the job's watcher process (from initial rank 0's launch); its pid."""
    stop_path(directory).unlink(missing_ok=True)  # a stop of an earlier run of this job id
    argv = [sys.executable, "-m", "doctor.watch.watcher", "--job", job, "--dir", str(directory)]
    if config_file:
        argv += ["--config", config_file]
    proc = subprocess.Popen(argv, env=watcher_env(env), stdin=subprocess.DEVNULL)
    return proc.pid


def main(argv: list[str] | None = None) -> int:
    """``python -m doctor.watch.watcher --job J --dir D [--config F]`` (started by launch)."""
    import argparse
    import dataclasses

    from doctor.jobconfig.config import load_config

    parser = argparse.ArgumentParser(prog="python -m doctor.watch.watcher")
    parser.add_argument("--job", required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--config")
    args = parser.parse_args(argv)
    config = load_config(args.config, {}, Path.cwd()).watch
    config = dataclasses.replace(config, enabled=True)
    # torch (for the store) loads beside the loop: watching starts at once, and the first
    # action does not wait for the import
    threading.Thread(
        target=importlib.import_module, args=("torch.distributed",), daemon=True
    ).start()
    collect = job_collect(args.job, os.environ, DIAGNOSIS_WINDOW)
    return run_and_report(Watcher(args.job, args.dir, config, collect, RegistryRoster(args.dir)))


def run_and_report(watcher: Watcher) -> int:
    """Run the watcher as the job's one watcher; at the end, say what watching cost: the
    loop's own CPU (its main thread, imports excluded) and the process's (with diagnoses and
    the torch import)."""
    started, loop_cpu = time.monotonic(), time.thread_time()
    with claimed(watcher.directory):
        try:
            code = watcher.run()
        except KeyboardInterrupt:
            code = 0
    used = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"nccl-doctor watch: watched job {watcher.job} for {time.monotonic() - started:.1f}s; "
        f"its loop used {time.thread_time() - loop_cpu:.2f}s of CPU, the process "
        f"{used.ru_utime + used.ru_stime:.2f}s",
        file=sys.stderr,
        flush=True,
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
