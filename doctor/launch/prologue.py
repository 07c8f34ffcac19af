"""``nccl-doctor launch``, per rank: policy, gate, registry, agent, then the entrypoint.

A Python entrypoint (``python script.py ...``, ``python -m module ...`` or a
``.py`` file) runs in this very process, so the agent (stacks and Flight
Recorder dumps for triage) lives in the rank; with ``--wrap`` it runs inside
the restart ``Wrapper``, re-executed from the top on every iteration, and
reaches its ``CallWrapper`` with ``doctor.restart.current_call()``. Anything
else is ``exec``'d with the policy's environment (no agent, no wrapper).

With ``--watch`` (or ``[watch] enabled``), initial rank 0 starts the job's watcher
process (``doctor.watch``) and every rank a stopper thread; a stop by the watcher
makes every rank's launch exit with the stop's code (93: do not requeue).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import runpy
import shutil
import signal
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from doctor.errors import UsageError
from doctor.jobconfig.config import Config
from doctor.jobdir.agent import forget_rank
from doctor.jobdir.registry import RankRecord, job_dir, register_rank, unregister_rank
from doctor.launch.policy import apply_policy
from doctor.trust.escape import escape_control
from doctor.trust.process_identity import ProcessId, this_process

if TYPE_CHECKING:
    from doctor.restart import StoppedByDoctor

JOB_ID_SOURCES = ("NCCL_DOCTOR_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")


def resolve_job(flag: str | None, env: Mapping[str, str]) -> str:
    """``--job``, else the launcher's id (torchrun's run id, SLURM's job id)."""
    for value in (flag, *(env.get(name) for name in JOB_ID_SOURCES)):
        if value:
            return value
    raise UsageError("no job id: pass --job ID (or run under torchrun or srun, whose id is used)")


def rank_of(env: Mapping[str, str]) -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun, SLURM or Open MPI variables."""

    def first(*names: str, default: str = "0") -> int:
        for name in names:
            if env.get(name, "").isdigit():
                return int(env[name])
        return int(default)

    return (
        first("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"),
        first("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", default="1"),
        first("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"),
    )


def python_target(cmd: Sequence[str]) -> tuple[str, str, list[str]] | None:
    """``("path"|"module", target, argv)`` when ``cmd`` runs Python code we can run in-process."""
    args = list(cmd)
    if args and Path(args[0]).name.startswith("python"):
        args = args[1:]
        if len(args) >= 2 and args[0] == "-m":
            return "module", args[1], [args[1], *args[2:]]
        if args and not args[0].startswith("-"):
            return "path", args[0], args
        return None
    if args and args[0].endswith(".py"):
        return "path", args[0], args
    return None


def gate(env: Mapping[str, str], config: Config, lane: str, wrap: bool, rank: int) -> bool:
    """The fast preflight on the policy's environment; rank 0 prints it. False = refuse."""
    from rich.console import Console

    from doctor.checks.gather import gather
    from doctor.checks.registry import run_checks
    from doctor.checks.render import print_report
    from doctor.model import Severity

    if wrap:
        config = dataclasses.replace(
            config, restart=dataclasses.replace(config.restart, enabled=True)
        )
    report = run_checks(gather(env, config, lane, False, Path.cwd()))
    failed = report.count(Severity.FAIL)
    if rank == 0:
        print_report(report, Console(file=sys.stderr))
    elif failed:
        print(
            f"nccl-doctor launch: preflight found {failed} failure(s); see rank 0", file=sys.stderr
        )
    return failed == 0


def launch(
    cmd: Sequence[str],
    config: Config,
    lane_flag: str | None,
    wrap: bool,
    job_flag: str | None,
    env: Mapping[str, str],
    watch: bool = False,
) -> int:
    """Run one rank through the prologue; the entrypoint's exit code."""
    from doctor.jobconfig.lanes import resolve_lane

    if not cmd:
        raise UsageError("nothing to launch: give the command after --")
    job = resolve_job(job_flag, env)
    rank, world, local = rank_of(env)
    directory = job_dir(job, env)
    lane, _ = resolve_lane(lane_flag, config, env)
    policy = apply_policy(
        {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(local), **env},
        lane,
        wrap,
        job,
        directory,
        rank,
    )
    if rank == 0 and (policy.unset or policy.changed):
        changes = [f"unset {n}" for n in policy.unset] + [
            f"{k}={v}" for k, v in policy.changed.items()
        ]
        shown = escape_control(", ".join(changes))  # paths built from the job id and env
        print(f"nccl-doctor launch: {lane} policy: {shown}", file=sys.stderr)
    if not gate(policy.env, config, lane, wrap, rank):
        return 1
    target = python_target(cmd)
    if target is None and wrap:
        raise UsageError(
            "--wrap runs Python entrypoints in-process: give python SCRIPT or python -m MODULE"
        )
    executable = check_runnable(cmd, target, policy.env)
    record = RankRecord(
        job,
        rank,
        world,
        local,
        socket.gethostname(),
        os.getpid(),
        time.time(),
        agent=target is not None,
        wrapped=wrap and target is not None,
        files={
            "nccl_debug_file": policy.env["NCCL_DEBUG_FILE"],
            "fr_dir": str(directory / "fr"),
            "stack_file": str(directory / f"stack-{rank}.txt"),
        },
        pid_start=this_process().start,
    )
    register_rank(record, directory)
    watching = watch or config.watch.enabled
    if watching and rank == 0:
        from doctor.watch.watcher import spawn

        spawn(job, directory, config.source, policy.env)
    os.environ.clear()
    os.environ.update(policy.env)
    if target is None:
        try:
            os.execve(executable, list(cmd), policy.env)
        except OSError as exc:
            unregister_rank(directory, rank, record.process)
            raise UsageError(f"cannot run {cmd[0]}: {exc.strerror}") from None
    from doctor.restart.exceptions import StoppedByDoctor

    with registered(directory, rank, record.process, record.started_at if watching else None):
        try:
            return run_python(target, directory, rank, wrap, config, watching)
        except StoppedByDoctor as stopped:
            reason = stopped
    end_stopped(reason, rank)


def check_runnable(
    cmd: Sequence[str], target: tuple[str, str, list[str]] | None, env: Mapping[str, str]
) -> str:
    """Refuse, before anything is registered, an entrypoint that cannot start; the
    executable's path for one that is ``exec``'d."""
    if target is not None:
        kind, name, _ = target
        if kind == "path" and not os.path.isfile(name):
            raise UsageError(f"cannot run {name}: no such file")
        if kind == "module" and not _module_exists(name):
            raise UsageError(f"cannot run -m {name}: no module named {name}")
        return sys.executable
    found = shutil.which(cmd[0], path=env.get("PATH", os.defpath))
    if found is None:
        where = "no such file" if "/" in cmd[0] else "not found on PATH"
        raise UsageError(f"cannot run {cmd[0]}: {where}")
    return found


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@contextlib.contextmanager
def registered(
    directory: Path, rank: int, process: ProcessId, stops_since: float | None = None
) -> Iterator[None]:
    """The rank's record (and its agent's pid file) go on every way out: a return, an
    exception, and SIGTERM, whose default action (death by SIGTERM) follows the cleanup.

    With ``stops_since`` (the job is watched), a SIGTERM after the watcher's stop ends the
    rank with the stop's code instead: the launcher (torchrun, srun) terminates the other
    ranks as soon as the first one exits 93, and they must say 93 too."""

    def on_term(signum: int, frame: object) -> None:
        forget_rank(directory, rank, process)
        if stops_since is not None:
            from doctor.watch.stopper import stop_order

            order = stop_order(directory, stops_since)
            if order is not None:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(order.exit_code)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        unregister_rank(directory, rank, process)


def run_python(
    target: tuple[str, str, list[str]],
    directory: Path,
    rank: int,
    wrap: bool,
    config: Config,
    watching: bool = False,
) -> int:
    from doctor.jobdir.agent import Agent

    kind, name, argv = target

    def entry() -> None:
        sys.argv = list(argv)
        try:
            if kind == "module":
                runpy.run_module(name, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(name, run_name="__main__")
        except SystemExit as exc:  # `sys.exit(main())` ending well is a return, not a fault
            if exc.code not in (None, 0):
                raise

    with contextlib.ExitStack() as stack:
        stack.enter_context(Agent(directory, rank))
        if watching:
            from doctor.watch.stopper import Stopper

            grace = config.restart.termination_grace_time if wrap else 0.0
            stack.enter_context(Stopper(directory, rank, grace))
        if wrap:
            from doctor.restart import Wrapper

            Wrapper(config=config)(entry)()  # StoppedByDoctor goes up to launch
        else:
            entry()
    return 0


def end_stopped(stopped: StoppedByDoctor, rank: int) -> NoReturn:
    """A rank the watcher stopped (or excluded: exit 0) ends here, once it is unregistered.

    After an abort the interpreter's own teardown is not safe: on torch 2.13 every rank
    spun in the garbage collector at exit after most of the watcher's stops here (root
    cause not found). What had to be closed is closed; the process ends without it."""
    if stopped.exit_code == 0:
        print(f"nccl-doctor launch[{rank}]: leaves the job: {stopped}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(stopped.exit_code)
