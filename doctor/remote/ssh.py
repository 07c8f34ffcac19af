"""Reach hosts with ``ssh -o BatchMode=yes``, in parallel with a bounded fan-out.

ClusterShell (CEA's library behind ``clush``) runs the ssh processes: it caps
how many run at once (``fanout``), passes ``-oBatchMode=yes`` (never a
password prompt that would hang triage), ``-oConnectTimeout`` and our options,
and reports each host's output and exit status as events. We use it rather
than a thread per host because a 2,000-host job needs the fan-out bound and
the event loop, which it already has and tests.

Extra ssh options (an identity, a config file) come from
``NCCL_DOCTOR_SSH_OPTIONS`` (``-F ~/.ssh/cluster_config``), like
``PDSH_SSH_ARGS_APPEND``; another ssh client (a wrapper script) from
``NCCL_DOCTOR_SSH``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ClusterShell.Event import EventHandler
from ClusterShell.NodeSet import NodeSet
from ClusterShell.Task import Task
from ClusterShell.Worker.Ssh import SshClient, WorkerSsh

from doctor.remote.frames import Reassembler
from doctor.remote.hosts import valid_host
from doctor.remote.transport import (
    MAX_HOST_BYTES,
    MISSING,
    HostAnswer,
    remote_shell,
    silent_reason,
)

SSH_OPTIONS_ENV = "NCCL_DOCTOR_SSH_OPTIONS"
SSH_PATH_ENV = "NCCL_DOCTOR_SSH"
FANOUT = 64
_STDERR_HINTS = (
    ("Permission denied", "ssh refused the login (no key this host accepts; BatchMode=yes)"),
    ("Could not resolve hostname", "ssh cannot resolve the host name"),
    ("Connection timed out", "ssh could not connect (connection timed out)"),
    ("No route to host", "ssh could not connect (no route to host)"),
    ("Connection refused", "ssh could not connect (connection refused: no sshd?)"),
    ("Host key verification failed", "ssh refused the host key (not in known_hosts)"),
)


class _SshClient(SshClient):  # type: ignore[misc]
    """ClusterShell's ssh command with ``--`` before the host: a host name is never read
    as an option, whatever ssh build runs (old OpenSSH has no host-name check)."""

    def _build_cmd(self) -> tuple[list[str], Any]:
        argv, env = super()._build_cmd()
        return [*argv[:-2], "--", *argv[-2:]], env


class _SshWorker(WorkerSsh):  # type: ignore[misc]
    SHELL_CLASS = _SshClient


class _Handler(EventHandler):  # type: ignore[misc]
    """ClusterShell events -> per-host output, exit code and time of completion."""

    def __init__(self, start: float, on_answer: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.start = start
        self.on_answer = on_answer
        self.frames = Reassembler()
        self.stderr: dict[str, list[str]] = {}
        self.codes: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.sizes: dict[str, int] = {}
        self.missing: set[str] = set()

    def ev_read(self, worker: Any, node: str, sname: str, msg: bytes) -> None:
        text = msg.decode(errors="replace")
        self.sizes[node] = self.sizes.get(node, 0) + len(msg)
        if self.sizes[node] > MAX_HOST_BYTES:
            return
        if sname == "stderr":
            self.stderr.setdefault(node, []).append(text)
        elif text.startswith(MISSING):
            self.missing.add(node)
        else:
            # the document's host tag is the remote hostname; file it under the name we used
            self.frames.feed_as(node, text)
        if node in self.frames.done and node not in self.seconds:
            self.seconds[node] = round(time.monotonic() - self.start, 3)
            if self.on_answer is not None:
                self.on_answer(node)

    def ev_hup(self, worker: Any, node: str, rc: int) -> None:
        self.codes[node] = rc

    def reason(self, node: str, waited: float, timeout: float) -> str:
        if node in self.missing:
            return "nccl-doctor is not installed there (the interpreter is missing)"
        err = " ".join(self.stderr.get(node, [])).strip()
        hint = next((h for key, h in _STDERR_HINTS if key in err), "")
        if node not in self.codes:
            return hint or silent_reason(waited, timeout)
        if self.codes[node] == 255:
            return hint or f"ssh failed: {err[:200] or 'exit 255'}"
        return f"collect exited {self.codes[node]} without a document" + (
            f": {err[-200:]}" if err else ""
        )


def collect_via_ssh(
    hosts: Sequence[str],
    command: Sequence[str],
    timeout: float,
    env: Mapping[str, str],
    fanout: int = FANOUT,
    on_answer: Callable[[str], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> dict[str, HostAnswer]:
    """Run ``command`` on every host; each host's answer within ``timeout`` seconds, or
    what came before ``stop()`` was true. A name that is no host name (a launch record
    may say anything) is not run at all."""
    start = time.monotonic()
    bad = {h: HostAnswer(h, None, None, "not a host name") for h in hosts if not valid_host(h)}
    hosts = [h for h in hosts if h not in bad]
    if not hosts:
        return bad
    task = Task()  # a private task and engine: never the thread's shared task_self()
    task.set_info("fanout", fanout)
    task.set_info("connect_timeout", max(1, math.floor(min(timeout / 2, 10))))
    task.set_info("ssh_options", env.get(SSH_OPTIONS_ENV, ""))
    task.set_default("distant_worker", _SshWorker)
    if env.get(SSH_PATH_ENV):
        task.set_info("ssh_path", env[SSH_PATH_ENV])
    handler = _Handler(start, on_answer)
    try:
        task.shell(
            remote_shell(command),
            nodes=NodeSet.fromlist(list(hosts)),
            handler=handler,
            timeout=timeout,
            stderr=True,
        )
        task.resume()  # a private task runs in its own thread: resume() returns at once
        deadline = start + timeout + 0.5
        while len(handler.codes) < len(hosts) and time.monotonic() < deadline:
            if stop is not None and stop():
                break
            time.sleep(0.02)
    finally:
        task.abort(kill=True)
    waited = time.monotonic() - start
    answers = {}
    for host in hosts:
        doc = handler.frames.done.get(host)
        if doc is not None:
            answers[host] = HostAnswer(host, doc, handler.seconds.get(host))
        else:
            answers[host] = HostAnswer(host, None, None, handler.reason(host, waited, timeout))
    return {**answers, **bad}
