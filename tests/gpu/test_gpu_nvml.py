"""The NVML reader on answers recorded from a real NVIDIA H200 and H100 (tests/fixtures/gpu).

The recording holds every raw pynvml answer the reader got, idle and while a rank
spun a kernel; nvidia-smi's CSV of the same moment is the independent reading the
mapped values are checked against (units, bit masks, unsupported queries).
"""

from __future__ import annotations

import csv

import pytest
from nvml_replay import CARDS, GPU_FIXTURES, replayed

from doctor import codec
from doctor.gpu import nvml

MIB = 1 << 20


def smi_row(text: str) -> dict[str, str]:
    """The first GPU's row of ``nvidia-smi --query-gpu=... --format=csv``, keyed by field."""
    rows = list(csv.reader(line for line in text.splitlines() if line.strip()))
    header = [h.strip().split(" [")[0] for h in rows[0]]
    return dict(zip(header, (v.strip() for v in rows[1]), strict=True))


def number(value: str) -> float:
    return float(value.split()[0])


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("label", ["idle", "busy"])
def test_the_replay_rebuilds_what_the_reader_built_on_the_gpu(label: str, card: str) -> None:
    fleet, recording, lib = replayed(label, card)
    assert codec.encode(fleet) == recording["fleet"]
    assert lib.unrecorded == [], f"the reader asks NVML something the {card} was never asked"


@pytest.mark.parametrize("card", CARDS)
def test_an_idle_hopper_maps_like_nvidia_smi(card: str) -> None:
    fleet, _, _ = replayed("idle", card)
    smi = smi_row((GPU_FIXTURES / card / "smi-idle.csv").read_text())
    (g,) = fleet.gpus
    assert (fleet.driver, fleet.unavailable, fleet.notes) == (smi["driver_version"], "", ())
    assert (g.name, g.uuid, g.bus_id) == (smi["name"], smi["uuid"], smi["pci.bus_id"])
    assert g.memory_total_bytes == number(smi["memory.total"]) * MIB
    assert g.power_limit_w == number(smi["enforced.power.limit"]) == 700.0, "milliwatts -> W"
    assert g.power_w == pytest.approx(number(smi["power.draw"]), abs=1.0)
    assert (g.sm_clock_mhz, g.sm_clock_max_mhz) == (345, 1980)
    assert g.sm_clock_max_mhz == number(smi["clocks.max.sm"])
    assert g.temperature_c == pytest.approx(number(smi["temperature.gpu"]), abs=2)
    assert smi["clocks_event_reasons.active"] == "0x0000000000000001"
    assert g.throttle_reasons == ("gpu_idle",)
    assert smi["ecc.mode.current"] == "Enabled" and g.ecc_enabled is True
    assert (g.ecc_volatile_uncorrected, g.ecc_aggregate_uncorrected, g.ecc_volatile_corrected) == (
        0,
        0,
        0,
    )
    # Hopper retires no pages (it remaps rows): NVML says NotSupported, nvidia-smi [N/A]
    assert smi["retired_pages.double_bit.count"] == "[N/A]"
    assert (g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending) == (None,) * 3
    assert (g.remapped_rows_correctable, g.remapped_rows_uncorrectable) == (0, 0)
    assert (g.remap_pending, g.remap_failure) == (False, False)
    assert (g.persistence_mode, g.mig_enabled, g.recovery_action) == (True, False, "none")
    assert (g.pcie_gen, g.pcie_gen_max, g.pcie_width, g.pcie_width_max) == (5, 5, 16, 16)
    # these hosts show no NVLink to NVML (all 36 link queries NotSupported; `nvidia-smi nvlink
    # -s` prints nothing) and no NUMA node of its own
    assert g.nvlinks == () and g.numa_node is None
    assert g.xid_events == () and fleet.unmatched_xids == ()


@pytest.mark.parametrize("card", CARDS)
def test_a_busy_hopper_names_the_rank_that_holds_it(card: str) -> None:
    fleet, _, _ = replayed("busy", card)
    smi_text = (GPU_FIXTURES / card / "smi-busy.txt").read_text()
    smi = smi_row(smi_text)
    (g,) = fleet.gpus
    assert g.utilization_pct == number(smi["utilization.gpu"]) == 100.0
    assert g.sm_clock_mhz == number(smi["clocks.current.sm"]) == 1980
    assert g.throttle_reasons == () and smi["clocks_event_reasons.active"] == "0x0000000000000000"
    apps = smi_text.split("pid, process_name, used_gpu_memory [MiB]\n")[1].splitlines()[0]
    pid, _, used = (part.strip() for part in apps.split(","))
    assert [(p.pid, p.used_bytes) for p in g.processes] == [(int(pid), number(used) * MIB)]
    assert fleet.gpu_of_pid(int(pid)) is g, "the hung rank's pid (no PID namespace) finds its GPU"
    sample = nvml.to_gpu_sample(g, rank=0)
    assert (sample.utilization_pct, sample.ecc_uncorrected, sample.xid_events) == (100.0, 0, ())


@pytest.mark.parametrize(("card", "reserve"), [("h200", 644_939_776), ("h100", 503_316_480)])
def test_memory_used_counts_the_driver_reserve_that_nvidia_smi_leaves_out(
    card: str, reserve: int
) -> None:
    """nvmlDeviceGetMemoryInfo (v1) counts the driver's reserve as used; nvidia-smi does not.

    Recorded as it is: an idle H200 reads about 615 MiB used, an idle H100 480 MiB, where
    nvidia-smi says 0 MiB.
    """
    fleet, _, _ = replayed("idle", card)
    smi = smi_row((GPU_FIXTURES / card / "smi-idle.csv").read_text())
    assert number(smi["memory.used"]) == 0
    assert fleet.gpus[0].memory_used_bytes == reserve
