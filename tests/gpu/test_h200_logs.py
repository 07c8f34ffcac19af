"""The log reader on text a real NVIDIA H200 job printed (tests/fixtures/gpu/h200).

NCCL 2.28.9 (torch 2.11.0+cu130) with NCCL_DEBUG=INFO: a healthy 1-rank communicator,
two ranks given the same GPU (NCCL's duplicate-GPU error), and ProcessGroupNCCL's
watchdog timing out an all_reduce queued behind a kernel that never ended.
"""

from __future__ import annotations

import json
from pathlib import Path

from clitools import run_cli

from doctor.gpu.nvml import bus_key
from doctor.logs import kinds, parse_lines

H200 = Path(__file__).parent.parent / "fixtures" / "gpu" / "h200"


def events(name: str) -> list:
    return parse_lines((H200 / name).read_text().splitlines())


def nvml_bus_id() -> str:
    return json.loads((H200 / "nvml-idle.json").read_text())["fleet"]["gpus"][0]["bus_id"]


def test_a_real_communicators_info_lines_name_the_rank_host_pid_and_gpu() -> None:
    found = events("nccl-info.log")
    assert {e.kind for e in found} == {kinds.RANK_INFO}, "97 INFO lines, no fault among them"
    init = [e for e in found if e.device]
    assert {(e.rank, e.nranks, e.host, e.pid) for e in init} == {(0, 1, "vm", 548)}
    # NCCL's busId 60 is NVML's 00000000:00:06.0: the log ties the rank to the GPU NVML read
    assert {e.device for e in init} == {"0000:00:06"}
    assert bus_key(init[0].device) == bus_key(nvml_bus_id())
    bootstrap = [e for e in found if e.peer]
    assert [e.peer for e in bootstrap] == ["192.0.2.2"], "NCCL 2.28 writes 'Bootstrap: Using'"
    coll = events("nccl-coll.log")
    assert {e.kind for e in coll} == {kinds.RANK_INFO, kinds.NCCL_CALL}, "SUBSYS=INIT,COLL,ENV"
    # NCCL's trace of each call; 2.28 counts no operation on a one-rank communicator (every
    # call says opCount 0), so one process's calls are never compared with each other
    calls = [e for e in coll if e.kind == kinds.NCCL_CALL]
    assert {(e.nranks, e.seq, e.pid) for e in calls} == {(1, 0, 874)}
    assert {e.op for e in calls} == {"ALLREDUCE", "BROADCAST", "ALLGATHER"}


def test_two_ranks_on_one_gpu_are_a_communicator_creation_failure() -> None:
    found = events("duplicate-gpu.log")
    duplicate = [e for e in found if "Duplicate GPU detected" in e.text]
    # NCCL's own WARN lines, by pid; torch's exception quotes the message again ("Last
    # error:"), read as the same failure with no prefix to name a process
    assert {e.kind for e in duplicate} == {kinds.BOOTSTRAP}
    assert [e.pid for e in duplicate if "NCCL WARN" in e.text] == [851, 852]
    assert {(e.rank, e.pid) for e in found if e.kind == kinds.RANK_INFO and e.nranks} == {
        (0, 851),
        (1, 852),
    }
    assert sorted(e.code for e in found if e.kind == kinds.EXIT and e.rank is not None) == [1, 1]


def test_the_duplicate_gpu_verdict_says_to_give_each_rank_its_own_gpu() -> None:
    """Before: the bootstrap advice (MASTER_ADDR, NCCL_SOCKET_IFNAME, fabric) for a device
    mapping error that no network setting fixes."""
    done = run_cli("analyze", str(H200 / "duplicate-gpu.log"), "--json")
    verdict = json.loads(done.stdout)["verdict"]
    assert (verdict["hang_class"], verdict["culprit_ranks"]) == ("bootstrap", [0, 1])
    assert "Duplicate GPU detected : rank 0 and rank 1" in verdict["summary"]
    assert "torch.cuda.set_device(LOCAL_RANK)" in verdict["summary"]
    assert "MASTER_ADDR" not in verdict["summary"]


def test_the_real_watchdog_timeout_and_its_work_counters() -> None:
    """torch 2.11 writes 'failure detected by watchdog at work sequence id: 7 PG status: last
    enqueued work: 7, last completed work: 6' and the dump signal's 'Last enqueued NCCL work:
    7, last completed NCCL work: 6'; before, neither gave a work_progress event."""
    found = events("hang.log")
    timeouts = [e for e in found if e.kind == kinds.WATCHDOG_TIMEOUT]
    assert {(e.rank, e.seq) for e in timeouts} == {(0, 7)}
    assert {(e.op, e.numel) for e in timeouts if e.op} == {("ALLREDUCE", 1048576)}
    assert {e.process_group for e in timeouts} == {None, "0"}
    progress = [e for e in found if e.kind == kinds.WORK_PROGRESS]
    assert [(e.rank, e.seq, e.completed, e.process_group) for e in progress] == [
        (0, 7, 6, "0"),
        (0, 7, 6, "0"),
    ]
    [died] = [e for e in found if e.kind == kinds.EXIT and e.rank == 0]
    assert (died.code, died.pid) == (-6, 620), "the watchdog's abort: SIGABRT"
