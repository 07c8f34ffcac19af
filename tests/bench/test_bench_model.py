"""The model against nccl-tests' published figures and its own algebra.

Published figures (NCCL maintainers in the nccl-tests / NCCL issue trackers):
8xH100 ring busbw ~370 GB/s and NVLS peak ~480 GB/s with algbw ~275 GB/s
(nccl-tests#212); NVLS at 4..8 H100s 370/420/440/460/480 GB/s (NCCL#1455);
8xA100 ~230-235 GB/s (nccl-tests#149, #175: 232.5 GB/s measured).
"""

from __future__ import annotations

import dataclasses

import pytest

from doctor.bench.links import GPUS, Topology, params_from_topology, topology_from_fleet
from doctor.bench.model import (
    Algorithm,
    ModelParams,
    RingStep,
    busbw_factor,
    params_from_probe,
    peak,
    predict,
    ring_time_from_step,
    ring_time_us,
)
from doctor.bench.probe import ProbeResult, link_bandwidth
from doctor.gpu.nvml import read_fleet


def nvswitch_node(gpu: str, nranks: int = 8, **changes: object) -> ModelParams:
    spec = GPUS[gpu]
    topo = Topology(gpu, nranks, spec.nvlinks, spec.nvlink, nvswitch=True)
    return params_from_topology(dataclasses.replace(topo, **changes))


def within(value: float, published: float, tolerance: float = 0.10) -> bool:
    return abs(value - published) <= tolerance * published


def test_h100_ring_busbw_matches_published_370() -> None:
    # GIVEN 8xH100 with NVLS off WHEN the model predicts a 4 GiB AllReduce
    params = nvswitch_node("H100", nvls_enabled=False)
    # THEN ring is expected and busbw is the ~370 GB/s NCCL reaches on 450 GB/s NVLink
    assert peak(params).algorithm is Algorithm.RING
    assert within(peak(params).busbw_gbps, 370)


def test_h100_nvls_peak_matches_published_480_and_algbw_275() -> None:
    best = peak(nvswitch_node("H100"))
    assert best.algorithm is Algorithm.NVLS
    assert within(best.busbw_gbps, 480)
    assert within(best.algbw_gbps, 275)
    assert best.busbw_gbps > 450, "NVLS busbw exceeds the NVLink line rate"


@pytest.mark.parametrize(("nranks", "published"), [(4, 370), (5, 420), (6, 440), (7, 460)])
def test_h100_nvls_over_gpu_counts_matches_published_sweep(nranks: int, published: float) -> None:
    # The NVLS efficiency constant comes from the 8-GPU figure; the other counts are a check.
    assert within(peak(nvswitch_node("H100", nranks)).busbw_gbps, published)


def test_a100_ring_matches_published_235() -> None:
    best = peak(nvswitch_node("A100"))
    assert best.algorithm is Algorithm.RING, "A100 NVSwitch has no NVLS"
    assert within(best.busbw_gbps, 235)


def test_h200_equals_h100_links_and_b200_doubles_them() -> None:
    h100, h200, b200 = (
        peak(nvswitch_node(g, nvls_enabled=False)).busbw_gbps for g in ("H100", "H200", "B200")
    )
    assert h200 == h100
    assert b200 == pytest.approx(2 * h100, rel=1e-4)


def test_ring_busbw_ceiling_does_not_depend_on_rank_count() -> None:
    ceilings = {n: peak(nvswitch_node("H100", n, nvls_enabled=False)).busbw_gbps for n in (2, 4, 8)}
    assert max(ceilings.values()) == pytest.approx(min(ceilings.values()), rel=1e-3)


def test_small_sizes_are_latency_bound_and_prefer_tree() -> None:
    params = nvswitch_node("A100")
    small, large = predict(params, 1024), predict(params, 1 << 30)
    assert small.algorithm is Algorithm.TREE
    assert large.algorithm is Algorithm.RING
    assert small.busbw_gbps < 0.01 * large.busbw_gbps


def test_ring_time_is_the_alpha_beta_formula() -> None:
    p = ModelParams(nranks=4, alpha_us=10.0, link_gbps=1.0, reduce_gbps=2.0)
    nbytes = 1_000_000
    # 2(n-1) alpha + 2(n-1)/n S/B + (n-1)/n S/R, with GB/s = 1e3 bytes/us
    assert ring_time_us(p, nbytes) == pytest.approx(60 + 1500 + 375)
    assert predict(p, nbytes).busbw_gbps == pytest.approx(nbytes / (1935 * 1e3) * busbw_factor(4))


def test_busbw_factor_is_nccl_tests_definition() -> None:
    assert busbw_factor(2) == 1.0
    assert busbw_factor(8) == pytest.approx(1.75)


def test_pcie_only_gpus_are_limited_by_the_slot() -> None:
    # GIVEN GPUs without NVLink on PCIe Gen4 x16 (31.5 GB/s line)
    topo = Topology("L40S", 4, pcie="pcie4", pcie_width=16)
    params = params_from_topology(topo)
    assert params.line_gbps == pytest.approx(31.5)
    assert peak(params).busbw_gbps == pytest.approx(31.5 * 0.8, rel=1e-3)
    assert params.nvls_gbps is None


def test_multi_node_ring_is_limited_by_the_network() -> None:
    # GIVEN 2 nodes of 8xH100 with one NDR (50 GB/s) NIC per GPU
    topo = Topology("H100", 16, 18, "nvlink4", nvswitch=True, nodes=2, nic="ib-ndr")
    params = params_from_topology(topo)
    assert params.nvls_gbps is None
    assert peak(params).busbw_gbps == pytest.approx(50 * 0.92, rel=1e-3)
    hdr = params_from_topology(dataclasses.replace(topo, nic="ib-hdr"))
    assert peak(hdr).busbw_gbps == pytest.approx(25 * 0.92, rel=1e-3)


def test_topology_from_the_healthy_fake_fleet() -> None:
    topo = topology_from_fleet(read_fleet({"NCCL_DOCTOR_FAKE_NVML": "healthy-8xh100"}), 8)
    assert (topo.gpu, topo.nvlinks, topo.nvlink, topo.nvswitch, topo.pcie) == (
        "H100",
        18,
        "nvlink4",
        True,
        "pcie5",
    )
    assert topo.numa_nodes == (0, 1)
    assert "8x H100, 18x NVLink4, NVSwitch, NUMA nodes 0,1" in params_from_topology(topo).source


def test_a_gpu_with_links_down_lowers_the_ring_ceiling() -> None:
    fleet = read_fleet({"NCCL_DOCTOR_FAKE_NVML": "ecc-nvlink"})
    topo = topology_from_fleet(fleet, 8, nvls_enabled=False)
    assert topo.nvlinks == 16
    assert peak(params_from_topology(topo)).busbw_gbps == pytest.approx(16 * 25 * 0.8, rel=1e-4)


def test_cpu_parameters_come_from_the_probe_only() -> None:
    probe = ProbeResult(alpha_us=150.0, link_gbps=0.9, reduce_gbps=12.0)
    params = params_from_probe(probe, 4)
    assert (params.alpha_us, params.link_gbps, params.reduce_gbps) == (150.0, 0.9, 12.0)
    assert not params.tree and params.nvls_gbps is None
    assert params.measured_steps and "p2p steps measured beside each size" in params.source


def test_cpu_ring_is_predicted_from_the_steps_measured_beside_it() -> None:
    # GIVEN a step of S/n measured at 1000 us exchange and 50 us sum, 4 ranks
    params = params_from_probe(ProbeResult(alpha_us=1.0, link_gbps=100.0, reduce_gbps=100.0), 4)
    step = RingStep(exchange_us=1000.0, reduce_us=50.0)
    # THEN the ring is 2(n-1) exchanges and n-1 sums, whatever the summary figures say
    assert ring_time_from_step(params, step) == 6 * 1000 + 3 * 50
    assert predict(params, 1 << 20, step).time_us == 6150
    assert predict(params, 1 << 20).time_us < 6150, "without a step, the summary alpha/B"


def test_link_bandwidth_is_bytes_over_time_of_large_exchanges() -> None:
    assert link_bandwidth(((4_000_000, 4000.0), (16_000_000, 16000.0))) == pytest.approx(1.0)
