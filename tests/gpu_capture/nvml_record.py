"""Record every pynvml call doctor.gpu.nvml makes on a real GPU, with its raw answer.

Run on a GPU host (``python3 nvml_record.py OUT.json LABEL``). The JSON holds each
call (function, arguments, the answer as plain data or the NVML error code), the
kernel log the reader saw, and the Fleet the reader built, so tests/nvml_replay.py
can answer the same calls on a machine without a GPU.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from typing import Any

import pynvml

from doctor import codec
from doctor.gpu import nvml


class Recorder:
    """pynvml, with each ``nvml*`` call and its answer (or error code) appended to ``calls``."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self.calls: list[dict[str, Any]] = []
        self._tags: dict[int, str] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._lib, name)
        if not (name.startswith("nvml") and callable(attr)) or isinstance(attr, type):
            return attr

        def call(*args: Any) -> Any:
            entry: dict[str, Any] = {"fn": name, "args": [self.plain(a) for a in args]}
            self.calls.append(entry)
            try:
                value = attr(*args)
            except self._lib.NVMLError as exc:
                entry["error"] = exc.value
                raise
            if name == "nvmlDeviceGetHandleByIndex":
                self._tags[self._address(value)] = f"device:{args[0]}"
            elif name == "nvmlEventSetCreate":
                self._tags[self._address(value)] = "eventset"
            entry["value"] = self.plain(value)
            return value

        return call

    @staticmethod
    def _address(pointer: Any) -> int:
        return ctypes.cast(pointer, ctypes.c_void_p).value or 0

    def plain(self, v: Any) -> Any:
        """A pynvml value as JSON: structures become dicts, handles become their tags."""
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, bytes):
            return v.decode(errors="replace")
        if isinstance(v, ctypes._Pointer | ctypes.c_void_p):  # type: ignore[attr-defined]
            address = self._address(v)
            return self._tags.get(address, f"pointer:{address:#x}" if address else None)
        if isinstance(v, ctypes.Structure | ctypes.Union):
            return {f[0]: self.plain(getattr(v, f[0])) for f in v._fields_}
        if isinstance(v, list | tuple | ctypes.Array):
            return [self.plain(x) for x in v]
        if isinstance(v, ctypes._SimpleCData):  # type: ignore[attr-defined]
            return self.plain(v.value)
        if hasattr(v, "__dict__"):  # pynvml's nvmlFriendlyObject (process lists)
            return {k: self.plain(x) for k, x in vars(v).items()}
        return repr(v)


def main() -> None:
    out, label = sys.argv[1], sys.argv[2]
    rec = Recorder(pynvml)
    kernel: dict[str, str] = {}

    def kernel_log() -> str:
        try:
            kernel["text"] = nvml._dmesg()
        except OSError as exc:
            kernel["error"] = str(exc)
            raise
        return kernel["text"]

    started = time.time()
    fleet = nvml._read(rec, "nvml", kernel_log, 0)
    extras: dict[str, Any] = {}
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        for key, fn, args in (
            ("nvml_version", pynvml.nvmlSystemGetNVMLVersion, ()),
            ("cuda_driver_version", pynvml.nvmlSystemGetCudaDriverVersion, ()),
            ("mem_clock_mhz", pynvml.nvmlDeviceGetClockInfo, (h, pynvml.NVML_CLOCK_MEM)),
            ("supported_event_reasons", pynvml.nvmlDeviceGetSupportedClocksEventReasons, (h,)),
            ("throttle_reasons_legacy", pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, (h,)),
            ("architecture", pynvml.nvmlDeviceGetArchitecture, (h,)),
            ("serial", pynvml.nvmlDeviceGetSerial, (h,)),
            ("performance_state", pynvml.nvmlDeviceGetPerformanceState, (h,)),
            ("power_limit_default_mw", pynvml.nvmlDeviceGetPowerManagementDefaultLimit, (h,)),
        ):
            try:
                extras[key] = rec.plain(fn(*args))
            except Exception as exc:  # noqa: BLE001 - record whatever this driver says
                extras[key] = f"error: {exc!r}"
        pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001
        extras["error"] = repr(exc)
    direct = nvml.read_fleet({})
    document = {
        "label": label,
        "time": started,
        "pynvml": getattr(pynvml, "__version__", ""),
        "calls": rec.calls,
        "kernel_log": kernel,
        "fleet": codec.encode(fleet),
        "fleet_direct": codec.encode(direct),
        "extras": extras,
    }
    with open(out, "w") as f:
        json.dump(document, f, indent=1)
    print(f"{label}: {len(rec.calls)} calls, {len(fleet.gpus)} GPUs, {fleet.unavailable!r}")


if __name__ == "__main__":
    main()
