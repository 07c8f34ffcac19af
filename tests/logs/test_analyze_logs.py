"""`nccl-doctor analyze` on logs: alone, unrecognised, and mixed with Flight Recorder dumps."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import clean_env, run_cli

from doctor.analyze.load import load_evidence
from doctor.logs import reader as logs_reader
from doctor.model import HangClass
from doctor.trust.subproc import free_port
from doctor.verdict.classify import classify

FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_analyze_reads_a_ras_report_alone() -> None:
    res = run_cli("analyze", str(FIXTURES / "real" / "ras-doc-dead-process" / "ras.txt"), "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 1
    assert (doc["verdict"]["hang_class"], doc["verdict"]["culprit_ranks"]) == ("rank_loss", [21])
    assert any("considered dead" in e["text"] or "Process" in e["text"] for e in doc["evidence"])


def test_unrecognised_text_is_a_verdict_not_an_error(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("loading shards from /data/shards\nwarming the cache for 20 s\n")
    res = run_cli("analyze", str(log), "--json")
    doc = json.loads(res.stdout)
    assert doc["verdict"]["hang_class"] == "unknown"
    assert any("DESYNC_DEBUG" in m for m in doc["verdict"]["missing_evidence"])


WAITING_DUMP = """Process 4242: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 0x7F00AA001740 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2501)
    wrapper (torch/distributed/c10d_logger.py:83)
    train_step (train.py:88)
    <module> (train.py:120)
"""
AUTOTUNING_DUMP = """Process 4245: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 0x7F00AA001740 (active): "MainThread"
    synchronize (torch/cuda/__init__.py:985)
    do_bench (triton/testing.py:117)
    _bench (triton/runtime/autotuner.py:120)
    run (triton/runtime/autotuner.py:171)
    chunk_gated_delta_rule_fwd (fla/ops/gated_delta_rule/chunk.py:40)
    train_step (train.py:80)
    <module> (train.py:120)
"""


def test_py_spy_dumps_of_a_rank_autotuning_a_triton_kernel_are_compile_warmup(
    tmp_path: Path,
) -> None:
    # GIVEN py-spy dumps of four ranks: three wait in all_reduce, rank 3's Triton autotuner
    # times its configs (and waits for its GPU between runs)
    for rank in range(4):
        dump = AUTOTUNING_DUMP if rank == 3 else WAITING_DUMP
        (tmp_path / f"py-spy-rank{rank}.txt").write_text(dump)
    # WHEN analyzed THEN rank 3 is compiling, not waiting for a stuck GPU
    doc = json.loads(run_cli("analyze", str(tmp_path), "--json").stdout)
    assert (doc["verdict"]["hang_class"], doc["verdict"]["culprit_ranks"]) == (
        "compile_warmup",
        [3],
    )
    assert "Triton" in doc["verdict"]["summary"]


def test_xid_lines_tell_flight_recorder_which_stop_was_the_gpu(tmp_path: Path) -> None:
    # GIVEN NVIDIA's GPU-error dumps (Flight Recorder alone: ranks 12 and 14 stopped, cause
    # unknown), with the NCCL init lines of those ranks and the host's kernel log beside them
    folder = tmp_path / "job"
    shutil.copytree(FIXTURES / "fr-nvrx" / "gpu_error_1st", folder)
    (folder / "nccl-node-3.log").write_text(
        "node-3:4012:4012 [4] NCCL INFO comm 0x7f rank 12 nranks 16 cudaDev 4 nvmlDev 4 busId "
        "9b000 commId 0x1 - Init COMPLETE\n"
        "node-3:4014:4014 [6] NCCL INFO comm 0x7f rank 14 nranks 16 cudaDev 6 nvmlDev 6 busId "
        "bb000 commId 0x1 - Init COMPLETE\n"
    )
    (folder / "dmesg-node-3.txt").write_text(
        "Mar 01 12:00:00 node-3 kernel: NVRM: Xid (PCI:0000:9b:00): 48, pid=4012, name=python, "
        "An uncorrectable double bit error (DBE) has been detected on GPU\n"
        "Mar 01 12:00:01 node-3 kernel: NVRM: Xid (PCI:0000:bb:00): 48, pid=4014, name=python, "
        "An uncorrectable double bit error (DBE) has been detected on GPU\n"
    )
    # WHEN the folder is analyzed
    evidence = load_evidence([folder])
    verdict = classify(evidence)
    # THEN the logs refine Flight Recorder's "stopped": a GPU hang of exactly those ranks
    assert len(evidence.dumps) == 16
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.GPU_HANG, (12, 14))
    alone = classify(load_evidence([FIXTURES / "fr-nvrx" / "gpu_error_1st"]))
    assert (alone.hang_class, alone.culprit_ranks) == (HangClass.UNKNOWN, (12, 14))
    # AND the text files were not mistaken for broken dumps
    assert not any("nccl-node-3.log" in s.reason for s in evidence.skipped)


def test_dumps_already_decoded_are_not_opened_again_as_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """32,768 dumps each opened again to see whether it was text took 2 s of a 60 s analyze;
    a text file that only looks like a dump by its name is still read as a log."""
    for r in range(4):
        shutil.copy(FIXTURES / "fr" / "gloo-wrong-collective" / f"rank_{r}", tmp_path)
    (tmp_path / "rank_5.log").write_text("epoch 1 step 10 loss 0.31\n")
    looked_at: list[str] = []
    real = logs_reader.is_text

    def recorded(path: Path) -> bool:
        looked_at.append(path.name)
        return real(path)

    monkeypatch.setattr(logs_reader, "is_text", recorded)
    evidence = load_evidence([tmp_path])
    assert len(evidence.dumps) == 4
    assert looked_at == ["rank_5.log"]
    assert [Path(f).name for f in evidence.log_files] == ["rank_5.log"]


DISAGREEING_JOBS = {
    # the job's code (2 ranks, gloo): what its output holds, what the verdict's summary says
    "allreduce-sizes": (
        "x = torch.ones(100 if dist.get_rank() == 0 else 200)\ndist.all_reduce(x)",
        "op.preamble.length <= op.nbytes",
        "bytes of a collective where its own call expects",
    ),
    "ddp-param-shapes": (
        "DDP(torch.nn.Linear(10, 10 if dist.get_rank() == 0 else 12))",
        "appears not to match sizes",
        "appears not to match sizes",
    ),
    "ddp-param-count": (
        "DDP(torch.nn.Linear(10, 10, bias=dist.get_rank() == 0))",
        "DDP expects same model",
        "DDP expects same model",
    ),
    # and whose ranks call different collectives: gloo's timeouts, with each rank's traceback
    "allreduce-broadcast": (
        "x = torch.ones(8)\ndist.all_reduce(x) if dist.get_rank() == 0 else dist.broadcast(x, 0)",
        "Timed out waiting",
        "(all_reduce, broadcast)",
    ),
    "allreduce-barrier": (
        "dist.all_reduce(torch.ones(8)) if dist.get_rank() == 0 else dist.barrier()",
        "Timed out waiting",
        "(all_reduce, barrier)",
    ),
}
PROLOGUE = """import datetime, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=4))
"""


@pytest.mark.slow
@pytest.mark.parametrize("case", list(DISAGREEING_JOBS))
def test_a_real_job_whose_ranks_disagree_is_a_mismatch(case: str, tmp_path: Path) -> None:
    code, printed, says = DISAGREEING_JOBS[case]
    # GIVEN the whole output of a real 2-rank torchrun job whose ranks disagree on a size
    # (gloo's size check aborts one rank, the other reads "Connection reset by peer"; or
    # DDP's model check raises on both) or on the collective (both time out, each with its
    # traceback), and torchrun's report of the ranks' exits
    script = tmp_path / "job.py"
    script.write_text(PROLOGUE + code + "\n")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    argv += ["--master_port", str(free_port()), "--log-dir", str(tmp_path / "torchrun")]
    argv += [str(script)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    log = tmp_path / "job.log"
    log.write_text(run.stdout + run.stderr)
    assert run.returncode != 0 and printed in log.read_text()
    # WHEN it is analyzed
    doc = json.loads(run_cli("analyze", str(log), "--json").stdout)
    # THEN it is a collective mismatch, not the network a reset connection suggests nor the
    # loss of the rank that raised, and the summary says what disagreed
    assert doc["verdict"]["hang_class"] == "collective_mismatch", doc["verdict"]
    assert says in doc["verdict"]["summary"]


def test_a_large_log_is_read_with_a_bar_and_a_small_one_without(tmp_path: Path) -> None:
    # GIVEN a 17 MB training log with a watchdog timeout at its end, and a small one
    step = "[rank0] step {n} loss 2.3012 lr 3.0e-04 grad_norm 1.02 tokens/s 81234\n"
    timeout = (
        "[rank0]:[E1121 10:02:11 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n"
    )
    large, small = tmp_path / "large.log", tmp_path / "small.log"
    with large.open("w") as out:
        for n in range(17 * 2**20 // len(step)):
            out.write(step.format(n=n % 10))
        out.write(timeout)
    small.write_text(step.format(n=1) + timeout)
    # WHEN each is analyzed with stderr on a terminal (FORCE_COLOR: rich's stand-in for one)
    on_terminal = clean_env({"FORCE_COLOR": "1", "COLUMNS": "120"})
    read_large = run_cli("analyze", str(large), env=on_terminal)
    read_small = run_cli("analyze", str(small), env=on_terminal)
    piped = run_cli("analyze", str(large))
    reported = run_cli(
        "report", str(large), "-o", str(tmp_path / "r.md"), "--format", "md", env=on_terminal
    )
    # THEN the large log's reading shows its megabytes, and the verdict is the same as piped
    assert "reading logs" in read_large.stderr and "/17 MB" in read_large.stderr
    assert read_large.returncode == piped.returncode == 1
    # AND neither the small log nor a pipe gets a bar
    assert "reading logs" not in read_small.stderr + piped.stderr
    # AND the report's reading shows it too, on stderr, never in the report
    report = (tmp_path / "r.md").read_text()
    assert "/17 MB" in reported.stderr and "reading logs" not in report
    assert "ALLREDUCE in pg 0 at seq 7" in report


SRUN_OVER_TORCHRUN = """\
0: [default0]:step 100 loss 2.1
1: [default1]:Traceback (most recent call last):
1: [default1]:  File "/train.py", line 88, in <module>
1: [default1]:    batch = next(it)
1: [default1]:KeyError: 'labels'
{timeouts}"""


def test_srun_s_label_over_torchrun_s_names_no_wrong_rank(tmp_path: Path) -> None:
    # GIVEN a two-node job, srun --label starting one torchrun per node: the label is the
    # node's task (0, 1), torchrun's the local rank; node 1's second process raised, and
    # ranks 0-2 logged watchdog timeouts with their own rank labels
    timeouts = "\n".join(
        f"{r // 2}: [default{r % 2}]:[rank{r}]:[E1129 11:56:57 ProcessGroupNCCL.cpp:616] "
        f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5037, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600024 "
        "milliseconds before timing out."
        for r in range(3)
    )
    log = tmp_path / "job.log"
    log.write_text(SRUN_OVER_TORCHRUN.format(timeouts=timeouts) + "\n")
    # WHEN it is analyzed
    verdict = json.loads(run_cli("analyze", str(log), "--json").stdout)["verdict"]
    # THEN a process was lost, and rank 1 (node 1's task id, a rank that timed out) is not
    # named for it: the raising process's rank is not in its labels
    assert (verdict["hang_class"], verdict["culprit_ranks"]) == ("rank_loss", [])
    assert "a process raised (KeyError: 'labels'" in verdict["summary"]
