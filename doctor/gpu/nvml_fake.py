"""A fake ``pynvml`` that answers from a GPU fleet described in JSON.

It implements only the calls :mod:`doctor.gpu.nvml` makes, with pynvml's
signatures, units (milliwatts, bytes, bit masks) and errors, so the reader is
exercised exactly as on a real host. Constants and error classes are pynvml's
own. A fleet file is::

    {"driver": "550.90.07", "kernel_log": ["... NVRM: Xid (PCI:0000:9a:00): 79, ..."],
     "defaults": {<gpu fields>}, "gpus": [{<fields that differ>}, ...]}

with gpu fields such as ``name``, ``bus_id``, ``utilization_pct``, ``pcie``
(``gen``, ``gen_max``, ``width``, ``width_max``), ``throttle_reasons`` (names
from ``doctor.gpu.nvml_codes.THROTTLE_REASONS``), ``ecc``, ``retired_pages``,
``remapped_rows``, ``nvlink`` (``count``, ``version``, ``remote``),
``nvlink_down``, ``nvlink_errors``, ``processes``, ``recovery_action``,
``xid_events_live``, ``lost`` and ``unsupported`` (queries that raise
NotSupported). A bundled fleet is named by its file stem
(``NCCL_DOCTOR_FAKE_NVML=xid79``); see ``doctor/data/fleets/``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

from doctor.gpu.nvml_codes import NVLINK_REMOTE, RECOVERY_ACTIONS, THROTTLE_REASONS


class FleetFileError(Exception):
    """The fleet named by ``NCCL_DOCTOR_FAKE_NVML`` cannot be read."""


def bundled_fleets() -> list[str]:
    """Names of the fleets shipped with the package."""
    folder = resources.files("doctor") / "data" / "fleets"
    return sorted(
        p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json")
    )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merged[key] = {**base[key], **value}
        else:
            merged[key] = value
    return merged


def _key(table: dict[int, str], name: str) -> int:
    return next(k for k, v in table.items() if v == name)


class FakeNvml:
    """pynvml's API over plain dicts; handles are GPU indices."""

    def __init__(self, fleet: dict[str, Any]) -> None:
        defaults = fleet.get("defaults", {})
        self.gpus = [_merge(defaults, gpu) for gpu in fleet.get("gpus", [])]
        self.driver = str(fleet.get("driver", ""))
        self.kernel_log: list[str] = list(fleet.get("kernel_log", []))
        self.init_error = fleet.get("init_error")
        self._events: list[tuple[int, int]] = []

    @classmethod
    def load(cls, name_or_path: str) -> FakeNvml:
        if name_or_path in bundled_fleets():
            text = (
                resources.files("doctor") / "data" / "fleets" / f"{name_or_path}.json"
            ).read_text()
        else:
            try:
                text = Path(name_or_path).read_text()
            except OSError as exc:
                raise FleetFileError(
                    f"fake NVML fleet {name_or_path!r} unreadable: {exc.strerror}"
                ) from exc
        try:
            return cls(json.loads(text))
        except (json.JSONDecodeError, AttributeError, TypeError) as exc:
            raise FleetFileError(f"fake NVML fleet {name_or_path!r} is malformed: {exc}") from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(pynvml, name)  # constants and NVMLError classes

    def _gpu(self, h: int, feature: str = "") -> dict[str, Any]:
        gpu = self.gpus[h]
        if gpu.get("lost"):
            raise pynvml.NVMLError_GpuIsLost()
        if feature and (feature in gpu.get("unsupported", []) or feature not in gpu):
            raise pynvml.NVMLError_NotSupported()
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error:
            raise pynvml.NVMLError_DriverNotLoaded()

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index >= len(self.gpus):
            raise pynvml.NVMLError_InvalidArgument()
        return index

    def nvmlDeviceGetIndex(self, h: int) -> int:
        return h

    def nvmlDeviceGetName(self, h: int) -> str:
        return str(self._gpu(h, "name")["name"])

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return str(self._gpu(h).get("uuid", f"GPU-fake-{h:04d}"))

    def nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._gpu(h, "bus_id")["bus_id"])

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._gpu(h, "utilization_pct")["utilization_pct"], memory=0)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        gpu = self._gpu(h, "memory_total_bytes")
        used = gpu.get("memory_used_bytes", 0)
        return SimpleNamespace(
            used=used, total=gpu["memory_total_bytes"], free=gpu["memory_total_bytes"] - used
        )

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(self._gpu(h, "power_w")["power_w"] * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return int(self._gpu(h, "power_limit_w")["power_limit_w"] * 1000)

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return int(self._gpu(h, "sm_clock_mhz")["sm_clock_mhz"])

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        return int(self._gpu(h, "sm_clock_max_mhz")["sm_clock_max_mhz"])

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return int(self._gpu(h, "temperature_c")["temperature_c"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        names = self._gpu(h).get("throttle_reasons", [])
        return sum(_key(THROTTLE_REASONS, name) for name in names)

    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]:
        enabled = int(self._gpu(h, "ecc")["ecc"].get("enabled", True))
        return (enabled, enabled)

    def nvmlDeviceGetTotalEccErrors(self, h: int, kind: int, counter: int) -> int:
        ecc = self._gpu(h, "ecc")["ecc"]
        which = "uncorrected" if kind == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else "corrected"
        scope = "volatile" if counter == pynvml.NVML_VOLATILE_ECC else "aggregate"
        return int(ecc.get(f"{scope}_{which}", 0))

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:
        pages = self._gpu(h, "retired_pages")["retired_pages"]
        dbe = cause == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
        return [0x1000 * i for i in range(int(pages.get("dbe" if dbe else "sbe", 0)))]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        return int(self._gpu(h, "retired_pages")["retired_pages"].get("pending", False))

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        rows = self._gpu(h, "remapped_rows")["remapped_rows"]
        return (
            int(rows.get("correctable", 0)),
            int(rows.get("uncorrectable", 0)),
            int(rows.get("pending", False)),
            int(rows.get("failure", False)),
        )

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return int(self._gpu(h, "persistence_mode")["persistence_mode"])

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        enabled = int(self._gpu(h, "mig_enabled")["mig_enabled"])
        return (enabled, enabled)

    def _pcie(self, h: int, field: str) -> int:
        return int(self._gpu(h, "pcie")["pcie"][field])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self._pcie(h, "gen")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self._pcie(h, "gen_max")

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self._pcie(h, "width")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self._pcie(h, "width_max")

    def nvmlDeviceGetNumaNodeId(self, h: int) -> int:
        return int(self._gpu(h, "numa_node")["numa_node"])

    def _link(self, h: int, link: int) -> dict[str, Any]:
        nvlink = self._gpu(h).get("nvlink", {})
        if link >= int(nvlink.get("count", 0)):
            raise pynvml.NVMLError_InvalidArgument()
        return nvlink

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        self._link(h, link)
        return int(link not in self._gpu(h).get("nvlink_down", []))

    def nvmlDeviceGetNvLinkVersion(self, h: int, link: int) -> int:
        return int(self._link(h, link).get("version", 4))

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:
        return _key(NVLINK_REMOTE, self._link(h, link).get("remote", "switch"))

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:
        self._link(h, link)
        errors = self._gpu(h).get("nvlink_errors", {}).get(str(link), {})
        name = {
            pynvml.NVML_NVLINK_ERROR_DL_REPLAY: "replay",
            pynvml.NVML_NVLINK_ERROR_DL_RECOVERY: "recovery",
            pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT: "crc",
        }.get(counter, "")
        return int(errors.get(name, 0))

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return [
            SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("used_bytes"))
            for p in self._gpu(h).get("processes", [])
        ]

    def nvmlDeviceGetFieldValues(self, h: int, fields: list[int]) -> list[SimpleNamespace]:
        action = self._gpu(h, "recovery_action")["recovery_action"]
        return [
            SimpleNamespace(
                nvmlReturn=0, value=SimpleNamespace(uiVal=_key(RECOVERY_ACTIONS, action))
            )
        ]

    def nvmlEventSetCreate(self) -> str:
        self._events = []
        return "events"

    def nvmlDeviceRegisterEvents(self, h: int, kinds: int, events: str) -> None:
        self._events += [(h, xid) for xid in self._gpu(h).get("xid_events_live", [])]

    def nvmlEventSetWait_v2(self, events: str, timeout_ms: int) -> SimpleNamespace:
        if not self._events:
            raise pynvml.NVMLError_Timeout()
        h, xid = self._events.pop(0)
        return SimpleNamespace(device=h, eventData=xid)

    def nvmlEventSetFree(self, events: str) -> None:
        self._events = []
