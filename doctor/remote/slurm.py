"""Reach a SLURM job's nodes with one ``srun --overlap`` step: the job's own launcher.

``job_nodes`` asks ``scontrol show job`` which nodes a running job holds.
``collect_via_srun`` starts one step of one task per node that runs
``nccl-doctor collect`` there, reads the documents as they arrive (tagged
lines, ``doctor.remote.frames``) and stops at the deadline, or earlier when the
caller's ``stop`` says nothing more can come: a node whose document is not
complete by then did not answer, which is evidence, not an error. The step is
cancelled (SIGTERM to srun, which cancels it) before we return, so nothing of ours
stays on the nodes.

Whose document a line is comes from srun, not from the line: ``--label`` makes srun
prefix every line with the task id of the task that wrote it, and with one task per
node task ``i`` runs on the ``i``-th node of the step's node list (SLURM lays tasks
out in the order of its node table, which the folded node list follows for names
like ``gpu[001-128]``). A node that tags its lines with another node's name files
them under its own name all the same.
"""

from __future__ import annotations

import atexit
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from doctor.remote.frames import Reassembler
from doctor.remote.hosts import fold, parse_hosts
from doctor.remote.transport import MAX_HOST_BYTES, MISSING, HostAnswer, silent_reason
from doctor.trust.subproc import run, signal_child

SCONTROL_TIMEOUT = 5.0
POLL_S = 0.1
"""How often the read loop looks at the deadline and the caller's ``stop``."""
_FIELD = re.compile(r"(?:^|\s)(JobState|NodeList|NumNodes|UserId)=(\S+)")
_UID = re.compile(r"\((\d+)\)$")
_NODE_ERROR = re.compile(r"(?:on node |node )?([\w.\-]+): (?:task \d+: )?(.*)$")
_LABEL = re.compile(r"^ *(\d{1,7}): ")
_LAUNCH_FAILED = re.compile(r"Task launch for \S+ failed on node")
RETRY_MIN_S = 1.5
"""The least time left worth a second step after a node's failed launch aborted the first."""


@dataclass(frozen=True)
class SlurmJob:
    """What ``scontrol show job`` says about a job."""

    job: str
    state: str
    nodes: tuple[str, ...]
    user: int | None = None
    """The job owner's uid (``UserId=name(uid)``)."""


def job_nodes(job: str, env: Mapping[str, str]) -> SlurmJob | None:
    """The job as SLURM knows it; None when there is no SLURM here or it does not know
    the job (a torchrun id, a launch id: the caller tries the next way)."""
    if not job.isdigit():
        return None
    done = run(["scontrol", "show", "job", "-o", job], SCONTROL_TIMEOUT, env=env)
    if not done.ok:
        return None
    fields = dict(_FIELD.findall(done.stdout))
    nodes = fields.get("NodeList", "")
    uid = _UID.search(fields.get("UserId", ""))
    user = int(uid.group(1)) if uid else None
    state = fields.get("JobState", "UNKNOWN")
    if not nodes or nodes == "(null)":
        return SlurmJob(job, state, (), user)
    return SlurmJob(job, state, tuple(parse_hosts(nodes)), user)


def srun_argv(job: str, nodes: Sequence[str], command: Sequence[str]) -> list[str]:
    """One task on each of ``nodes``, inside the running job.

    ``--overlap`` is what makes this work at all: without it the new step asks
    for CPUs the hung step holds, and waits for them forever (srun reports
    "Requested nodes are busy" and pends). ``--kill-on-bad-exit=0`` keeps one
    failing node from cancelling the others; ``--immediate`` gives up at once
    rather than queueing if the step cannot start. No ``--unbuffered``: that makes
    slurmstepd forward raw 1 KiB chunks, and lines of different nodes interleave
    mid-line (seen on SLURM 22.05); line-buffered output keeps our short lines whole.
    """
    return [
        "srun",
        "--overlap",
        f"--jobid={job}",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={fold(nodes)}",
        "--kill-on-bad-exit=0",
        "--immediate=5",
        "--quiet",
        "--label",
        *command,
    ]


def step_nodes(nodes: Sequence[str]) -> list[str]:
    """The step's nodes in task order: task ``i`` runs on the ``i``-th (module docstring)."""
    return parse_hosts(fold(nodes))


def collect_via_srun(
    job: str,
    nodes: Sequence[str],
    command: Sequence[str],
    timeout: float,
    env: Mapping[str, str],
    on_answer: Callable[[str], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> dict[str, HostAnswer]:
    """Every node's answer within ``timeout`` seconds (never longer, give or take 0.5 s);
    ``on_answer(node)`` as each node's document completes (a progress bar); ``stop()``
    true ends the wait early (what srun has sent by then is still read).

    srun aborts the whole step when its launch fails on one node (a node cut off from the
    network, its connect failing at once): the other nodes' tasks are killed before they
    answer. Then the step is started once more without the nodes whose launch failed,
    in the time left, so one lost node does not cost the others' evidence.
    """
    start, stop = time.monotonic(), stop or _never
    answers = _step(job, nodes, command, timeout, env, on_answer, stop)
    failed = {n for n in nodes if _LAUNCH_FAILED.search(answers[n].reason)}
    rest = [n for n in nodes if n not in failed and answers[n].text is None]
    left = start + timeout - time.monotonic()
    if failed and rest and left >= RETRY_MIN_S and not stop():
        began = time.monotonic() - start
        again = _step(job, rest, command, left, env, on_answer, stop)
        for node, answer in again.items():
            if answer.seconds is not None:
                answer = replace(answer, seconds=round(began + answer.seconds, 3))
            answers[node] = answer
    return answers


def _step(
    job: str,
    nodes: Sequence[str],
    command: Sequence[str],
    timeout: float,
    env: Mapping[str, str],
    on_answer: Callable[[str], None] | None,
    stop: Callable[[], bool],
) -> dict[str, HostAnswer]:
    """One srun step on ``nodes``: each node's answer, or why there is none."""
    start = time.monotonic()
    argv = srun_argv(job, nodes, command)
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        return {n: HostAnswer(n, None, None, f"srun could not start: {exc}") for n in nodes}
    docs, seconds, errors = _read_until(proc, step_nodes(nodes), start + timeout, on_answer, stop)
    ended = proc.poll() is not None
    waited = time.monotonic() - start
    _cancel(proc)
    answers = {}
    for node in nodes:
        if node in docs:
            answers[node] = HostAnswer(node, docs[node], seconds[node])
        else:
            why = errors.get(node) or _general(errors)
            why = why or ("srun ended without its document" if ended else "")
            why = why or silent_reason(waited, timeout)
            answers[node] = HostAnswer(node, None, None, why)
    return answers


def _never() -> bool:
    return False


def _general(errors: Mapping[str, str]) -> str:
    return errors.get("", "")


def _labelled(line: str, order: Sequence[str]) -> tuple[str | None, str]:
    """The node whose task wrote ``line`` (srun's ``--label`` prefix) and the line without
    it; None for a line srun did not label (its own messages)."""
    match = _LABEL.match(line)
    if match is None:
        return None, line
    task = int(match.group(1))
    return (order[task] if task < len(order) else None), line[match.end() :]


def _read_until(
    proc: subprocess.Popen[bytes],
    order: Sequence[str],
    deadline: float,
    on_answer: Callable[[str], None] | None,
    stop: Callable[[], bool],
) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """Read srun's stdout (documents) and stderr (per-node errors) until every node has
    answered, srun exits, the deadline passes, or ``stop()`` (after reading what is
    already there). ``order``: the step's nodes by task."""
    nodes = set(order)
    start = time.monotonic()
    frames = Reassembler()
    seconds: dict[str, float] = {}
    errors: dict[str, str] = {}
    assert proc.stdout is not None and proc.stderr is not None
    out_fd = proc.stdout.fileno()
    pending = {out_fd: b"", proc.stderr.fileno(): b""}
    received = 0
    with selectors.DefaultSelector() as sel:
        for fd in pending:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map() and not nodes <= set(frames.done):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            stopping = stop()
            events = sel.select(timeout=0 if stopping else min(left, POLL_S))
            if stopping and not events:
                break
            for key, _ in events:
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                received += len(chunk)
                if received > MAX_HOST_BYTES * max(len(nodes), 1):
                    errors[""] = "srun sent more output than any set of host documents"
                    return frames.done, seconds, errors
                lines = (pending[key.fd] + chunk).split(b"\n")
                pending[key.fd] = lines.pop()
                for raw in lines:
                    node, line = _labelled(raw.decode(errors="replace"), order)
                    if key.fd != out_fd:
                        _note_error(line, nodes, errors, node)
                    elif node is None:
                        continue  # no task wrote it
                    elif line.startswith(MISSING) and len(line.split()) == 3:
                        path = line.split()[2]
                        errors[node] = f"nccl-doctor is not installed there (no {path})"
                    elif (host := frames.feed_as(node, line)) is not None:
                        seconds[host] = round(time.monotonic() - start, 3)
                        if on_answer is not None:
                            on_answer(host)
    return frames.done, seconds, errors


def _note_error(
    line: str, nodes: set[str], errors: dict[str, str], task_node: str | None = None
) -> None:
    """srun's stderr: ``srun: error: h3: task 2: Exited with exit code 127`` and the like;
    a labelled line is the node's own task's."""
    text = line.removeprefix("srun: ").removeprefix("error: ").strip()
    if not text:
        return
    match = _NODE_ERROR.search(text)
    node = task_node or next((n for n in nodes if match and match.group(1) == n), None)
    if node is None:
        node = next((n for n in nodes if f" {n}" in f" {text}"), "")
    if "exit code 127" in text:
        text = "nccl-doctor is not installed there (the interpreter is missing)"
    errors.setdefault(node, f"srun: {text}"[:300])


_UNREAPED: set[subprocess.Popen[bytes]] = set()
"""Cancelled sruns their reaper has not yet seen end."""


def _cancel(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM srun now (it cancels the step on the nodes); reap it, or kill it after a
    second, on a thread: the verdict does not wait for srun's goodbyes."""
    if proc.poll() is None:
        signal_child(proc, signal.SIGTERM, group=True)
    _UNREAPED.add(proc)

    def reap() -> None:
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            signal_child(proc, signal.SIGKILL, group=True)
            proc.wait(timeout=2.0)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        _UNREAPED.discard(proc)

    threading.Thread(target=reap, daemon=True, name="nccl-doctor-srun-reaper").start()


@atexit.register
def _kill_unreaped() -> None:
    """A reaper is a daemon thread and dies with the command: an srun still starting its
    step on a cut-off node outlived a sweep that ended early, so it is killed at exit."""
    for proc in list(_UNREAPED):
        if proc.poll() is None:
            signal_child(proc, signal.SIGKILL, group=True)
