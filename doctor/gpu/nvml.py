"""GPU state through NVML, as plain frozen data.

One entry point, :func:`read_fleet`, returns a :class:`Fleet` and never raises:
a host without a GPU (or without the driver) gives a fleet with no GPUs and
``unavailable`` saying why, so checks can report ``skip``. A query a GPU does
not support leaves its field ``None``; a GPU that fell off the bus is
``lost``.

The reader talks to a ``pynvml``-shaped object. The real one is the
``pynvml`` module (nvidia-ml-py); the fake one (:mod:`doctor.gpu.nvml_fake`)
answers the same calls from a fleet described in JSON, selected by the
environment variable ``NCCL_DOCTOR_FAKE_NVML=/path/fleet.json`` (or the name
of a bundled fleet), so the real CLI can be tested on GPU faults.

XID events come from two places: NVML's event set (only events that happen
while we wait) and the kernel log (``NVRM: Xid (PCI:...): 79, ...``), which
keeps the ones that happened before we looked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from doctor.evidence import GpuSample
from doctor.gpu.nvml_codes import NVLINK_REMOTE, RECOVERY_ACTIONS, THROTTLE_REASONS
from doctor.logs.kernel import XID

FAKE_ENV = "NCCL_DOCTOR_FAKE_NVML"


@dataclass(frozen=True)
class NvLink:
    """One NVLink of one GPU."""

    link: int
    active: bool
    version: int | None = None
    remote: str = "unknown"
    """``gpu``, ``switch`` or ``unknown``: what is at the other end."""
    replay_errors: int = 0
    recovery_errors: int = 0
    crc_errors: int = 0
    """Flit plus data CRC errors."""


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class GpuState:
    """What NVML says about one GPU at one moment."""

    index: int
    name: str = ""
    uuid: str = ""
    bus_id: str = ""
    lost: bool = False
    """The GPU answered its handle but not its queries (fallen off the bus, XID 79)."""
    utilization_pct: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    temperature_c: int | None = None
    throttle_reasons: tuple[str, ...] = ()
    xid_events: tuple[int, ...] = ()
    ecc_enabled: bool | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    ecc_volatile_corrected: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    persistence_mode: bool | None = None
    mig_enabled: bool | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    numa_node: int | None = None
    nvlinks: tuple[NvLink, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    recovery_action: str | None = None
    """What the driver asks for (``none``, ``gpu_reset``, ``node_reboot``...), where reported."""

    @property
    def active_nvlinks(self) -> int:
        return sum(1 for link in self.nvlinks if link.active)


@dataclass(frozen=True)
class Fleet:
    """Every GPU of this host, or why none could be read."""

    gpus: tuple[GpuState, ...] = ()
    driver: str = ""
    source: str = "nvml"
    """``nvml``, or ``fake:<path>`` when the fake layer answered."""
    unavailable: str = ""
    """Why NVML could not be read (no driver, no GPU); empty when it could."""
    notes: tuple[str, ...] = field(default=())
    """Partial failures worth saying (kernel log unreadable)."""
    unmatched_xids: tuple[tuple[str, int], ...] = ()
    """``(pci address, xid)`` from the kernel log for no GPU NVML could read (a lost GPU)."""

    def gpu_of_pid(self, pid: int) -> GpuState | None:
        """The GPU on which ``pid`` holds a context, if NVML lists it."""
        return next((g for g in self.gpus if any(p.pid == pid for p in g.processes)), None)


def read_fleet(env: Mapping[str, str], xid_wait_ms: int = 0) -> Fleet:
    """Read every GPU; never raises. ``env`` selects the fake layer (``NCCL_DOCTOR_FAKE_NVML``)."""
    fake = env.get(FAKE_ENV, "")
    if fake:
        from doctor.gpu.nvml_fake import FakeNvml, FleetFileError

        try:
            lib: Any = FakeNvml.load(fake)
        except FleetFileError as exc:
            return Fleet(source=f"fake:{fake}", unavailable=str(exc))
        return _read(lib, f"fake:{fake}", lambda: "\n".join(lib.kernel_log), xid_wait_ms)
    try:
        import pynvml
    except ImportError:
        return Fleet(unavailable="nvidia-ml-py (pynvml) is not installed")
    return _read(pynvml, "nvml", _dmesg, xid_wait_ms)


def to_gpu_sample(gpu: GpuState, rank: int | None) -> GpuSample:
    """The triage evidence form of one GPU's state."""
    return GpuSample(
        rank=rank,
        index=gpu.index,
        uuid=gpu.uuid,
        utilization_pct=gpu.utilization_pct,
        power_w=gpu.power_w,
        memory_used_bytes=gpu.memory_used_bytes,
        sm_clock_mhz=gpu.sm_clock_mhz,
        throttle_reasons=gpu.throttle_reasons,
        xid_events=gpu.xid_events,
        ecc_uncorrected=gpu.ecc_volatile_uncorrected,
    )


_BUS = re.compile(r"([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})")


def bus_key(bus_id: str) -> tuple[int, int, int] | None:
    """``00000000:18:00.0`` and ``0000:18:00`` -> ``(0, 0x18, 0)``: the same GPU."""
    match = _BUS.search(bus_id)
    return tuple(int(part, 16) for part in match.groups()) if match else None  # type: ignore[return-value]


def parse_kernel_xids(text: str) -> dict[tuple[int, int, int], list[int]]:
    """XID codes per PCI bus address from kernel log text (``dmesg``)."""
    found: dict[tuple[int, int, int], list[int]] = {}
    for match in XID.finditer(text):
        key = bus_key(match.group(1) or "")
        if key is not None:
            found.setdefault(key, []).append(int(match.group(2)))
    return found


def _dmesg() -> str:
    from doctor.trust.subproc import run

    done = run(["dmesg"], timeout=2.0)
    if not done.ok:
        raise OSError(done.error or done.stderr.strip() or "dmesg failed")
    return done.stdout


def _read(lib: Any, source: str, kernel_log: Any, xid_wait_ms: int) -> Fleet:
    try:
        lib.nvmlInit()
    except lib.NVMLError as exc:
        return Fleet(source=source, unavailable=f"NVML cannot start: {exc}")
    try:
        driver = _ask(lib, lib.nvmlSystemGetDriverVersion) or ""
        count = lib.nvmlDeviceGetCount()
        handles = [_handle(lib, i) for i in range(count)]
        live = _poll_xids(lib, [h for h in handles if h is not None], xid_wait_ms)
        notes: list[str] = []
        try:
            logged = parse_kernel_xids(kernel_log())
        except OSError as exc:
            logged = {}
            notes.append(f"kernel log unreadable, XIDs from before this run are unknown: {exc}")
        gpus = []
        for index, handle in enumerate(handles):
            state = _read_gpu(lib, index, handle)
            xids = live.get(index, []) + logged.pop(bus_key(state.bus_id) or (-1, -1, -1), [])
            gpus.append(replace(state, xid_events=tuple(xids)))
        unmatched = tuple(
            (f"{d:04x}:{b:02x}:{f:02x}", xid)
            for (d, b, f), codes in logged.items()
            for xid in codes
        )
    except lib.NVMLError as exc:
        return Fleet(source=source, unavailable=f"NVML failed: {exc}")
    finally:
        _ask(lib, lib.nvmlShutdown)
    if not gpus:
        return Fleet(driver=driver, source=source, unavailable="NVML reports no GPU")
    return Fleet(tuple(gpus), driver, source, notes=tuple(notes), unmatched_xids=unmatched)


def _ask(lib: Any, fn: Any, *args: Any) -> Any:
    """One NVML query; ``None`` when this GPU or driver does not support it."""
    try:
        value = fn(*args)
    except lib.NVMLError_GpuIsLost:
        raise
    except lib.NVMLError:
        return None
    return value.decode() if isinstance(value, bytes) else value


def _handle(lib: Any, index: int) -> Any:
    try:
        return lib.nvmlDeviceGetHandleByIndex(index)
    except lib.NVMLError_GpuIsLost:
        return None


def _read_gpu(lib: Any, index: int, h: Any) -> GpuState:
    if h is None:
        return GpuState(index=index, lost=True)
    try:
        return _query_gpu(lib, index, h)
    except lib.NVMLError_GpuIsLost:
        return GpuState(index=index, lost=True)


def _query_gpu(lib: Any, index: int, h: Any) -> GpuState:
    util = _ask(lib, lib.nvmlDeviceGetUtilizationRates, h)
    mem = _ask(lib, lib.nvmlDeviceGetMemoryInfo, h)
    power = _ask(lib, lib.nvmlDeviceGetPowerUsage, h)
    limit = _ask(lib, lib.nvmlDeviceGetEnforcedPowerLimit, h)
    reasons = (
        _ask(
            lib,
            getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or lib.nvmlDeviceGetCurrentClocksThrottleReasons,
            h,
        )
        or 0
    )
    ecc_mode = _ask(lib, lib.nvmlDeviceGetEccMode, h)
    pending = _ask(lib, lib.nvmlDeviceGetRetiredPagesPendingStatus, h)
    remap = _ask(lib, lib.nvmlDeviceGetRemappedRows, h)
    mig = _ask(lib, lib.nvmlDeviceGetMigMode, h)
    persistence = _ask(lib, lib.nvmlDeviceGetPersistenceMode, h)
    sbe = _ask(
        lib,
        lib.nvmlDeviceGetRetiredPages,
        h,
        lib.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
    )
    dbe = _ask(
        lib, lib.nvmlDeviceGetRetiredPages, h, lib.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
    )
    procs = _ask(lib, lib.nvmlDeviceGetComputeRunningProcesses, h) or []
    pci = _ask(lib, lib.nvmlDeviceGetPciInfo, h)
    return GpuState(
        index=index,
        name=_ask(lib, lib.nvmlDeviceGetName, h) or "",
        uuid=_ask(lib, lib.nvmlDeviceGetUUID, h) or "",
        bus_id=_text(pci.busId) if pci is not None else "",
        utilization_pct=float(util.gpu) if util is not None else None,
        power_w=power / 1000 if power is not None else None,
        power_limit_w=limit / 1000 if limit is not None else None,
        memory_used_bytes=mem.used if mem is not None else None,
        memory_total_bytes=mem.total if mem is not None else None,
        sm_clock_mhz=_ask(lib, lib.nvmlDeviceGetClockInfo, h, lib.NVML_CLOCK_SM),
        sm_clock_max_mhz=_ask(lib, lib.nvmlDeviceGetMaxClockInfo, h, lib.NVML_CLOCK_SM),
        temperature_c=_ask(lib, lib.nvmlDeviceGetTemperature, h, lib.NVML_TEMPERATURE_GPU),
        throttle_reasons=tuple(name for bit, name in THROTTLE_REASONS.items() if reasons & bit),
        ecc_enabled=bool(ecc_mode[0]) if ecc_mode is not None else None,
        ecc_volatile_uncorrected=_ecc(
            lib, h, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, lib.NVML_VOLATILE_ECC
        ),
        ecc_aggregate_uncorrected=_ecc(
            lib, h, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, lib.NVML_AGGREGATE_ECC
        ),
        ecc_volatile_corrected=_ecc(
            lib, h, lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_VOLATILE_ECC
        ),
        retired_pages_sbe=len(sbe) if sbe is not None else None,
        retired_pages_dbe=len(dbe) if dbe is not None else None,
        retired_pages_pending=bool(pending) if pending is not None else None,
        remapped_rows_correctable=remap[0] if remap is not None else None,
        remapped_rows_uncorrectable=remap[1] if remap is not None else None,
        remap_pending=bool(remap[2]) if remap is not None else None,
        remap_failure=bool(remap[3]) if remap is not None else None,
        persistence_mode=bool(persistence) if persistence is not None else None,
        mig_enabled=bool(mig[0]) if mig is not None else None,
        pcie_gen=_ask(lib, lib.nvmlDeviceGetCurrPcieLinkGeneration, h),
        pcie_gen_max=_ask(lib, lib.nvmlDeviceGetMaxPcieLinkGeneration, h),
        pcie_width=_ask(lib, lib.nvmlDeviceGetCurrPcieLinkWidth, h),
        pcie_width_max=_ask(lib, lib.nvmlDeviceGetMaxPcieLinkWidth, h),
        numa_node=_ask(lib, lib.nvmlDeviceGetNumaNodeId, h),
        nvlinks=_nvlinks(lib, h),
        processes=tuple(GpuProcess(p.pid, p.usedGpuMemory) for p in procs),
        recovery_action=_recovery_action(lib, h),
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ecc(lib: Any, h: Any, kind: int, counter: int) -> int | None:
    value = _ask(lib, lib.nvmlDeviceGetTotalEccErrors, h, kind, counter)
    return int(value) if value is not None else None


def _nvlinks(lib: Any, h: Any) -> tuple[NvLink, ...]:
    links = []
    for link in range(lib.NVML_NVLINK_MAX_LINKS):
        state = _ask(lib, lib.nvmlDeviceGetNvLinkState, h, link)
        if state is None:
            continue  # no such link on this GPU
        errors = {
            name: _ask(lib, lib.nvmlDeviceGetNvLinkErrorCounter, h, link, counter) or 0
            for name, counter in (
                ("replay", lib.NVML_NVLINK_ERROR_DL_REPLAY),
                ("recovery", lib.NVML_NVLINK_ERROR_DL_RECOVERY),
                ("flit", lib.NVML_NVLINK_ERROR_DL_CRC_FLIT),
                ("data", lib.NVML_NVLINK_ERROR_DL_CRC_DATA),
            )
        }
        remote = _ask(lib, lib.nvmlDeviceGetNvLinkRemoteDeviceType, h, link)
        links.append(
            NvLink(
                link=link,
                active=bool(state),
                version=_ask(lib, lib.nvmlDeviceGetNvLinkVersion, h, link),
                remote=NVLINK_REMOTE.get(remote, "unknown") if remote is not None else "unknown",
                replay_errors=errors["replay"],
                recovery_errors=errors["recovery"],
                crc_errors=errors["flit"] + errors["data"],
            )
        )
    return tuple(links)


def _recovery_action(lib: Any, h: Any) -> str | None:
    field = getattr(lib, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
    if field is None:
        return None  # nvidia-ml-py older than the driver field
    values = _ask(lib, lib.nvmlDeviceGetFieldValues, h, [field])
    if not values or values[0].nvmlReturn != 0:
        return None
    return RECOVERY_ACTIONS.get(values[0].value.uiVal, f"action {values[0].value.uiVal}")


def _poll_xids(lib: Any, handles: list[Any], wait_ms: int) -> dict[int, list[int]]:
    """XID critical errors NVML delivers while we wait ``wait_ms`` (0: those already queued)."""
    try:
        events = lib.nvmlEventSetCreate()
    except lib.NVMLError:
        return {}
    found: dict[int, list[int]] = {}
    try:
        for handle in handles:
            try:
                lib.nvmlDeviceRegisterEvents(handle, lib.nvmlEventTypeXidCriticalError, events)
            except lib.NVMLError:
                continue  # this GPU cannot report events (lost, or not supported)
        while True:
            try:
                data = lib.nvmlEventSetWait_v2(events, wait_ms)
            except lib.NVMLError:
                break  # NVML_ERROR_TIMEOUT: nothing more queued
            found.setdefault(lib.nvmlDeviceGetIndex(data.device), []).append(int(data.eventData))
    finally:
        _ask(lib, lib.nvmlEventSetFree, events)
    return found
