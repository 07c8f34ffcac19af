"""`nccl-doctor analyze` against torch's `fr_trace` on the same synthetic dumps.

Makes NCCL-style Flight Recorder dumps (format 2.10) of a job with a default
group and tensor-parallel groups of 8, ``--entries`` entries per rank, in which
one rank stopped scheduling collectives three steps before its peers. Runs
both analyzers as subprocesses, one after the other, and measures wall time
and peak RSS of each (``wait4``). Targets (issue 3): at most 1/8 of
fr_trace's time, at most 1/4 of its peak memory, the right culprit.

    .venv/bin/python benchmarks/bench_analyze.py              # 512 ranks x 2000 entries
    .venv/bin/python benchmarks/bench_analyze.py --ranks 4096 --no-fr-trace   # memory bound

Exit status: 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TP = 8
STACK = [
    {"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py", "line": 3245},
    {"name": "wrapper", "filename": "torch/distributed/c10d_logger.py", "line": 83},
    {"name": "train_step", "filename": "train.py", "line": 120},
    {"name": "main", "filename": "train.py", "line": 200},
]
MEMORY_LIMIT_4096 = 24 * 1024**3


def _entry(rec: int, pg: tuple[str, str], pg_id: int, seq: int, op: str, t: int, done: bool):
    size = [[1024, 1024]] if pg[0] != "0" else [[4096]]
    return {
        "record_id": rec,
        "pg_id": pg_id,
        "process_group": pg,
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"nccl:{op}",
        "time_created_ns": t,
        "duration_ms": 1.0 if done else None,
        "input_sizes": size,
        "input_dtypes": ["BFloat16"],
        "output_sizes": size,
        "output_dtypes": ["BFloat16"],
        "state": "completed" if done else "scheduled",
        "time_discovered_started_ns": t + 1000 if done else None,
        "time_discovered_completed_ns": t + 2000 if done else None,
        "retired": done,
        "timeout_ms": 600000,
        "is_p2p": False,
        "frames": [dict(f) for f in STACK],
        "thread_id": "1",
        "thread_name": "python",
    }


def make_dumps(folder: Path, ranks: int, entries: int, culprit: int) -> None:
    """One pickle per rank, written and dropped one at a time."""
    groups = ranks // TP
    config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))}}
    for g in range(groups):
        config[str(g + 1)] = {
            "name": str(g + 1),
            "desc": "TENSOR_MODEL_PARALLEL_GROUP",
            "ranks": str(list(range(g * TP, (g + 1) * TP))),
        }
    t0 = 1_700_000_000_000_000_000
    pending = 3
    for r in range(ranks):
        tp = (str(r // TP + 1), "TENSOR_MODEL_PARALLEL_GROUP")
        stop = entries - pending if r == culprit else entries
        es, seq = [], {"0": 0, tp[0]: 0}
        for i in range(stop):
            pg = ("0", "default_pg") if i % 4 == 3 else tp
            seq[pg[0]] += 1
            op = (
                "all_reduce"
                if pg[0] == "0"
                else ("_all_gather_base" if i % 2 else "_reduce_scatter_base")
            )
            done = i < entries - pending  # nothing completes past where the culprit stopped
            es.append(
                _entry(
                    i,
                    pg,
                    0 if pg[0] == "0" else 1,
                    seq[pg[0]],
                    op,
                    t0 + i * 1_000_000 + r * 10,
                    done,
                )
            )
        last_done = {
            k: max(
                [
                    e["collective_seq_id"]
                    for e in es
                    if e["process_group"][0] == k and e["state"] == "completed"
                ]
                or [0]
            )
            for k in seq
        }
        status = {
            "0": {
                "last_enqueued_collective": seq["0"],
                "last_started_collective": -1,
                "last_completed_collective": last_done["0"],
            },
            "1": {
                "last_enqueued_collective": seq[tp[0]],
                "last_started_collective": -1,
                "last_completed_collective": last_done[tp[0]],
            },
        }
        dump = {
            "version": "2.10",
            "pg_config": config,
            "pg_status": status,
            "nccl_version": "2.27.3",
            "comm_lib_version": "2.27.3",
            "entries": es,
        }
        (folder / f"rank_{r}").write_bytes(pickle.dumps(dump))


def measure(argv: list[str], timeout: float) -> tuple[float, int, int, str]:
    """(seconds, peak RSS bytes, exit status, stdout) of one child, from its own wait4 rusage."""
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        seconds = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return seconds, usage.ru_maxrss * 1024, proc.returncode, out.read().decode(errors="replace")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=512)
    p.add_argument("--entries", type=int, default=2000)
    p.add_argument("--no-fr-trace", action="store_true", help="only run analyze (memory bound)")
    a = p.parse_args()
    culprit = a.ranks // 2 + 3
    with tempfile.TemporaryDirectory(prefix="bench-analyze-") as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        make_dumps(folder, a.ranks, a.entries, culprit)
        size = sum(f.stat().st_size for f in folder.iterdir())
        print(
            f"dumps: {a.ranks} ranks x {a.entries} entries, {size / 2**20:.0f} MiB, "
            f"made in {time.perf_counter() - t:.1f}s; culprit rank {culprit}"
        )
        ours = measure([sys.executable, "-m", "doctor", "analyze", str(folder), "--json"], 1800)
        verdict = json.loads(ours[3])["verdict"]
        right = verdict["culprit_ranks"] == [culprit]
        print(
            f"analyze:  {ours[0]:7.2f} s  peak {ours[1] / 2**20:8.0f} MiB  "
            f"culprits {verdict['culprit_ranks']} ({'right' if right else 'WRONG'})"
        )
        ok = right
        if a.no_fr_trace:
            limit = MEMORY_LIMIT_4096 if a.ranks >= 4096 else None
            if limit is not None and ours[1] > limit:
                print(f"FAIL: {ours[1] / 2**30:.1f} GiB > 24 GiB")
                ok = False
            return 0 if ok else 1
        theirs = measure(
            [
                sys.executable,
                "-m",
                "torch.distributed.flight_recorder.fr_trace",
                str(folder),
                "--prefix",
                "rank_",
            ],
            3600,
        )
        print(
            f"fr_trace: {theirs[0]:7.2f} s  peak {theirs[1] / 2**20:8.0f} MiB  (exit {theirs[2]})"
        )
        t_ratio, m_ratio = ours[0] / theirs[0], ours[1] / theirs[1]
        print(
            f"ratios:   time {t_ratio:.3f} (target <= 0.125)  memory {m_ratio:.3f} (target <= 0.25)"
        )
        ok = ok and t_ratio <= 1 / 8 and m_ratio <= 1 / 4
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
