"""The kernel's view of a main thread (wchan, syscall), from recorded /proc lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from doctor.triage.sources.kernel import describe, read_wait, stopped

FIFO_OPEN = "257 0xffffff9c 0x7f32fb64d860 0x80000 0x0 0x0 0x0 0x7ffe8cadc200 0x7f3328d16090"
FUTEX = "202 0x7fce02b4e6f4 0x89 0x0 0x7ffcb090a140 0x0 0xffffffff 0x7ffcb090a010 0x7fce02c4"


def test_an_open_blocked_on_a_fifo_names_the_path_and_its_kind() -> None:
    # GIVEN the /proc lines of a rank blocked opening its shard, which became a FIFO
    path = {0x7F32FB64D860: ("/data/train_2.bin", "a FIFO")}
    # WHEN they are described
    wait = describe("wait_for_partner", FIFO_OPEN, path, machine="x86_64")
    # THEN the call, the path and what it is are said
    assert wait.wchan == "wait_for_partner"
    assert wait.syscall == 'openat("/data/train_2.bin", a FIFO)'


def test_a_futex_wait_and_a_running_thread() -> None:
    assert describe("futex_do_wait", FUTEX, machine="x86_64").syscall == "futex()"
    # a wait that ptrace (py-spy) interrupted resumes as restart_syscall, named, not a number
    resumed = "219 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffcb090a010 0x7fce02c4"
    assert describe("futex_do_wait", resumed, machine="x86_64").syscall == "restart_syscall()"
    assert describe("0", "running").syscall == ""
    assert describe("", "").wchan == ""


def test_a_real_process_blocked_on_a_fifo_is_read_from_proc(tmp_path: Path) -> None:
    # GIVEN a process blocked opening a FIFO nobody writes
    fifo = tmp_path / "shard.bin"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}).read()"])
    try:
        # WHEN its kernel wait is read (once it reached the open)
        wait = read_wait(proc.pid)
        for _ in range(200):
            if "openat" in wait.syscall:
                break
            subprocess.run(["sleep", "0.02"])
            wait = read_wait(proc.pid)
        # THEN the path and that it is a FIFO are known
        assert wait.syscall == f'openat("{fifo}", a FIFO)', wait
        assert not stopped(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_stopped_means_sigstop_or_a_debugger_not_our_own_sampler(tmp_path: Path) -> None:
    def status(state: str, tracer: int) -> Path:
        root = tmp_path / f"{state}{tracer}"
        (root / "7").mkdir(parents=True)
        (root / "7" / "status").write_text(
            f"Name:\tpython\nState:\t{state}\nTracerPid:\t{tracer}\n"
        )
        (root / "9").mkdir()
        (root / "9" / "comm").write_text("py-spy\n")
        (root / "8").mkdir()
        (root / "8" / "comm").write_text("gdb\n")
        return root

    assert stopped(7, status("T (stopped)", 0))
    assert stopped(7, status("t (tracing stop)", 8))
    assert not stopped(7, status("t (tracing stop)", 9))
    assert not stopped(7, status("S (sleeping)", 0))
    # AND a tracer that detached (TracerPid 0 for an instant as a sample ends) or exited after
    # the status was read holds it no more, while one whose name cannot be read (another
    # user's debugger) still does
    assert not stopped(7, status("t (tracing stop)", 0))
    assert not stopped(7, status("t (tracing stop)", 6))
    hidden = status("t (tracing stop)", 5)
    (hidden / "5").mkdir()
    assert stopped(7, hidden)
