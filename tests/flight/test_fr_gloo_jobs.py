"""Real 4-rank CPU jobs over gloo with an injected fault: their own FR dumps, analysed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import REPO, clean_env, run_cli

from doctor.trust.subproc import free_port, stop_all

WORLD = 4
pytestmark = pytest.mark.slow


def run_job(out: Path, *args: str, timeout: float = 120) -> Path:
    """Start one process per rank (demo job, FR on) and wait; every rank dumps its FR."""
    port = str(free_port())
    dumps = out / "fr"
    procs = []
    try:
        for rank in range(WORLD):
            env = clean_env(
                {
                    "RANK": str(rank),
                    "WORLD_SIZE": str(WORLD),
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": port,
                }
            )
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "doctor.demo.job", "--fr-dump-dir", str(dumps), *args],
                    env=env,
                    cwd=REPO,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        for p in procs:
            p.wait(timeout=timeout)
    finally:
        stop_all(procs)
    return dumps


def analyze(dumps: Path) -> tuple[int, dict]:
    res = run_cli("analyze", str(dumps), "--json")
    return res.returncode, json.loads(res.stdout)


HANGS = [
    # fault, rank, expected op of the culprit's divergent collective
    ("wrong-collective", 2, "all_gather"),
    ("except-clause", 1, "barrier"),
    ("skip-metric", 3, "all_reduce"),
    ("subgroup-mismatch", 2, "all_gather"),
]


@pytest.mark.parametrize(("fault", "rank", "op"), HANGS, ids=[h[0] for h in HANGS])
def test_mismatch_faults_name_the_culprit(tmp_path: Path, fault: str, rank: int, op: str) -> None:
    # GIVEN a 4-rank gloo job where one rank misbehaves at step 2
    dumps = run_job(
        tmp_path,
        "--fault",
        fault,
        "--rank",
        str(rank),
        "--step",
        "2",
        "--steps",
        "5",
        "--timeout",
        "3",
        "--step-time",
        "0.01",
    )
    # WHEN analyze reads the dumps the ranks wrote on their collective error
    code, doc = analyze(dumps)
    # THEN it names that rank, as a collective mismatch, and exits 1
    verdict = doc["verdict"]
    assert code == 1, doc
    assert verdict["hang_class"] == "collective_mismatch", verdict
    assert verdict["culprit_ranks"] == [rank], verdict
    assert verdict["confidence"] in ("high", "medium")
    culprit = next(r for r in doc["ranks"] if r["rank"] == rank)
    assert culprit["state"] == "in_collective" and op in culprit["last_op"]


def test_straggler_is_found_and_is_not_a_hang(tmp_path: Path) -> None:
    dumps = run_job(
        tmp_path,
        "--fault",
        "straggler",
        "--rank",
        "1",
        "--step",
        "1",
        "--steps",
        "12",
        "--straggle",
        "0.1",
        "--step-time",
        "0.01",
    )
    code, doc = analyze(dumps)
    assert doc["verdict"]["hang_class"] == "straggler", doc["verdict"]
    assert doc["verdict"]["culprit_ranks"] == [1]
    assert code == 0


def test_healthy_job_is_healthy(tmp_path: Path) -> None:
    dumps = run_job(tmp_path, "--steps", "8", "--step-time", "0.01")
    code, doc = analyze(dumps)
    assert (code, doc["verdict"]["hang_class"]) == (0, "healthy")
    assert doc["verdict"]["confidence"] == "low"  # gloo does not record completion
