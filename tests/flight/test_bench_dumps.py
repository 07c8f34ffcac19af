"""The benchmark's synthetic dumps are dumps both analyzers accept.

`benchmarks/bench_analyze.py` times `analyze` against torch's `fr_trace` on
them. If they held anything `fr_trace` rejects (an all-gather whose output is
not its input times the group size, say), `fr_trace` would stop at "Too many
mismatches" and the benchmark would time an aborted run. Both must name the
rank that stopped early, and `fr_trace` must find nothing else wrong.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import REPO, clean_env, run_cli

RANKS, ENTRIES, CULPRIT = 32, 96, 19


def test_both_analyzers_name_the_rank_that_stopped_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    importlib.import_module("bench_analyze").make_dumps(tmp_path, RANKS, ENTRIES, CULPRIT)

    ours = run_cli("analyze", str(tmp_path), "--json")
    assert ours.returncode == 1, ours.stderr
    assert json.loads(ours.stdout)["verdict"]["culprit_ranks"] == [CULPRIT]

    theirs = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.flight_recorder.fr_trace",
            str(tmp_path),
            "--prefix",
            "rank_",
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=300,
    )
    said = theirs.stdout + theirs.stderr
    assert theirs.returncode == 0, said[-2000:]
    assert f"missing ranks: {{{CULPRIT}}}" in said, said[-2000:]
    assert "MISMATCH" not in said and "aborting" not in said, said[-2000:]
