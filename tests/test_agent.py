"""The in-rank agent answers stack and Flight Recorder requests from outside the rank."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.jobdir.agent import MAIN_THREAD_LINE, agent_pid, request_fr_dump, request_stack
from doctor.triage.sources.pyspy import parse_faulthandler
from doctor.trust.subproc import stop_all

RANK = """
import ctypes, datetime, sys, time
from pathlib import Path
import torch, torch.distributed as dist
from doctor.jobdir.agent import Agent
agent = Agent(Path(sys.argv[1]), 3)
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
dist.all_reduce(torch.ones(8))
def hang_holding_the_gil():
    print("ready", flush=True)  # from inside: its frame is on the stack from now on
    ctypes.PyDLL(None).sleep(int(sys.argv[2]))
def hang_releasing_the_gil():
    print("ready", flush=True)
    time.sleep(int(sys.argv[2]))
(hang_holding_the_gil if sys.argv[3] == "gil" else hang_releasing_the_gil)()
"""


BUSY_RANK = """
import sys, threading
from pathlib import Path
from doctor.jobdir.agent import Agent
agent = Agent(Path(sys.argv[1]), 3)
def nested(depth):  # frames pushed and freed all the time, as the wrapper's threads do
    if depth == 0:
        return [word for word in (w.upper() for w in ("a", "b")) if word]
    return nested(depth - 1)
def busy():
    while True:
        nested(20)
def churn():
    while True:
        thread = threading.Thread(target=nested, args=(5,))
        thread.start()
        thread.join()
for work in (busy, busy, churn):
    threading.Thread(target=work, daemon=True).start()
def wait_in_main():
    print("ready", flush=True)  # from inside: its frame is on the stack from now on
    threading.Event().wait(int(sys.argv[2]))
wait_in_main()
"""


def start_rank(tmp_path: Path, hold_gil: bool, script: str = RANK) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path), "30", "gil" if hold_gil else "free"],
        stdout=subprocess.PIPE,
        text=True,
        env={"TORCH_FR_BUFFER_SIZE": "100", "PATH": "/usr/bin:/bin"},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def stop():
    procs: list[subprocess.Popen[str]] = []
    yield procs.append
    stop_all(procs)
    for proc in procs:
        if proc.stdout is not None:
            proc.stdout.close()


def test_stack_of_a_rank_that_holds_the_gil(tmp_path: Path, stop) -> None:
    # GIVEN a rank whose main thread is stuck in C code while holding the GIL
    proc = start_rank(tmp_path, hold_gil=True)
    stop(proc)
    # WHEN triage asks for its stack
    text = request_stack(tmp_path, 3, proc.pid, timeout=5)
    # THEN faulthandler answers anyway, naming the stuck function
    assert text is not None and "hang_holding_the_gil" in text
    assert proc.poll() is None, "asking for a stack must not stop the rank"
    # and a Flight Recorder request cannot be served while the GIL is held
    assert request_fr_dump(tmp_path, 3, timeout=0.5) is None


def test_stacks_of_a_rank_whose_threads_run_python_are_walked_under_the_gil(
    tmp_path: Path, stop
) -> None:
    # GIVEN a rank whose other threads push and free Python frames all the time, and whose
    # main thread waits with the GIL released (a rank in a collective, its helpers running)
    proc = start_rank(tmp_path, hold_gil=False, script=BUSY_RANK)
    stop(proc)
    # WHEN stacks are asked for again and again
    for _ in range(40):
        text = request_stack(tmp_path, 3, proc.pid, timeout=5)
        # THEN the agent answers each under the GIL, naming the main thread: not the signal
        # handler, whose walk read freed frames and crashed such ranks (SIGSEGV)
        assert text is not None and text.startswith(MAIN_THREAD_LINE), text
        main = [t for t in parse_faulthandler(text, 3).threads if t.is_main]
        assert len(main) == 1 and main[0].frames[-1].name == "<module>"
        assert main[0].frames[-2].name == "wait_in_main", text
    assert proc.poll() is None, "asking for stacks must not stop (or crash) the rank"


def test_flight_recorder_dump_on_request(tmp_path: Path, stop) -> None:
    # GIVEN a rank blocked with the GIL released after one gloo all_reduce
    proc = start_rank(tmp_path, hold_gil=False)
    stop(proc)
    # WHEN triage asks for a Flight Recorder dump
    path = request_fr_dump(tmp_path, 3, timeout=5)
    # THEN the dump is the torch trace with the all_reduce in it
    assert path == tmp_path / "fr" / "rank_3"
    trace = pickle.loads(path.read_bytes())
    assert any("all_reduce" in e["profiling_name"] for e in trace["entries"])


def test_no_signal_without_an_agent(tmp_path: Path, stop) -> None:
    # GIVEN a process with no agent (SIGUSR2 would terminate it)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    stop(proc)
    # WHEN triage asks for its stack THEN nothing is sent and the process lives
    assert agent_pid(tmp_path, 0) is None
    assert request_stack(tmp_path, 0, proc.pid, timeout=0.5) is None
    assert proc.poll() is None
