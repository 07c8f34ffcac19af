"""Live triage of the hung H200 rank, as its bundle recorded it (tests/fixtures/gpu/h200).

``nccl-doctor triage --job gpuhang --once --json --bundle`` ran 0-2 s after rank 0 queued
an all_reduce behind a kernel that spun for 100 s, and while it sat in
``torch.cuda.synchronize`` (the watchdog fired 60 s later).
"""

from __future__ import annotations

import json
from dataclasses import replace

from clitools import run_cli
from nvml_replay import H200

from doctor.analyze.load import load_evidence
from doctor.model import HangClass
from doctor.verdict.classify import classify
from doctor.verdict.stacks import RankState, rank_state, signature


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


def test_a_rank_waiting_on_its_hung_gpu_is_not_healthy() -> None:
    """Triage there said ``healthy``: NCCL RAS saw the communicator running, and the rank in
    ``torch.cuda.synchronize`` read as its own code. Today's code records that rank as
    waiting for its GPU in every sample (the bundle's samples were taken at the stack's own
    call path, so their state is re-read from it), and a stall seen live outranks a log's
    health."""
    evidence = load_evidence([H200 / "triage-bundle.tar.gz"])
    [stack] = evidence.stacks
    assert rank_state(stack) is RankState.GPU_WAIT
    samples = tuple(
        replace(s, state=rank_state(stack).value)
        for s in evidence.progress
        if s.stack_signature == signature(stack)
    )
    assert len(samples) == len(evidence.progress) > 1
    verdict = classify(replace(evidence, progress=samples))
    # with NVML's reading of the GPU (100 % busy), the job's only rank is named
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.GPU_HANG, (0,)), verdict
    assert "waits for its GPU at synchronize" in verdict.summary
