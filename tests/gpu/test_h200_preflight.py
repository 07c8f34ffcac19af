"""Preflight on what a real NVIDIA H200 host showed (tests/fixtures/gpu/h200): its GPU
read back through the recorded NVML answers, its image's environment and packages."""

from __future__ import annotations

from importlib import metadata
from types import SimpleNamespace

import pytest
from nvml_replay import CARDS, H200, replayed
from preflight_helpers import facts, triples

from doctor.checks import env, gpu, host
from doctor.model import Severity


@pytest.mark.parametrize("card", CARDS)
def test_an_idle_hopper_passes_every_gpu_rule_and_has_no_nvlink(card: str) -> None:
    fleet, _, _ = replayed("idle", card)
    findings = gpu.evaluate(fleet)
    assert {f.check for f in findings if f.severity is not Severity.PASS} == {
        "nvlink.down",
        "nvlink.errors",
    }
    assert {f.severity for f in findings if f.check.startswith("nvlink.")} == {Severity.SKIP}


def test_the_busy_h200_names_the_process_that_holds_it() -> None:
    fleet, _, _ = replayed("busy")
    [held] = [f for f in gpu.evaluate(fleet) if f.check == "gpu.processes"]
    assert held.severity is Severity.WARN
    assert "pid 620 (1.2 GiB)" in held.message


def test_the_nvidia_images_nccl_version_is_not_an_unknown_setting() -> None:
    """NVIDIA's CUDA images set NCCL_VERSION (the NCCL they installed); nothing reads it.
    Before: preflight warned 'NCCL_VERSION is not read by NCCL' and said to unset it."""
    image_env = dict(
        line.split("=", 1)
        for line in (H200 / "env.txt").read_text().splitlines()
        if line.startswith(("NCCL_", "TORCH_", "CUDA_"))
    )
    assert image_env["NCCL_VERSION"] == "2.28.3-1"
    assert triples(env.run(facts(image_env))) == set()


def test_cuda_13_runtime_is_found_without_a_suffix(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 2.11.0+cu130's wheels need ``nvidia-cuda-runtime`` (CUDA 13 dropped the -cu13
    suffix; the image lists it so). Before: the H200's preflight said 'cuda unknown'."""
    installed = {"torch": "2.11.0", "nvidia-nccl-cu13": "2.28.9", "nvidia-cuda-runtime": "13.0.96"}

    def version(name: str) -> str:
        if name not in installed:
            raise metadata.PackageNotFoundError(name)
        return installed[name]

    torch = SimpleNamespace(requires=["nvidia-cuda-runtime==13.0.96", "nvidia-nccl-cu13==2.28.9"])
    monkeypatch.setattr(host.metadata, "version", version)
    monkeypatch.setattr(host.metadata, "distribution", lambda name: torch)
    found = host.versions()
    assert (found["torch"], found["nccl"], found["cuda"]) == ("2.11.0", "2.28.9", "13.0.96")
