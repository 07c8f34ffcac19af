"""A rank for ``bench_stacks.py``: an agent, three threads that push and free Python frames
(as a rank's helper threads do), and a main thread that waits with the GIL released
(``free``) or sleeps in C holding it (``gil``).

    python stack_bench_rank.py JOBDIR SECONDS free|gil
"""

from __future__ import annotations

import ctypes
import math
import sys
import threading
import time
from pathlib import Path

from doctor.jobdir.agent import Agent


def nested(depth: int) -> list[str]:
    if depth == 0:
        return [word for word in (w.upper() for w in ("a", "b")) if word]
    return nested(depth - 1)


def busy() -> None:
    while True:
        nested(20)


def churn() -> None:
    while True:
        thread = threading.Thread(target=nested, args=(5,))
        thread.start()
        thread.join()


def main() -> None:
    directory, seconds, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    with Agent(directory, 0):
        for work in (busy, busy, churn):
            threading.Thread(target=work, daemon=True).start()
        print("ready", flush=True)
        if mode == "gil":
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:  # a signal ends libc's sleep
                ctypes.PyDLL(None).sleep(math.ceil(left))
        else:
            threading.Event().wait(seconds)


if __name__ == "__main__":
    main()
