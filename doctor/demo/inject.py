"""Faults injected into an unmodified training script, from ``sitecustomize``.

``LocalJob`` writes a ``sitecustomize.py`` that calls ``install()`` and puts it on
the ranks' ``PYTHONPATH``, so every rank runs this before its script. Nothing
here touches the training code: a daemon thread waits (without importing torch)
until the script has imported ``torch.optim``, then registers a global optimizer
step hook. At step ``DOCTOR_DEMO_STEP`` every rank appends a line to
``DOCTOR_DEMO_READY`` (tests wait on it, not on sleeps), and rank
``DOCTOR_DEMO_RANK`` starts its fault:

====  ========================================================================
slow  from that step on, each optimizer step of the rank sleeps
      ``DOCTOR_DEMO_DELAY`` seconds (a straggler)
====  ========================================================================

From that step on, the rank also watches for the file ``DOCTOR_DEMO_GIL_FILE``: once
someone creates it (at any time: a fault done from outside, so it can follow another
one on a running job), the rank's next optimizer step starts a thread that calls C
``sleep()`` through ``ctypes.PyDLL``, which keeps the GIL: the main thread waits for the
GIL while the other ranks wait for it. The rank appends ``held`` to the file when the
thread starts, and its steps stop sleeping. Faults that need no code (SIGSTOP, SIGKILL, a
shard that turns into a FIFO) are done to the ranks from outside by ``doctor.demo.training``.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

FAULT_ENV = "DOCTOR_DEMO_FAULT"
RANK_ENV = "DOCTOR_DEMO_RANK"
STEP_ENV = "DOCTOR_DEMO_STEP"
READY_ENV = "DOCTOR_DEMO_READY"
DELAY_ENV = "DOCTOR_DEMO_DELAY"
GIL_FILE_ENV = "DOCTOR_DEMO_GIL_FILE"
DUMP_ENV = "DOCTOR_DEMO_DUMP_ATTEMPT"
"""The torchrun attempt whose ranks write their Flight Recorder trace at the ready step
(to ``TORCH_FR_DUMP_TEMP_FILE<rank>``): what a timed-out attempt leaves behind."""
HOLD_S = 600


def sitecustomize_text() -> str:
    return "from doctor.demo import inject\ninject.install()\n"


def install() -> None:
    """Arm the hook in a rank (a process with ``RANK``); a no-op anywhere else."""
    if "RANK" not in os.environ or READY_ENV not in os.environ:
        return
    arm = threading.Thread(target=_arm_when_torch_is_ready, name="doctor-demo-inject", daemon=True)
    arm.start()


def _arm_when_torch_is_ready() -> None:
    while True:
        optim = sys.modules.get("torch.optim.optimizer")
        torch = sys.modules.get("torch")
        if optim and torch and hasattr(torch, "optim"):
            hook = getattr(optim, "register_optimizer_step_post_hook", None)
            if hook is not None:
                hook(_Counter())
                return
        time.sleep(0.02)


class _Counter:
    """The global step post-hook: counts optimizer steps, signals readiness, starts the fault."""

    def __init__(self) -> None:
        env = os.environ
        self.rank = int(env["RANK"])
        self.fault = env.get(FAULT_ENV, "none")
        self.culprit = int(env.get(RANK_ENV, "-1"))
        self.at = int(env.get(STEP_ENV, "3"))
        self.delay = float(env.get(DELAY_ENV, "0.3"))
        self.ready = env[READY_ENV]
        self.gil_file = env.get(GIL_FILE_ENV, "")
        self.holding = False
        self.steps = 0

    def __call__(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.steps += 1
        if self.steps == self.at:
            self._dump_if_asked()
            self._say_ready()
        if self.rank != self.culprit or self.steps < self.at:
            return
        if self.holding:
            return
        if self.gil_file and os.path.exists(self.gil_file):
            self.holding = True
            append_line(self.gil_file, "held\n")
            threading.Thread(target=hold_gil_in_c, name="metrics-uploader", daemon=True).start()
        elif self.fault == "slow":
            time.sleep(self.delay)

    def _dump_if_asked(self) -> None:
        env = os.environ
        prefix = env.get("TORCH_FR_DUMP_TEMP_FILE")
        if prefix and env.get(DUMP_ENV) == env.get("TORCHELASTIC_RESTART_COUNT", "0"):
            from doctor.jobdir.agent import dump_flight_recorder

            dump_flight_recorder(Path(f"{prefix}{self.rank}"))

    def _say_ready(self) -> None:
        append_line(self.ready, f"ready rank={self.rank} step={self.steps} fault={self.fault}\n")


def append_line(path: str | os.PathLike[str], line: str) -> None:
    """One write with ``O_APPEND``: the lines of ranks writing one file at once never mix."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def hold_gil_in_c(seconds: int = HOLD_S) -> None:
    """A C call that keeps the GIL: ``PyDLL`` functions do not release it (``CDLL`` ones do)."""
    libc = ctypes.PyDLL(None)
    libc.sleep(seconds)
