"""Real 4-rank CPU jobs over gloo with an injected fault (one process per rank, forked from
one interpreter): their own FR dumps, analysed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from clitools import REPO, clean_env, run_cli

from doctor.trust.subproc import free_port, stop_all

WORLD = 4
pytestmark = pytest.mark.slow


def job_ranks(out: Path, args: Sequence[str]) -> list[dict]:
    """One job's ranks (demo job, FR on, its own port): each dumps its FR into ``out/fr`` on
    its collective error or at the end of its run."""
    port = str(free_port())
    return [
        {
            "env": clean_env(
                {
                    "RANK": str(rank),
                    "WORLD_SIZE": str(WORLD),
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": port,
                }
            ),
            "args": ["--fr-dump-dir", str(out / "fr"), *args],
        }
        for rank in range(WORLD)
    ]


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
FAST = ("--step-time", "0.01")
JOBS: dict[str, tuple[str, ...]] = {
    # a rank misbehaves at step 2; its peers' collectives time out after 3 s
    **{
        f: ("--fault", f, "--rank", str(r), "--step", "2", "--steps", "5", "--timeout", "3", *FAST)
        for f, r, _ in HANGS
    },
    "straggler": (
        *("--fault", "straggler", "--rank", "1", "--step", "1", "--steps", "12"),
        *("--straggle", "0.1", *FAST),
    ),
    "none": ("--steps", "8", *FAST),
}
JOB_LIMIT_S = 120
"""For all the jobs together: they run at once (6 s), their ranks forked from one interpreter
that imported torch once (``forked_ranks.py``)."""


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every job's FR dump folder, keyed by fault: the jobs are independent, so they all
    start at once and each case judges its own job's dumps."""
    folders = {name: tmp_path_factory.mktemp(name) for name in JOBS}
    ranks = [rank for name, args in JOBS.items() for rank in job_ranks(folders[name], args)]
    spec = tmp_path_factory.mktemp("ranks") / "ranks.json"
    spec.write_text(json.dumps(ranks))
    parent = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("forked_ranks.py")), str(spec)],
        env=clean_env(),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # stop_all stops the ranks with it
    )
    try:
        parent.wait(timeout=JOB_LIMIT_S)
    finally:
        stop_all([parent])
    return {name: folder / "fr" for name, folder in folders.items()}


@pytest.mark.parametrize(("fault", "rank", "op"), HANGS, ids=[h[0] for h in HANGS])
def test_mismatch_faults_name_the_culprit(
    dumps: dict[str, Path], fault: str, rank: int, op: str
) -> None:
    # GIVEN a 4-rank gloo job where one rank misbehaves at step 2
    # WHEN analyze reads the dumps the ranks wrote on their collective error
    code, doc = analyze(dumps[fault])
    # THEN it names that rank, as a collective mismatch, and exits 1
    verdict = doc["verdict"]
    assert code == 1, doc
    assert verdict["hang_class"] == "collective_mismatch", verdict
    assert verdict["culprit_ranks"] == [rank], verdict
    assert verdict["confidence"] in ("high", "medium")
    culprit = next(r for r in doc["ranks"] if r["rank"] == rank)
    assert culprit["state"] == "in_collective" and op in culprit["last_op"]


def test_straggler_is_found_and_is_not_a_hang(dumps: dict[str, Path]) -> None:
    # GIVEN a job whose rank 1 sleeps 0.1 s in each step from step 1 WHEN analyzed
    code, doc = analyze(dumps["straggler"])
    # THEN rank 1 is the straggler, and a straggler is not a hang
    assert doc["verdict"]["hang_class"] == "straggler", doc["verdict"]
    assert doc["verdict"]["culprit_ranks"] == [1]
    assert code == 0


def test_healthy_job_is_healthy(dumps: dict[str, Path]) -> None:
    code, doc = analyze(dumps["none"])
    assert (code, doc["verdict"]["hang_class"]) == (0, "healthy")
    assert doc["verdict"]["confidence"] == "low"  # gloo does not record completion
