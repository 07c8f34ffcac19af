"""Live triage of the hung H200 rank, as its bundle recorded it (tests/fixtures/gpu/h200).

``nccl-doctor triage --job gpuhang --once --json --bundle`` ran 0-2 s after rank 0 queued
an all_reduce behind a kernel that spun for 100 s, and while it sat in
``torch.cuda.synchronize`` (the watchdog fired 60 s later).
"""

from __future__ import annotations

import json

import pytest
from clitools import run_cli
from nvml_replay import H200


def bundle_verdict() -> dict:
    done = run_cli("analyze", str(H200 / "triage-bundle.tar.gz"), "--json")
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_the_live_collection_on_the_gpu_host() -> None:
    """What triage collected there: the rank by its torchrun id, its py-spy stack, its GPU
    (busy, found by pid through NVML), its NCCL log, and NCCL RAS's report."""
    doc = bundle_verdict()
    [rank] = doc["ranks"]
    assert (rank["rank"], rank["pid"], rank["alive"]) == (0, 620, True)
    assert rank["top_frame"] == "synchronize (torch/cuda/__init__.py:1162)"
    live = json.loads((H200 / "triage.json").read_text())
    assert live["collected"] == {"ranks_expected": 1, "ranks_found": 1, "seconds": 1.024}
    assert live["verdict"] == doc["verdict"], "the bundle re-judges to what triage said live"


@pytest.mark.xfail(
    strict=True,
    reason="known gap: NCCL RAS 'every communicator running with no errors' is taken as "
    "progress, and a rank in torch.cuda.synchronize is user_code, not waiting on its GPU",
)
def test_a_rank_waiting_on_its_hung_gpu_is_not_healthy() -> None:
    assert bundle_verdict()["verdict"]["hang_class"] != "healthy"
