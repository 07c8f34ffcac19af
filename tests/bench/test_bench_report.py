"""Table, explanations, plots and JSON, built from fixed measurements (no ranks started)."""

from __future__ import annotations

import pytest

from doctor.bench.explain import explain, latency_bound_below
from doctor.bench.links import GPUS, Topology, params_from_topology
from doctor.bench.model import params_from_probe, predict
from doctor.bench.plot import MEASURED, PREDICTED, png_plot, svg_plot, terminal_plot
from doctor.bench.probe import ProbeResult
from doctor.bench.render import format_row, format_table
from doctor.bench.result import SCHEMA, BenchResult, Measured, Timing, build_result, make_row

PROBE = ProbeResult(alpha_us=100.0, link_gbps=1.0, reduce_gbps=10.0)


def cpu_result(times: dict[int, float]) -> BenchResult:
    measured = Measured("gloo", 4, PROBE, tuple(Timing(b, t) for b, t in times.items()))
    return build_result(measured, params_from_probe(PROBE, 4))


def h100_result(efficiency: float = 1.0) -> BenchResult:
    """8xH100 measurements that sit at ``efficiency`` of the model everywhere."""
    spec = GPUS["H100"]
    params = params_from_topology(Topology("H100", 8, spec.nvlinks, spec.nvlink, nvswitch=True))
    sizes = [1 << k for k in range(10, 34, 2)]
    times = tuple(Timing(s, predict(params, s).time_us / efficiency) for s in sizes)
    return build_result(Measured("nccl", 8, PROBE, times, "NVIDIA H100 80GB HBM3"), params)


def test_row_uses_nccl_tests_arithmetic_and_layout() -> None:
    row = make_row(params_from_probe(PROBE, 4), 1 << 20, 2000.0)
    assert row.count == 1 << 18
    assert row.algbw_gbps == (1 << 20) / 2e6
    assert row.busbw_gbps == row.algbw_gbps * 1.5
    text = format_row(row)
    assert text.startswith("     1048576        262144     float     sum   2000.0    0.52    0.79")
    assert text.endswith("ring")
    assert (
        format_row(make_row(params_from_probe(PROBE, 4), 1 << 26, 123456.7)).split()[4] == "123457"
    ), "time above 10 ms has no decimals, as in nccl-tests"


def test_table_has_header_model_rows_and_median() -> None:
    result = cpu_result({1 << 10: 900.0, 1 << 20: 2500.0, 4 << 20: 7000.0})
    table = format_table(result)
    lines = table.splitlines()
    assert lines[0] == "# nccl-doctor bench: 4 ranks, backend gloo, device cpu"
    assert lines[1].startswith("# model: ring of 2(n-1) p2p steps measured beside each size")
    assert "host probe: step 100.0 us, link 1.00 GB/s" in lines[1]
    assert "predicted" in lines[3] and "eff" in lines[3] and "algo" in lines[3]
    assert len([ln for ln in lines if not ln.startswith("#")]) == 3
    assert lines[-1].startswith("# Median efficiency (sizes >= 1 MiB): ")


def test_json_has_the_contract_fields() -> None:
    data = cpu_result({1 << 20: 2500.0}).to_json()
    assert data["schema"] == SCHEMA
    assert (data["backend"], data["nproc"]) == ("gloo", 4)
    assert data["model"]["alpha_us"] == 100.0 and data["model"]["probe"]["link_gbps"] == 1.0
    row = data["rows"][0]
    assert set(row) >= {
        "bytes",
        "time_us",
        "algbw_gbps",
        "busbw_gbps",
        "predicted_busbw_gbps",
        "efficiency",
    }
    assert row["efficiency"] == pytest.approx(
        row["busbw_gbps"] / row["predicted_busbw_gbps"], abs=1e-3
    )


def test_explain_names_nvls_when_busbw_beats_the_line_rate() -> None:
    notes = explain(h100_result())
    assert any("above the 450 GB/s line rate: NVLS" in n for n in notes)
    assert any(n.startswith("Peak busbw") for n in notes)
    assert any("latency-bound" in n for n in notes)
    assert any("The model expects" in n and "nvls" in n for n in notes)
    assert not any(n.startswith("Below the model") for n in notes)


def test_explain_lists_sizes_short_of_the_model() -> None:
    notes = explain(h100_result(efficiency=0.5))
    assert any(n.startswith("Below the model at") and "(0.50)" in n for n in notes)


def test_latency_bound_cutoff_is_where_alpha_equals_transfer() -> None:
    # 2(n-1) alpha = 2(n-1)/n S/B  ->  S = n alpha B = 4 * 100 us * 1e3 B/us = 400 KB -> 512K
    assert latency_bound_below(cpu_result({1 << 20: 1.0})) == 1 << 19


def test_terminal_plot_marks_both_series() -> None:
    plot = terminal_plot(h100_result(efficiency=0.5))
    lines = plot.splitlines()
    assert lines[0].startswith("busbw GB/s (* measured, o predicted")
    assert "*" in plot and "o" in plot
    assert lines[-1].split() == ["1KB", "4GB"]


def test_terminal_plot_marks_overlap_when_measured_equals_predicted() -> None:
    body = "\n".join(terminal_plot(h100_result()).splitlines()[1:-2])
    assert "#" in body and "*" not in body and "o" not in body


def test_svg_is_a_standalone_chart_of_both_series() -> None:
    svg = svg_plot(h100_result(efficiency=0.5))
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert svg.count("<polyline") == 2
    assert svg.count("<circle") == 2 * 12
    assert "8 ranks, nccl (NVIDIA H100 80GB HBM3)" in svg
    assert svg == svg_plot(h100_result(efficiency=0.5)), "deterministic"


def test_png_plot_draws_both_series_in_their_colours() -> None:
    # GIVEN a result whose measured busbw is half the prediction
    from io import BytesIO

    from PIL import Image

    data = png_plot(h100_result(efficiency=0.5))
    # THEN it is a 720x400 PNG with pixels of both series' colours
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    image = Image.open(BytesIO(data)).convert("RGB")
    assert image.size == (720, 400)
    colours = {rgb for _count, rgb in image.getcolors(maxcolors=1 << 16)}
    for hex_colour in (MEASURED, PREDICTED):
        assert tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)) in colours
