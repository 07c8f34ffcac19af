"""Every rank of several demo jobs, forked from one interpreter that imported torch once.

``python forked_ranks.py JOBS.json``: each entry, ``{"env": {...}, "args": [...]}``, is one
rank, run as ``python -m doctor.demo.job ARGS`` with that environment would run it, in its own
process, forked as ``torch.multiprocessing``'s fork start method forks. The parent waits for
every rank and exits 0. Why: 24 ranks each importing torch, and ``torch._dynamo`` (which
a rank's Flight Recorder dump with stack traces imports, through ``torch._inductor``), made
the jobs 45 s of this module's 49 on 2 cores; forked, they take 6 s. Flight Recorder's
records do not depend on how a rank started.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import torch._dynamo  # noqa: F401  its dump with stack traces imports it (1 s of CPU each)
import torch.distributed  # noqa: F401  the import every rank shares

from doctor.demo.job import main


def run_rank(env: dict[str, str], args: list[str]) -> int:
    os.environ.clear()
    os.environ.update(env)
    try:
        return main(args)
    except BaseException:  # a rank's failure is its exit code, as when it runs alone
        traceback.print_exc()
        return 1


def fork_all(ranks: list[dict]) -> None:
    children = []
    for rank in ranks:
        pid = os.fork()
        if pid == 0:
            code = run_rank(rank["env"], rank["args"])
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    fork_all(json.loads(Path(sys.argv[1]).read_text()))
