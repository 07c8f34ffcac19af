"""Stacks of every rank, sampled a few times over the window with ``py-spy dump --json``.

py-spy reads the target's memory through ptrace and pauses it for the few
milliseconds of a dump; it never stops it for longer (we never send
SIGSTOP). A process that is already stopped (kernel state T or t) is read
without pausing. Each rank is sampled on its own thread, so one slow rank does
not delay the others' samples; native frames are taken where the Python stack
cannot show the wait (``doctor.triage.sources.native``). Where ptrace is denied, a rank started by
``nccl-doctor launch`` is asked through its in-rank agent (faulthandler on
SIGUSR2); any other rank becomes a ``Skipped`` that says what to change.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from doctor.evidence import Frame, ProgressSample, RankStack, ThreadStack
from doctor.jobdir.thread_dump import parse_faulthandler
from doctor.model import Skipped
from doctor.triage.fanout import Done, fanout
from doctor.triage.sources.interface import Collected, Source, SourceError
from doctor.triage.sources.kernel import stopped
from doctor.triage.sources.native import MISSED, NativePlan
from doctor.triage.target import RankTarget, Target
from doctor.trust.process_identity import owner_uid
from doctor.trust.subproc import run
from doctor.verdict.stacks import rank_state, signature

PYSPY_ENV = "NCCL_DOCTOR_PYSPY"
"""Path of the py-spy binary to use (else ``py-spy`` on PATH, else next to Python)."""

_DENIED = re.compile(r"(?i)permission denied|operation not permitted")
"""py-spy's words for a refused attach (not \"ptrace\" alone: its waitpid errors name
``PtraceEvent`` when a stopped process could not be suspended)."""
_GONE = re.compile(r"(?i)no such process|check that the process is running|process .* not found")


def pyspy_binary(env: Mapping[str, str]) -> str | None:
    if env.get(PYSPY_ENV):
        return env[PYSPY_ENV]
    beside = Path(sys.executable).parent / "py-spy"
    found = shutil.which("py-spy", path=env.get("PATH"))
    return found or (str(beside) if beside.exists() else None)


def parse_dump(text: str, rank: int) -> RankStack:
    """A ``py-spy dump --json`` answer as a ``RankStack`` (innermost frame first).

    The answer describes a process root may not own: anything that is not the shape
    py-spy writes (a list of thread objects, frames with text names and integer lines)
    is a ``ValueError`` that names what is wrong, never another exception."""
    try:
        answer = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(answer, list):
        raise ValueError("not a list of threads")
    return RankStack(rank, tuple(_thread(item) for item in answer), "py-spy")


def _thread(item: object) -> ThreadStack:
    if not isinstance(item, dict):
        raise ValueError("a thread is not an object")
    frames = item.get("frames", [])
    if not isinstance(frames, list):
        raise ValueError("a thread's frames are not a list")
    name = item.get("thread_name") or ""
    return ThreadStack(
        thread_id=_whole(item.get("os_thread_id") or item.get("thread_id")),
        name=name if isinstance(name, str) else "",
        frames=tuple(_frame(f) for f in frames),
        holds_gil=item.get("owns_gil") is True,
        active=item.get("active") is True,
        is_main=item.get("os_thread_id") == item.get("pid") or name == "MainThread",
    )


def _frame(f: object) -> Frame:
    if not isinstance(f, dict):
        raise ValueError("a frame is not an object")
    name = f.get("name", "?")
    filename = f.get("short_filename") or f.get("filename", "?")
    if not isinstance(name, str) or not isinstance(filename, str):
        raise ValueError("a frame's name or file is not text")
    native = f.get("module") is not None
    root = _root(f.get("locals")) if "torch/" in filename else None  # the user's locals vary
    return Frame(name, filename, _whole(f.get("line")), native=native, root=root)


_ROOT_ARGS = ("src", "authoritative_rank", "group_src")
"""Arguments that name the root of a rooted collective (``broadcast``, DDP's buffer sync)."""


def _root(found: object) -> int | None:
    """The root rank among a frame's locals (``py-spy --locals``), if it names one."""
    if not isinstance(found, list):
        return None
    for item in found:
        if isinstance(item, dict) and item.get("name") in _ROOT_ARGS:
            text = item.get("repr")
            if isinstance(text, str) and text.isdigit() and len(text) < 8:
                return int(text)
    return None


def _whole(value: object) -> int:
    """A line number or thread id: a non-negative integer below 2**64, or 0 when absent."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
        raise ValueError(f"{str(value)[:40]!r} is not a line number or thread id")
    return value


def ptrace_hint() -> str:
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = ""
    where = f"kernel.yama.ptrace_scope={scope}; " if scope and scope != "0" else ""
    return (
        f"ptrace denied ({where}run triage as the job's user with CAP_SYS_PTRACE, "
        "or start the ranks with `nccl-doctor launch` for the in-rank agent)"
    )


_NOT_SUSPENDED = re.compile(r"(?i)failed to suspend|unexpected waitpid result")


class PySpySource(Source):
    """Every thread's stack, ``samples`` times per rank spread over ``window`` seconds.

    A stopped process is read without pausing it (``--nonblocking``: it is not
    running anyway). A rank whose main thread is blocked in C under code that is
    not a known collective gets native frames (``doctor.triage.sources.native``).
    """

    name = "py-spy"

    def __init__(
        self,
        env: Mapping[str, str],
        window: float = 1.0,
        samples: int = 5,
        probe_timeout: float = 1.0,
    ) -> None:
        self.env = env
        self.window = window
        self.samples = max(samples, 1)
        self.probe_timeout = probe_timeout

    def collect(self, target: Target, deadline: float) -> Collected:
        binary = pyspy_binary(self.env)
        if binary is None:
            raise SourceError("py-spy is not installed (pip install py-spy)")
        start = time.monotonic()
        step = self.window / (self.samples - 1) if self.samples > 1 else 0.0
        times = [start + i * step for i in range(self.samples)]
        plan = NativePlan(
            lambda rank, pid, timeout: self._dump(
                binary, RankTarget(rank, pid, ""), timeout, native=True
            )[0],
            not_before=start + self.window,
        )
        calls = {
            r.rank: (lambda r=r: self._sample_rank(binary, r, times, start, deadline, plan))
            for r in target.ranks
        }
        outcomes = fanout(calls, deadline)
        plan.wait(deadline - time.monotonic() - 0.05)
        stacks: list[RankStack] = []
        progress: list[ProgressSample] = []
        skipped: list[Skipped] = []
        for rank in target.ranks:
            outcome = outcomes.get(rank.rank)
            if not isinstance(outcome, Done):
                reason = f"failed: {outcome.error}" if outcome else "did not finish in time"
                skipped.append(Skipped(rank.rank, self.name, f"py-spy {reason}"))
                continue
            stack, samples, problem = outcome.value
            if stopped(rank.pid):  # its own stack is the evidence: never a twin's frames
                progress.extend(sample for sample, _ in samples)
                stacks.extend([stack] if stack is not None else [])
            else:
                progress.extend(plan.resolve_sample(sample, seen) for sample, seen in samples)
                stacks.extend([plan.resolve(stack)] if stack is not None else [])
            if problem:
                skipped.append(Skipped(rank.rank, self.name, problem))
        skipped.extend(Skipped(r, self.name, MISSED) for r in plan.missed())
        return Collected(stacks=tuple(stacks), progress=tuple(progress), skipped=tuple(skipped))

    def _sample_rank(
        self,
        binary: str,
        rank: RankTarget,
        times: list[float],
        start: float,
        deadline: float,
        plan: NativePlan,
    ) -> tuple[RankStack | None, list[tuple[ProgressSample, RankStack]], str]:
        """Sample one rank at ``times``; its newest stack, every sample, and what went wrong."""
        newest: RankStack | None = None
        samples: list[tuple[ProgressSample, RankStack]] = []
        problem = ""
        for when in times:
            time.sleep(max(0.0, when - time.monotonic()))
            budget = min(self.probe_timeout, deadline - time.monotonic() - 0.1)
            if budget <= 0.05:
                problem = problem or "py-spy: no time left for a sample"
                break
            is_stopped = stopped(rank.pid)
            quiet = is_stopped or plan.busy(rank.pid)
            stack, problem = self._dump(binary, rank, budget, nonblocking=quiet)
            if stack is None:
                if "exited" in problem or "did not answer" in problem:
                    break  # it will not come back, or would only eat the others' time
                continue
            newest = stack
            if not is_stopped:
                plan.offer_if_frozen(
                    [seen for _, seen in samples] + [stack], rank.pid, deadline - 0.1
                )
            sample = ProgressSample(
                rank.rank,
                round(time.monotonic() - start, 3),
                stack_signature=signature(stack),
                state=rank_state(stack).value,
            )
            samples.append((sample, stack))
        if newest is not None and not stopped(rank.pid):
            plan.offer_most_seen([seen for _, seen in samples], rank.pid, deadline - 0.1)
        if newest is not None and problem and samples:
            problem = f"{problem} (in {len(times) - len(samples)} of {len(times)} samples)"
        return newest, samples, problem

    def _dump(
        self,
        binary: str,
        rank: RankTarget,
        timeout: float,
        native: bool = False,
        nonblocking: bool = False,
    ) -> tuple[RankStack | None, str]:
        argv = [binary, "dump", "--json", "--locals", "--pid", str(rank.pid)]
        argv += ["--native"] if native else []
        argv += ["--nonblocking"] if nonblocking else []
        started = time.monotonic()
        done = run(argv, timeout, env=self.env)
        if done.ok:
            try:
                return parse_dump(done.stdout, rank.rank), ""
            except ValueError as exc:
                return None, f"py-spy printed something that is not a stack dump ({exc})"
        if done.timed_out:
            return None, f"py-spy did not answer within {timeout:.1f}s"
        message = done.error or done.stderr
        if not os.path.exists(f"/proc/{rank.pid}") or _GONE.search(message):
            return None, f"the process (pid {rank.pid}) exited during collection"
        if _NOT_SUSPENDED.search(message) and not nonblocking:
            # the process was stopped (or traced) between our look at its state and the dump
            left = timeout - (time.monotonic() - started)
            stack, problem = self._dump(binary, rank, left, native=False, nonblocking=True)
            why = f"py-spy could not suspend pid {rank.pid} (stopped, or traced by a debugger)"
            return stack, f"{why}; {problem}" if problem else ""
        if _DENIED.search(message):
            return self._from_agent(rank, timeout)
        if "python version" in message:
            return None, f"pid {rank.pid} is not a Python process (or has not started Python yet)"
        lines = [line for line in message.splitlines() if line.strip()]
        first = lines[0] if lines else "no output"
        return None, f"py-spy failed: {first.strip()}"

    def _from_agent(self, rank: RankTarget, timeout: float) -> tuple[RankStack | None, str]:
        """The ptrace-free fallback: the launch prologue's in-rank agent, where it runs."""
        if not rank.has_agent or rank.job_dir is None:
            return None, ptrace_hint()
        from doctor.jobdir.agent import request_stack

        owner = owner_uid(rank.pid)
        text = None
        if owner is not None:
            text = request_stack(rank.job_dir, rank.rank, rank.pid, timeout, owner)
        if not text:
            return None, f"{ptrace_hint()}; the in-rank agent did not answer either"
        return parse_faulthandler(text, rank.rank), ""
