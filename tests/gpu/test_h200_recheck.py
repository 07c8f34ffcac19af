"""Live triage of a real hung ProcessGroupNCCL rank, re-run on the H200 with the gpu_wait
state (tests/fixtures/gpu/h200/recheck): the rank waits for its GPU, in
``torch.cuda.synchronize`` or in ``.item()`` (which only native frames show), and neither is
called healthy, whatever NCCL RAS says."""

from __future__ import annotations

import json

import pytest
from nvml_replay import H200

from doctor.analyze.load import load_evidence
from doctor.verdict.classify import analyse
from doctor.verdict.render import to_json

RECHECK = H200 / "recheck"


@pytest.mark.parametrize(
    ("mode", "where"),
    [
        ("hang", "synchronize (torch/cuda/__init__.py:1162)"),
        ("hang-item", "at::native::_local_scalar_dense_cuda (libtorch_cuda.so:0)"),
    ],
)
def test_a_rank_waiting_for_its_hung_gpu_is_seen_waiting_live_and_in_its_bundle(
    mode: str, where: str
) -> None:
    live = json.loads((RECHECK / mode / "triage.json").read_text())
    evidence = load_evidence([RECHECK / mode / "bundle.tar.gz"])
    again = to_json(evidence, analyse(evidence))
    for doc in (live, again):
        assert doc["verdict"]["hang_class"] == "unknown", doc["verdict"]
        assert doc["verdict"]["summary"].startswith(f"every rank waits for its GPU at {where}")
        [rank] = doc["ranks"]
        assert (rank["state"], rank["top_frame"]) == ("gpu_wait", where)
    assert again["verdict"] == live["verdict"], "the bundle re-judges to what triage said live"
