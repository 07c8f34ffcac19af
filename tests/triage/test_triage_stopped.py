"""A stopped rank (SIGSTOP, kernel state T) is read without pausing it, and named as stopped."""

from __future__ import annotations

import os
import signal
import time

from doctor.triage.sources.proc import ProcSource
from doctor.triage.sources.pyspy import PySpySource
from doctor.triage.target import RankTarget, Target


def test_a_stopped_process_is_read_and_its_state_is_the_evidence(sleepers) -> None:
    # GIVEN a rank process stopped with SIGSTOP and a running one
    stopped = sleepers({"RANK": "0"}, "stopped")
    running = sleepers({"RANK": "1"}, "running")
    os.kill(stopped.pid, signal.SIGSTOP)
    try:
        target = Target(
            "j",
            "h",
            (RankTarget(0, stopped.pid, "h"), RankTarget(1, running.pid, "h")),
            2,
        )
        # WHEN py-spy and the process probe look at both
        deadline = time.monotonic() + 3.0
        stacks = PySpySource(dict(os.environ), window=0.2, samples=2).collect(target, deadline)
        procs = ProcSource(window=0.2).collect(target, time.monotonic() + 3.0)
    finally:
        os.kill(stopped.pid, signal.SIGCONT)
    # THEN both stacks are read (the stopped one without pausing it), nothing claims that
    # ptrace was denied, and the stopped rank's state says what it is
    assert sorted(s.rank for s in stacks.stacks) == [0, 1], stacks.skipped
    assert not any("ptrace" in s.reason for s in stacks.skipped), stacks.skipped
    by_rank = {p.rank: p for p in procs.processes}
    assert by_rank[0].status == "stopped" and by_rank[1].status != "stopped"
    assert by_rank[0].wchan == "do_signal_stop"
