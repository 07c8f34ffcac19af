"""When a process started, on the wall clock: the line between a rank's files and its
previous attempt's."""

from __future__ import annotations

import os
import subprocess
import time

from doctor.trust.process_identity import started_at

TICK = 1 / os.sysconf("SC_CLK_TCK")


def test_a_process_start_is_read_to_the_clock_tick() -> None:
    # GIVEN a process started between two readings of the wall clock
    before = time.time()
    child = subprocess.Popen(["sleep", "30"])
    after = time.time()
    try:
        # WHEN its start is read
        got = started_at(child.pid)
        # THEN it lies between them, to the tick: the boot time of /proc/stat (whole
        # seconds, as psutil adds it) is off by the boot's fraction of a second
        assert got is not None and before - TICK - 0.005 <= got <= after + 0.005
    finally:
        child.kill()
        child.wait()
    # AND a process that is gone has no start
    assert started_at(child.pid) is None
