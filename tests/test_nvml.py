"""The NVML reader through the fake pynvml: units, bit masks, lost GPUs, XIDs, bad fleet files."""

from __future__ import annotations

import json
from pathlib import Path

from doctor.gpu.nvml import bus_key, parse_kernel_xids, read_fleet, to_gpu_sample
from doctor.gpu.nvml_fake import bundled_fleets


def test_bundled_fleets() -> None:
    assert set(bundled_fleets()) >= {
        "healthy-8xh100",
        "pcie-degraded",
        "xid79",
        "throttled",
        "ecc-nvlink",
        "healthy-8xa100",
    }


def test_healthy_h100_reads_as_plain_data() -> None:
    fleet = read_fleet({"NCCL_DOCTOR_FAKE_NVML": "healthy-8xh100"})
    assert (fleet.source, fleet.unavailable, fleet.driver) == (
        "fake:healthy-8xh100",
        "",
        "550.90.07",
    )
    g = fleet.gpus[3]
    assert (g.index, g.name, g.bus_id) == (3, "NVIDIA H100 80GB HBM3", "00000000:5D:00.0")
    assert (g.power_w, g.power_limit_w) == (71.5, 700.0), "milliwatts converted"
    assert (g.sm_clock_mhz, g.sm_clock_max_mhz, g.numa_node) == (345, 1980, 0)
    assert (g.pcie_gen, g.pcie_gen_max, g.pcie_width, g.pcie_width_max) == (1, 5, 16, 16)
    assert g.active_nvlinks == 18 and {link.remote for link in g.nvlinks} == {"switch"}
    assert (g.persistence_mode, g.mig_enabled, g.recovery_action) == (True, False, "none")
    assert g.throttle_reasons == ("gpu_idle",)


def test_counters_and_masks_from_the_faulty_fleet() -> None:
    fleet = read_fleet({"NCCL_DOCTOR_FAKE_NVML": "ecc-nvlink"})
    g1 = fleet.gpus[1]
    assert (
        g1.ecc_volatile_uncorrected,
        g1.ecc_aggregate_uncorrected,
        g1.ecc_volatile_corrected,
    ) == (2, 5, 118)
    assert (g1.remapped_rows_uncorrectable, g1.remap_pending, g1.remap_failure) == (2, True, False)
    assert g1.recovery_action == "gpu_reset"
    assert [link.link for link in fleet.gpus[4].nvlinks if not link.active] == [3, 7]
    link5 = fleet.gpus[6].nvlinks[5]
    assert (link5.replay_errors, link5.recovery_errors, link5.crc_errors) == (1200, 3, 40)
    assert fleet.gpu_of_pid(4242) is fleet.gpus[0]
    assert fleet.gpu_of_pid(1) is None


def test_a_lost_gpu_and_its_kernel_xid() -> None:
    fleet = read_fleet({"NCCL_DOCTOR_FAKE_NVML": "xid79"})
    assert fleet.gpus[5].lost and fleet.gpus[5].name == ""
    assert fleet.gpus[1].xid_events == (31,)
    assert fleet.unmatched_xids == (("0000:ab:00", 79),)


def test_live_xid_events_come_through_the_event_set(tmp_path: Path) -> None:
    path = tmp_path / "fleet.json"
    path.write_text(
        json.dumps(
            {"gpus": [{"name": "NVIDIA H100", "bus_id": "0000:18:00.0", "xid_events_live": [94]}]}
        )
    )
    fleet = read_fleet({"NCCL_DOCTOR_FAKE_NVML": str(path)})
    assert fleet.gpus[0].xid_events == (94,)
    assert fleet.gpus[0].ecc_volatile_uncorrected is None, "unsupported query -> None"


def test_unsupported_queries_are_none_not_errors() -> None:
    g = read_fleet({"NCCL_DOCTOR_FAKE_NVML": "healthy-8xa100"}).gpus[0]
    assert g.recovery_action is None
    assert g.name == "NVIDIA A100-SXM4-80GB"


def test_bad_fleet_files_make_nvml_unavailable(tmp_path: Path) -> None:
    missing = read_fleet({"NCCL_DOCTOR_FAKE_NVML": str(tmp_path / "nope.json")})
    assert "unreadable" in missing.unavailable and not missing.gpus
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "malformed" in read_fleet({"NCCL_DOCTOR_FAKE_NVML": str(bad)}).unavailable
    driverless = tmp_path / "driverless.json"
    driverless.write_text(json.dumps({"init_error": True, "gpus": []}))
    assert "NVML cannot start" in read_fleet({"NCCL_DOCTOR_FAKE_NVML": str(driverless)}).unavailable


def test_this_host_has_no_nvml() -> None:
    fleet = read_fleet({})
    assert fleet.unavailable.startswith("NVML cannot start") and not fleet.gpus


def test_kernel_log_parsing_and_bus_ids() -> None:
    text = (
        "[ 1.0] NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', GPU has fallen off the bus.\n"
        "[ 2.0] NVRM: Xid (PCI:0000:9a:00): 48, pid=12\n"
        "[ 3.0] nothing here\n"
        "[ 4.0] NVRM: Xid (PCI:...): 145, pid=12\n"  # the address cut: no GPU to put it on
        "[ 5.0] NVRM: Xid (0000:1b:00.0): 94, pid=7\n"  # no PCI: before the address
    )
    assert parse_kernel_xids(text) == {(0, 0x9A, 0): [79, 48], (0, 0x1B, 0): [94]}
    assert bus_key("00000000:9A:00.0") == bus_key("0000:9a:00") == (0, 0x9A, 0)
    assert bus_key("garbage") is None


def test_triage_sample_form() -> None:
    g = read_fleet({"NCCL_DOCTOR_FAKE_NVML": "throttled"}).gpus[2]
    sample = to_gpu_sample(g, rank=2)
    assert (sample.rank, sample.index, sample.sm_clock_mhz) == (2, 2, 1095)
    assert sample.throttle_reasons == ("hw_slowdown", "hw_thermal_slowdown")
