"""`nccl-doctor analyze` against torch's `fr_trace` on the same synthetic dumps.

Makes NCCL-style Flight Recorder dumps (format 2.10) of a Megatron-style job
(world group, tensor-parallel groups of 8, data-parallel groups across them),
``--entries`` entries per rank, in which one rank stopped scheduling
collectives three steps before its peers. Every other record is one fr_trace
accepts: sizes agree with the op and the group size, stacks are as deep as a
Megatron job's. Runs both analyzers as subprocesses, one after the other, and
reads each one's own rusage (wait4): wall time, CPU time (with its workers)
and peak RSS. fr_trace's run counts only when it names the culprit (a dump it
rejects makes it stop early, which would time less than its analysis).
Targets (issue 3): at most 1/8 of fr_trace's wall time, at most 1/4 of its
peak memory, the right culprit. Wall time depends on free cores (analyze
reduces dumps on every core); CPU time does not, so both are printed.

    .venv/bin/python benchmarks/bench_analyze.py              # 512 ranks x 2000 entries
    .venv/bin/python benchmarks/bench_analyze.py --ranks 4096 --no-fr-trace   # memory bound

Issue 26's largest job: 32,768 ranks x 2,000 entries (24 GB of dumps, made once in the
folder given, about 2.5 ms of CPU a dump: ``make_dumps`` patches one pickle per lane),
``analyze`` run 5 times: median wall, CPU, peak RSS of analyze with its workers; targets
60 s and 1 GiB, the right culprit in every run:

    .venv/bin/python benchmarks/bench_analyze.py --ranks 32768 --dumps DIR --runs 5

Exit status: 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil

TP = 8
C10D = "torch/distributed/distributed_c10d.py"
MODULE = "torch/nn/modules/module.py"
MEGATRON = "megatron/core"
WRAPPER = ("wrapper", "torch/distributed/c10d_logger.py", 81)
TRAIN = [
    ("forward_backward_no_pipelining", f"{MEGATRON}/pipeline_parallel/schedules.py", 592),
    ("train_step", "megatron/training/training.py", 1184),
    ("train", "megatron/training/training.py", 1650),
    ("pretrain", "megatron/training/training.py", 420),
    ("<module>", "pretrain_gpt.py", 270),
]
LAYERS = [
    (name, file, line)
    for forward in (
        ("forward", f"{MEGATRON}/tensor_parallel/layers.py", 1010),
        ("forward", f"{MEGATRON}/transformer/attention.py", 620),
        ("forward", f"{MEGATRON}/transformer/transformer_layer.py", 480),
        ("forward", f"{MEGATRON}/transformer/transformer_block.py", 550),
        ("forward", f"{MEGATRON}/models/gpt/gpt_model.py", 300),
    )
    for name, file, line in (
        forward,
        ("_call_impl", MODULE, 1762),
        ("_wrapped_call_impl", MODULE, 1751),
    )
]


def _stack(*calls: tuple[str, str, int]) -> list[dict[str, object]]:
    return [{"name": n, "filename": f, "line": line} for n, f, line in calls]


STACKS = {
    ("TENSOR_MODEL_PARALLEL_GROUP", "_all_gather_base"): _stack(
        ("all_gather_into_tensor", C10D, 3830),
        WRAPPER,
        ("_gather_along_first_dim", f"{MEGATRON}/tensor_parallel/mappings.py", 88),
        ("forward", f"{MEGATRON}/tensor_parallel/layers.py", 470),
        ("apply", "torch/autograd/function.py", 575),
        *LAYERS,
        ("forward_step", f"{MEGATRON}/pipeline_parallel/schedules.py", 275),
        *TRAIN,
    ),
    ("TENSOR_MODEL_PARALLEL_GROUP", "_reduce_scatter_base"): _stack(
        ("reduce_scatter_tensor", C10D, 4300),
        WRAPPER,
        ("_reduce_scatter_along_first_dim", f"{MEGATRON}/tensor_parallel/mappings.py", 120),
        ("backward", f"{MEGATRON}/tensor_parallel/layers.py", 520),
        ("apply", "torch/autograd/function.py", 307),
        ("_engine_run_backward", "torch/autograd/graph.py", 824),
        ("backward", "torch/autograd/__init__.py", 347),
        ("backward", "torch/_tensor.py", 648),
        ("backward_step", f"{MEGATRON}/pipeline_parallel/schedules.py", 370),
        *TRAIN,
    ),
    ("DATA_PARALLEL_GROUP", "_reduce_scatter_base"): _stack(
        ("reduce_scatter_tensor", C10D, 4300),
        WRAPPER,
        ("start_grad_sync", f"{MEGATRON}/distributed/param_and_grad_buffer.py", 360),
        ("finish_grad_sync", f"{MEGATRON}/distributed/distributed_data_parallel.py", 440),
        ("finalize_model_grads", f"{MEGATRON}/distributed/finalize_model_grads.py", 250),
        *TRAIN,
    ),
    ("default_pg", "all_reduce"): _stack(
        ("all_reduce", C10D, 2806),
        WRAPPER,
        ("average_losses_across_data_parallel_group", "megatron/training/utils.py", 190),
        ("loss_func", "pretrain_gpt.py", 160),
        ("forward_step", f"{MEGATRON}/pipeline_parallel/schedules.py", 290),
        *TRAIN,
    ),
}
"""Call stacks as deep as a Megatron-style job's (the tensor-parallel all-gather is 26 frames).
Every entry refers to the same frame dicts: torch's pickler writes each distinct frame once
and refers back to it, as the dumps of real torch 2.13 jobs show, not a copy per entry."""
MEMORY_LIMIT_4096 = 24 * 1024**3


def _sizes(op: str, members: int) -> tuple[list[list[int]], list[list[int]]]:
    """Input and output sizes that agree with the op and the group size, as fr_trace checks."""
    shard, full = [[1024, 1024]], [[members * 1024, 1024]]
    if op == "_all_gather_base":
        return shard, full
    if op == "_reduce_scatter_base":
        return full, shard
    return [[4096]], [[4096]]


def _entry(
    rec: int, pg: tuple[str, str], pg_id: int, members: int, seq: int, op: str, t: int, done: bool
):
    size_in, size_out = _sizes(op, members)
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
        "input_sizes": size_in,
        "input_dtypes": ["BFloat16"],
        "output_sizes": size_out,
        "output_dtypes": ["BFloat16"],
        "state": "completed" if done else "scheduled",
        "time_discovered_started_ns": t + 1000 if done else None,
        "time_discovered_completed_ns": t + 2000 if done else None,
        "retired": done,
        "timeout_ms": 600000,
        "is_p2p": False,
        "frames": list(STACKS[pg[1], op]),
        "thread_id": "1",
        "thread_name": "python",
    }


def _layout(ranks: int, r: int) -> dict[str, dict[str, str]]:
    """Rank r's Megatron-style groups: the world, its tensor-parallel block of 8, its
    data-parallel stride."""
    g, d = r // TP, r % TP
    tp, dp = str(1 + g), str(1 + ranks // TP + d)
    return {
        "0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))},
        tp: {
            "name": tp,
            "desc": "TENSOR_MODEL_PARALLEL_GROUP",
            "ranks": str(list(range(g * TP, (g + 1) * TP))),
        },
        dp: {"name": dp, "desc": "DATA_PARALLEL_GROUP", "ranks": str(list(range(d, ranks, TP)))},
    }


def _schedule(i: int, r: int, ranks: int) -> tuple[tuple[str, str], int, str]:
    """Entry i of rank r: mostly tensor-parallel, some data-parallel, a few world ops."""
    if i % 8 == 7:
        return ("0", "default_pg"), 0, "all_reduce"
    if i % 8 == 6:
        return (str(1 + ranks // TP + r % TP), "DATA_PARALLEL_GROUP"), 2, "_reduce_scatter_base"
    op = "_all_gather_base" if i % 2 else "_reduce_scatter_base"
    return (str(1 + r // TP), "TENSOR_MODEL_PARALLEL_GROUP"), 1, op


T0 = 1_700_000_000_000_000_000
PENDING = 3
"""Entries the culprit never scheduled: its peers wait in them."""


def dump_of(r: int, ranks: int, entries: int, culprit: int, tp: tuple[str, str] | None = None):
    """Rank ``r``'s dump as a dict; ``tp`` replaces its tensor-parallel group's name and
    rank list (the placeholders of a template)."""
    config = _layout(ranks, r)
    if tp is not None:
        config.pop(str(1 + r // TP))
        config[tp[0]] = {"name": tp[0], "desc": "TENSOR_MODEL_PARALLEL_GROUP", "ranks": tp[1]}
    members = {
        "default_pg": ranks,
        "TENSOR_MODEL_PARALLEL_GROUP": TP,
        "DATA_PARALLEL_GROUP": ranks // TP,
    }
    stop = entries - PENDING if r == culprit else entries
    es: list[dict] = []
    seq: dict[str, int] = {}
    done_to: dict[str, int] = {}
    pg_ids: dict[str, int] = {}
    for i in range(stop):
        pg, pg_id, op = _schedule(i, r, ranks)
        if tp is not None and pg_id == 1:
            pg = (tp[0], pg[1])
        seq[pg[0]] = seq.get(pg[0], 0) + 1
        pg_ids[pg[0]] = pg_id
        done = i < entries - PENDING  # nothing completes past where the culprit stopped
        if done:
            done_to[pg[0]] = seq[pg[0]]
        t = T0 + i * 1_000_000 + r * 10
        es.append(_entry(i, pg, pg_id, members[pg[1]], seq[pg[0]], op, t, done))
    status = {
        str(pg_ids[k]): {
            "last_enqueued_collective": seq[k],
            "last_started_collective": -1,
            "last_completed_collective": done_to.get(k, 0),
        }
        for k in seq
    }
    return {
        "version": "2.10",
        "pg_config": {k: v for k, v in config.items() if k in seq},  # its own groups
        "pg_status": status,
        "nccl_version": "2.27.3",
        "comm_lib_version": "2.27.3",
        "entries": es,
    }


def make_dumps(folder: Path, ranks: int, entries: int, culprit: int, workers: int = 1) -> None:
    """One pickle per rank (``rank_<r>``), the same bytes whatever the number of workers,
    each process writing a block of ranks."""
    step = -(-ranks // (max(1, workers) * 8))
    blocks = [range(b, min(b + step, ranks)) for b in range(0, ranks, step)]
    jobs = [(folder, ranks, entries, culprit, b) for b in blocks]
    if workers <= 1:
        for job in jobs:
            _write_block(*job)
        return
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_write_block, *zip(*jobs, strict=True)))


def _tp(r: int) -> tuple[str, str]:
    """Rank r's tensor-parallel group: its name and its rank list as pg_config writes it."""
    g = r // TP
    return str(1 + g), str(list(range(g * TP, (g + 1) * TP)))


class _Template:
    """A rank's pickle (protocol 2, as torch writes it) with placeholders as long as its group's
    name and rank list, and where its timestamps are: the dump of any rank of the same lane
    and lengths is this one patched in place, 10x faster than building and pickling 2,000
    dicts (a folder of 32,768 dumps takes minutes, not an hour)."""

    def __init__(self, r: int, ranks: int, entries: int, culprit: int) -> None:
        self.base = r % TP  # rank `base` has no time shift: rank r's times are base's + 10(r-base)
        name, members = _tp(r)
        holders = ("\x01" * len(name), "\x02" * len(members))
        doc = dump_of(self.base, ranks, entries, self.base if r == culprit else -1, holders)
        self.data = pickle.dumps(doc, 2)  # torch's pickler writes protocol 2, unframed
        self.at = []
        for text in holders:  # each is one shared object: pickled once, then memo references
            code = b"X" + struct.pack("<I", len(text)) + text.encode()  # BINUNICODE
            if self.data.count(code) != 1:
                raise ValueError("a placeholder is not unique in the template")
            self.at.append(self.data.index(code) + 5)
        self.times = [
            (m.start() + 2, v)
            for m in re.finditer(rb"\x8a\x08", self.data)
            if T0
            <= (v := int.from_bytes(self.data[m.start() + 2 : m.start() + 10], "little"))
            < T0 + 10**15
        ]

    def dump(self, r: int) -> bytes:
        buf = bytearray(self.data)
        shift = (r - self.base) * 10
        for at, v in self.times:
            struct.pack_into("<q", buf, at, v + shift)
        for at, text in zip(self.at, _tp(r), strict=True):
            buf[at : at + len(text)] = text.encode()
        return bytes(buf)


def _write_block(folder: Path, ranks: int, entries: int, culprit: int, block: range) -> None:
    templates: dict[tuple[int, int, int], _Template] = {}
    for r in block:
        name, members = _tp(r)
        key = (-1 if r == culprit else r % TP, len(name), len(members))
        if key not in templates:
            templates[key] = _Template(r, ranks, entries, culprit)
        (folder / f"rank_{r}").write_bytes(templates[key].dump(r))


@dataclass(frozen=True)
class Run:
    seconds: float
    """Wall-clock time."""
    cpu: float
    """User + system CPU of the process and the workers it waited for."""
    peak: int
    """Peak RSS in bytes of the largest process of its tree (wait4's ru_maxrss)."""
    code: int
    out: str
    tree_peak: int = 0
    """Peak of the summed RSS of the process and its workers (sampled every 0.1 s)."""

    def line(self, name: str) -> str:
        return (
            f"{name:9} {self.seconds:7.2f} s wall  {self.cpu:7.2f} s cpu  "
            f"peak {self.peak / 2**20:7.0f} MiB (with its workers {self.tree_peak / 2**20:.0f} MiB)"
        )


def _tree_rss(pid: int, peak: list[int], done: threading.Event) -> None:
    """Sample the summed RSS of ``pid`` and its children until ``done``."""
    try:
        root = psutil.Process(pid)
        while not done.wait(0.1):
            total = 0
            for proc in (root, *root.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
            peak[0] = max(peak[0], total)
    except psutil.Error:
        return


def measure(argv: list[str], timeout: float, stderr: int = subprocess.DEVNULL) -> Run:
    """Run one child to completion and read its own rusage (wait4), not the sum of all."""
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=stderr)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        peak, done = [0], threading.Event()
        sampler = threading.Thread(target=_tree_rss, args=(proc.pid, peak, done), daemon=True)
        sampler.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
            done.set()
        seconds = time.perf_counter() - t
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return Run(
            seconds,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss * 1024,
            proc.returncode,
            out.read().decode(errors="replace"),
            peak[0],
        )


LARGEST = {32768: (60.0, 2**30)}
"""Issue 26: ranks -> (median wall seconds, peak bytes of analyze and its workers)."""
STAMP = ".bench-dumps"
"""In a ``--dumps`` folder: what its dumps are (a dot file: no dump reader reads it)."""


def _dumps(folder: Path, ranks: int, entries: int, culprit: int, workers: int) -> None:
    """Make the dumps in ``folder`` unless an earlier run made these very ones there."""
    want = f"{ranks} {entries} {culprit}\n"
    stamp = folder / STAMP
    if stamp.is_file() and stamp.read_text() == want:
        print(f"dumps: reusing {folder}")
        return
    t = time.perf_counter()
    make_dumps(folder, ranks, entries, culprit, workers)
    stamp.write_text(want)
    print(f"dumps: made in {time.perf_counter() - t:.0f}s")


def _largest(folder: Path, ranks: int, culprit: int, runs: int) -> bool:
    """``analyze`` ``runs`` times: median and p95 (20 runs or more) wall, CPU, peak RSS."""
    found = []
    for i in range(runs):
        run = measure([sys.executable, "-m", "doctor", "analyze", str(folder), "--json"], 3600)
        verdict = json.loads(run.out)["verdict"]
        found.append((run, verdict["culprit_ranks"] == [culprit]))
        print(f"{run.line(f'run {i + 1}:')}  culprits {verdict['culprit_ranks']}")
    walls = sorted(r.seconds for r, _ok in found)
    median = statistics.median(walls)
    p95 = f", p95 {walls[round(0.95 * (len(walls) - 1))]:.1f} s" if runs >= 20 else ""
    peak = max(r.tree_peak for r, _ok in found)
    cpu = statistics.median(r.cpu for r, _ok in found)
    print(
        f"analyze of {ranks} ranks: median {median:.1f} s wall{p95}, {cpu:.1f} s cpu; peak RSS "
        f"{peak / 2**20:.0f} MiB (analyze and its workers), largest process "
        f"{max(r.peak for r, _ok in found) / 2**20:.0f} MiB; verdict "
        f"{'right' if all(ok for _r, ok in found) else 'WRONG'} in every run"
    )
    ok = all(good for _r, good in found)
    if ranks in LARGEST:
        seconds, memory = LARGEST[ranks]
        print(f"targets: {seconds:.0f} s, {memory / 2**30:.0f} GiB")
        ok = ok and median <= seconds and peak <= memory
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=512)
    p.add_argument("--entries", type=int, default=2000)
    p.add_argument("--no-fr-trace", action="store_true", help="only run analyze (memory bound)")
    p.add_argument("--dumps", type=Path, help="make (once) and keep the dumps in this folder")
    p.add_argument("--runs", type=int, default=1, help="with --dumps: runs of analyze")
    a = p.parse_args()
    culprit = a.ranks // 2 + 3
    if a.dumps is not None:
        a.dumps.mkdir(parents=True, exist_ok=True)
        _dumps(a.dumps, a.ranks, a.entries, culprit, os.cpu_count() or 1)
        ok = _largest(a.dumps, a.ranks, culprit, a.runs)
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    with tempfile.TemporaryDirectory(prefix="bench-analyze-") as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        make_dumps(folder, a.ranks, a.entries, culprit)
        size = sum(f.stat().st_size for f in folder.iterdir())
        print(
            f"dumps: {a.ranks} ranks x {a.entries} entries, {size / 2**20:.0f} MiB, "
            f"made in {time.perf_counter() - t:.1f}s; culprit rank {culprit}; "
            f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
        )
        ours = measure([sys.executable, "-m", "doctor", "analyze", str(folder), "--json"], 1800)
        verdict = json.loads(ours.out)["verdict"]
        right = verdict["culprit_ranks"] == [culprit]
        print(
            f"{ours.line('analyze:')}  culprits {verdict['culprit_ranks']} "
            f"({'right' if right else 'WRONG'})"
        )
        ok = right
        if a.no_fr_trace:
            if a.ranks >= 4096 and ours.peak > MEMORY_LIMIT_4096:
                print(f"FAIL: {ours.peak / 2**30:.1f} GiB > 24 GiB")
                ok = False
            print("PASS" if ok else "FAIL")
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
            stderr=subprocess.STDOUT,
        )
        # a dump fr_trace rejects makes it stop early: time only a run that found the rank
        finished = f"missing ranks: {{{culprit}}}" in theirs.out and "aborting" not in theirs.out
        print(
            f"{theirs.line('fr_trace:')}  (exit {theirs.code}, "
            f"{'names rank ' + str(culprit) if finished else 'DID NOT FINISH: no comparison'})"
        )
        t_ratio, c_ratio = ours.seconds / theirs.seconds, ours.cpu / theirs.cpu
        m_ratio = ours.peak / theirs.peak
        print(
            f"ratios:   wall {t_ratio:.3f} (target <= 0.125)  cpu {c_ratio:.3f}  "
            f"memory {m_ratio:.3f} (target <= 0.25)"
        )
        ok = ok and finished and t_ratio <= 1 / 8 and m_ratio <= 1 / 4
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
