"""A pynvml that answers from a recording made on a real GPU (tests/gpu_capture/nvml_record.py).

Each ``nvml*`` call is looked up by its name and arguments in the recording; the
recorded answer comes back with pynvml's shapes (structures as attribute objects,
handles as their recorded tags) and a recorded error is raised as pynvml's own
error class for that code. A call the recording lacks raises NotSupported and is
listed in ``unrecorded``, so a test can tell a reader change from a real answer.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

from doctor.gpu import nvml

GPU_FIXTURES = Path(__file__).parent / "fixtures" / "gpu"
H200 = GPU_FIXTURES / "h200"
"""What one NVIDIA H200 host recorded (README.txt there says how)."""
CARDS = ("h200", "h100")
"""Each card recorded by the same scripts (tests/gpu_capture), in its folder of GPU_FIXTURES."""


def _shaped(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _shaped(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_shaped(v) for v in value]
    return value


class ReplayNvml:
    """pynvml's API over one recording; constants and error classes are pynvml's."""

    def __init__(self, recording: dict[str, Any]) -> None:
        self.answers: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for call in recording["calls"]:
            self.answers[call["fn"], json.dumps(call["args"])].append(call)
        self.kernel_log: str = recording["kernel_log"].get("text", "")
        self.unrecorded: list[str] = []

    @classmethod
    def load(cls, path: Path) -> ReplayNvml:
        return cls(json.loads(path.read_text()))

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("nvml") or isinstance(getattr(pynvml, name, None), int | type):
            return getattr(pynvml, name)

        def call(*args: Any) -> Any:
            key = (name, json.dumps(list(args)))
            recorded = self.answers.get(key)
            if not recorded:
                self.unrecorded.append(f"{name}{tuple(args)}")
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
            answer = recorded.pop(0) if len(recorded) > 1 else recorded[0]
            if "error" in answer:
                raise pynvml.NVMLError(answer["error"])
            return _shaped(answer["value"])

        return call


def replayed(label: str, card: str = "h200") -> tuple[nvml.Fleet, dict[str, Any], ReplayNvml]:
    """The reader run over ``CARD/nvml-LABEL.json``: its fleet, the recording, the replay."""
    recording = json.loads((GPU_FIXTURES / card / f"nvml-{label}.json").read_text())
    lib = ReplayNvml(recording)
    return nvml._read(lib, "nvml", lambda: lib.kernel_log, 0), recording, lib
