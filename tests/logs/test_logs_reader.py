"""Reading files: bounded memory, what the bounds cut, ranks resolved across files."""

from __future__ import annotations

import gzip
import random
import resource
import subprocess
import sys
from pathlib import Path

from doctor.logs import Bounds, kinds, parse_text, read_logs

WATCHDOG = (
    "[rank{r}]:[E1121 10:02:11 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
    "Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n"
)


def test_a_long_line_is_cut_and_the_cut_is_evidence(tmp_path: Path) -> None:
    # GIVEN a log with a 3 MB line (a tensor printed whole) between two real lines
    log = tmp_path / "job.out"
    log.write_text(WATCHDOG.format(r=1) + "x" * 3_000_000 + "\n" + WATCHDOG.format(r=2))
    # WHEN it is read with the default bounds
    reading = read_logs([log])
    # THEN both watchdog lines are read and the cut is reported, not raised
    assert {e.rank for e in reading.events if e.kind == kinds.WATCHDOG_TIMEOUT} == {1, 2}
    assert any("line_chars" in s.reason for s in reading.skipped)


def test_events_per_rank_and_kind_are_bounded(tmp_path: Path) -> None:
    lines = [WATCHDOG.format(r=0).replace("SeqNum=12", f"SeqNum={i}") for i in range(100)]
    parsed = parse_text(lines, "x", bounds=Bounds(events_per_key=5))
    assert sum(e.kind == kinds.WATCHDOG_TIMEOUT for e in parsed.events) == 5
    assert parsed.cut["events_per_key"] == 95


def test_gzip_folders_binary_files_and_ranks_across_files(tmp_path: Path) -> None:
    # GIVEN an NCCL_DEBUG_FILE per process (one gzipped) and a dump that is not text
    (tmp_path / "nccl.node-1.4242.log").write_text(
        "node-1:4242:4242 [1] NCCL INFO comm 0x5 rank 1 nranks 2 cudaDev 1 busId 3b000 - "
        "Init COMPLETE\n"
    )
    with gzip.open(tmp_path / "nccl.node-1.4242.warn.log.gz", "wt") as f:
        f.write(
            "node-1:4242:4300 [1] NCCL WARN NET/IB : Got completion from peer "
            "10.0.0.2<4432> with status=12 opcode=0\n"
        )
    (tmp_path / "dmesg.txt").write_text(
        "Mar 01 12:00:00 node-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has "
        "fallen off the bus.\n"
    )
    (tmp_path / "rank_1.pkl").write_bytes(b"\x80\x04\x95\x00\x00")
    reading = read_logs([tmp_path])
    # THEN the WARN line and the Xid line get rank 1 from the init line of the other file
    found = {(e.kind, e.rank) for e in reading.events}
    assert {(kinds.NETWORK, 1), (kinds.GPU_FAULT, 1)} <= found
    assert not any(f.endswith(".pkl") for f in reading.files)


def test_a_big_log_streams_in_bounded_memory(tmp_path: Path) -> None:
    # GIVEN a 60 MB log of training lines with a watchdog line at its end
    log = tmp_path / "big.out"
    rng = random.Random(3)
    with log.open("w") as f:
        for i in range(600_000):
            f.write(f"step {i} loss {rng.random():.5f} lr 3e-4 tokens/s 12345.6 grad_norm 1.0\n")
        f.write(WATCHDOG.format(r=7))
    # WHEN a fresh interpreter reads it
    code = (
        "import resource, sys; from pathlib import Path; from doctor.logs import read_logs;"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
        f"r = read_logs([Path({str(log)!r})]);"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
        "print(len(r.events), after - before)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    events, grown_kib = map(int, out.stdout.split())
    # THEN it finds the line, with one event for the run of 600,000 step reports before it
    # (progress at its latest line), and its peak memory grows by far less than the file
    assert events == 2
    assert grown_kib < 20_000, f"grew {grown_kib} KiB reading a 60 MB log"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0
