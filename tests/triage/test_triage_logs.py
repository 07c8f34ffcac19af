"""NCCL and PyTorch log lines (recorded text) -> log events; NCCL_DEBUG_FILE resolution."""

from __future__ import annotations

import os
from pathlib import Path

from triage_helpers import DATA

from doctor.logs import kinds
from doctor.triage.sources.logs import (
    LogSource,
    current_attempt,
    parse_log,
    read_tail,
    resolve_debug_file,
)
from doctor.triage.target import RankTarget, Target

LOGS = DATA / "logs"


def events(name: str, rank: int | None = None, pids: dict[int, int] | None = None):
    return parse_log((LOGS / name).read_text(), rank, pids or {})


def test_watchdog_timeout_lines_give_rank_seq_op_and_group() -> None:
    found = events("watchdog_nccl.log")
    timeouts = [e for e in found if e.kind == "watchdog_timeout"]
    assert {e.rank for e in timeouts} == {1, 3}
    caught = next(e for e in timeouts if "Watchdog caught" in e.text)
    assert (caught.seq, caught.op) == (12, "ALLREDUCE")
    detected = next(e for e in timeouts if "detected by watchdog" in e.text)
    assert (detected.seq, detected.process_group) == (12, "0")
    # AND the generic "some operations failed" line is no timeout: the watchdog's abort only
    generic = [e for e in found if "Some NCCL operations" in e.text]
    assert [e.kind for e in generic] == ["nccl_abort"] * len(generic) and generic


def test_bootstrap_failures_are_attributed_through_the_pid_prefix() -> None:
    found = [e for e in events("bootstrap_nccl.log", pids={48211: 5}) if e.kind == "bootstrap"]
    # (the WARN, and NCCL's error return through init.cc)
    assert {e.rank for e in found} == {5} and "Connection refused" in found[0].text
    # AND the harmless "No plugin found" INFO line is not a failure
    plugin = events("netplugin_nccl.log", rank=2)
    assert {(e.kind, e.rank) for e in plugin} == {("bootstrap", 2)}
    assert "Failed to initialize any NET plugin" in plugin[0].text


def test_network_errors_and_unsupported_ops() -> None:
    net = events("network_nccl.log", rank=13)
    assert [e.kind for e in net] == ["network"] and "status=12" in net[0].text
    unsupported = [e for e in events("unsupported_torch.log") if e.kind == "unsupported_op"]
    assert [(e.kind, e.rank, e.op) for e in unsupported] == [
        ("unsupported_op", 2, "allgather_into_tensor_coalesced")
    ]
    died = events("gloo_peer_died.log", rank=1)
    assert [(e.kind, e.rank) for e in died] == [("peer_gone", 1)]


def test_debug_file_template_and_tail(tmp_path: Path) -> None:
    assert resolve_debug_file("/logs/nccl.%h.%p.log", "node7", 4242) == Path(
        "/logs/nccl.node7.4242.log"
    )
    big = tmp_path / "big.log"
    big.write_text("x" * 5000 + "\nlast line\n")
    assert read_tail(big, 20).endswith("last line\n") and len(read_tail(big, 20)) == 20
    assert read_tail(tmp_path / "missing.log") == ""


def test_the_source_reads_each_rank_debug_file(tmp_path: Path) -> None:
    # GIVEN a rank whose NCCL_DEBUG_FILE (with %h and %p) holds a watchdog line
    pid, host = os.getpid(), "node1"
    (tmp_path / f"nccl.{host}.{pid}.log").write_text((LOGS / "watchdog_nccl.log").read_text())
    rank = RankTarget(1, pid, host, env={"NCCL_DEBUG_FILE": str(tmp_path / "nccl.%h.%p.log")})
    # WHEN the log source collects
    got = LogSource().collect(Target("j", host, (rank,), 4), deadline=1e12)
    # THEN the file is read and kept for a bundle
    assert any(e.kind == "watchdog_timeout" and e.seq == 12 for e in got.logs)
    assert got.log_files == (tmp_path / f"nccl.{host}.{pid}.log",)


def test_a_restarted_job_is_not_blamed_for_the_previous_attempts_errors() -> None:
    # GIVEN torchrun's log of a job whose rank 2 was killed: the survivors' transport errors,
    # then the agent's failure line, after which it restarted every rank (--max-restarts 1)
    text = (LOGS / "torchrun_restart.log").read_text()
    events = parse_log(text, None, {})
    # (torchrun's OMP_NUM_THREADS banner above them is a harmless warning, no rank's)
    assert {e.rank for e in events if e.kind not in (kinds.EXIT, kinds.HARMLESS)} == {1, 3}
    assert [(e.pid, e.code) for e in events if e.kind == "exit"] == [(20438, -9)]
    # WHEN the ranks running now are attempt 1 (TORCHELASTIC_RESTART_COUNT=1)
    # THEN nothing the previous attempt wrote is read as theirs
    assert parse_log(current_attempt(text, 1), None, {}) == []
    # AND a line the new attempt writes is read
    fresh = text + "[rank1]: RuntimeError: Connection reset by peer\n"
    assert {e.rank for e in parse_log(current_attempt(fresh, 1), None, {})} == {1}
    assert current_attempt(text, 0) == text
