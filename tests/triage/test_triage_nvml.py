"""GPU evidence through the fake NVML fleet (the only mock: there is no GPU here)."""

from __future__ import annotations

import json
import os


def test_an_xid_on_a_rank_gpu_is_a_gpu_hang(cli, sleepers) -> None:
    # GIVEN four ranks on GPUs 0-3 of a fleet where GPU 1 logged XID 31
    ranks = [
        sleepers({"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "4"}, f"r{r}")
        for r in range(4)
    ]
    env = {"PATH": os.environ["PATH"], "NCCL_DOCTOR_FAKE_NVML": "xid79"}
    # WHEN triage looks once
    done = cli(
        "triage",
        "--pids",
        ",".join(str(p.pid) for p in ranks),
        "--once",
        "--json",
        "--interval",
        "0.3",
        env=env,
    )
    doc = json.loads(done.stdout)
    # THEN the rank on that GPU is the culprit of a gpu_hang, with NVML as the evidence
    assert (doc["verdict"]["hang_class"], doc["verdict"]["culprit_ranks"]) == ("gpu_hang", [1])
    assert done.returncode == 1
    assert any(
        e["source"] == "nvml" and e["rank"] == 1 and "31" in e["text"] for e in doc["evidence"]
    )
    assert not any(s["probe"] == "nvml" for s in doc["skipped"])


def test_no_gpu_is_one_clean_skip(cli, sleepers) -> None:
    rank = sleepers({"RANK": "0", "WORLD_SIZE": "1"}, "r0")
    env = {"PATH": os.environ["PATH"], "NCCL_DOCTOR_FAKE_NVML": ""}
    done = cli("triage", "--pids", str(rank.pid), "--once", "--json", "--interval", "0.2", env=env)
    skips = [s for s in json.loads(done.stdout)["skipped"] if s["probe"] == "nvml"]
    assert len(skips) == 1 and skips[0]["rank"] is None and skips[0]["reason"]
