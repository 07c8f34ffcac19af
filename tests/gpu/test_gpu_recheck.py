"""Live triage of a real hung ProcessGroupNCCL rank, recorded on an H200 and an H100
(tests/fixtures/gpu/*/recheck): the rank waits for its GPU, in ``torch.cuda.synchronize`` or
in ``.item()`` (which only native frames show), while NVML sees that GPU 100 % busy.

Live, the code of the time said ``unknown`` and listed "NVML GPU state" as missing though it
had read it; the bundle, judged again now, names the job's only rank (``lone_busy_gpu``)."""

from __future__ import annotations

import json

import pytest
from nvml_replay import CARDS, GPU_FIXTURES

from doctor.analyze.load import load_evidence
from doctor.verdict.classify import analyse
from doctor.verdict.render import to_json


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize(
    ("mode", "where"),
    [
        ("hang", "synchronize (torch/cuda/__init__.py:1162)"),
        ("hang-item", "at::native::_local_scalar_dense_cuda (libtorch_cuda.so:0)"),
    ],
)
def test_a_lone_rank_waiting_for_its_busy_gpu_is_a_gpu_hang_of_that_rank(
    mode: str, where: str, card: str
) -> None:
    recorded = GPU_FIXTURES / card / "recheck" / mode
    live = json.loads((recorded / "triage.json").read_text())
    evidence = load_evidence([recorded / "bundle.tar.gz"])
    again = to_json(evidence, analyse(evidence))
    # GIVEN what triage collected live: the rank waits for its GPU, NVML read that GPU busy
    for doc in (live, again):
        [rank] = doc["ranks"]
        assert (rank["state"], rank["top_frame"]) == ("gpu_wait", where)
    [gpu] = evidence.gpus
    assert (gpu.rank, gpu.utilization_pct) == (0, 100.0)
    assert live["verdict"]["hang_class"] == "unknown", "what the code of the recording said"
    # THEN judged now: that rank's GPU, with the NVML reading as evidence, nothing missing
    verdict = again["verdict"]
    assert (verdict["hang_class"], verdict["culprit_ranks"]) == ("gpu_hang", [0]), verdict
    lone = f"rank 0, the job's only rank, waits for its GPU at {where}"
    assert verdict["summary"].startswith(lone)
    assert "NVML GPU state" not in verdict["missing_evidence"]
    assert any(e["source"] == "nvml" and "100% busy" in e["text"] for e in again["evidence"])


@pytest.mark.parametrize("mode", ["hang", "hang-item"])
def test_live_triage_on_the_h100_names_the_rank_and_its_bundle_agrees(mode: str) -> None:
    """Triage run live on the H100 by the code with ``lone_busy_gpu`` (tests/fixtures/gpu/h100/
    live): what it said is what its bundle judges to."""
    recorded = GPU_FIXTURES / "h100" / "live" / mode
    live = json.loads((recorded / "triage.json").read_text())
    evidence = load_evidence([recorded / "bundle.tar.gz"])
    assert (live["verdict"]["hang_class"], live["verdict"]["culprit_ranks"]) == ("gpu_hang", [0])
    assert to_json(evidence, analyse(evidence))["verdict"] == live["verdict"]
