"""``nccl-doctor bench`` as a user runs it: real gloo ranks, real failures, real usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import clean_env, run_cli

from doctor.bench.runner import BenchError, job_env
from doctor.trust.subproc import free_port

pytestmark = pytest.mark.slow


def test_a_real_small_run_prints_json_and_writes_the_plot(tmp_path: Path) -> None:
    # GIVEN two local gloo ranks and a short sweep
    plot = tmp_path / "bench.svg"
    done = run_cli(
        "bench", "--nproc", "2", "--sizes", "64K:4M:4", "--json", "--plot", str(plot), timeout=120
    )
    # THEN the JSON contract holds and the numbers are physical (loose: the host is shared)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["schema"], data["backend"], data["nproc"]) == ("nccl-doctor/bench/v1", "gloo", 2)
    assert [row["bytes"] for row in data["rows"]] == [65536, 262144, 1048576, 4194304]
    for row in data["rows"]:
        assert row["time_us"] > 0 and row["busbw_gbps"] > 0 and row["predicted_busbw_gbps"] > 0
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"], rel=1e-3)  # 2(n-1)/n = 1
        assert 0.05 < row["efficiency"] < 20
    assert data["model"]["probe"]["link_gbps"] > 0 and data["model"]["alpha_us"] > 0
    assert plot.read_text().startswith("<svg") and plot.read_text().count("<polyline") == 2


def test_the_table_layout_on_a_terminal_less_run() -> None:
    done = run_cli("bench", "--nproc", "2", "--sizes", "1M", timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "# nccl-doctor bench: 2 ranks, backend gloo, device cpu"
    assert any(ln.split()[:4] == ["1048576", "262144", "float", "sum"] for ln in lines)
    assert any(ln.startswith("- Peak busbw") for ln in lines)


def test_ranks_that_cannot_start_are_one_sentence_and_exit_2() -> None:
    # GIVEN gloo told to use an interface that does not exist: the ranks fail for real
    env = clean_env({"GLOO_SOCKET_IFNAME": "nosuchif0"})
    done = run_cli("bench", "--nproc", "2", "--sizes", "1K", env=env, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("nccl-doctor: rank ") and "nosuchif0" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_nccl_without_gpus_is_refused_before_any_rank_starts() -> None:
    done = run_cli("bench", "--backend", "nccl", "--nproc", "2", timeout=60)
    assert done.returncode == 2
    assert "needs NVIDIA GPUs" in done.stderr and "--backend gloo" in done.stderr
    fake = clean_env({"NCCL_DOCTOR_FAKE_NVML": "healthy-8xh100"})
    done = run_cli("bench", "--backend", "nccl", "--nproc", "9", env=fake, timeout=60)
    assert done.returncode == 2 and "this host has 8" in done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--plot", "out.pdf"), "writes .svg or .png"),
        (("--sizes", "4K:1K"), "0 < begin <= end"),
        (("--nproc", "1"), "from 2 to 64"),
        (("--nproc", "100000"), "from 2 to 64"),
    ],
)
def test_usage_errors_exit_2_without_starting_ranks(args: tuple[str, ...], words: str) -> None:
    done = run_cli("bench", *args, timeout=60)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr


def test_nproc_is_refused_inside_a_job() -> None:
    env = clean_env(
        {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    )
    done = run_cli("bench", "--nproc", "2", env=env, timeout=60)
    assert done.returncode == 2 and "inside a torchrun or srun job" in done.stderr


def test_job_env_reads_torchrun_and_slurm_ranks() -> None:
    assert job_env({}) is None
    torchrun = job_env(
        {
            "RANK": "3",
            "WORLD_SIZE": "8",
            "LOCAL_RANK": "1",
            "MASTER_ADDR": "h",
            "MASTER_PORT": "29500",
        }
    )
    assert torchrun is not None and (torchrun["RANK"], torchrun["LOCAL_RANK"]) == ("3", "1")
    slurm = job_env(
        {
            "SLURM_PROCID": "5",
            "SLURM_NTASKS": "16",
            "SLURM_LOCALID": "5",
            "MASTER_ADDR": "h",
            "MASTER_PORT": "1",
        }
    )
    assert slurm is not None and (slurm["RANK"], slurm["WORLD_SIZE"]) == ("5", "16")
    with pytest.raises(BenchError, match="MASTER_ADDR"):
        job_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})


def test_preflight_bench_runs_the_real_benchmark() -> None:
    # GIVEN preflight --bench on this CPU host with a minimum any real run clears
    env = clean_env({"NCCL_DOCTOR_BENCH_MIN_EFFICIENCY": "0.01"})
    done = run_cli("preflight", "--bench", "--json", env=env, timeout=180)
    [finding] = [f for f in json.loads(done.stdout)["findings"] if f["check"] == "bench.allreduce"]
    assert finding["severity"] == "pass", finding
    assert finding["subject"] == "ranks 0-1 (gloo, cpu)"
    assert "of the model at 1MB-16MB" in finding["message"]


def test_a_run_past_its_timeout_stops_and_reaps_every_rank() -> None:
    import psutil

    # GIVEN a timeout shorter than the ranks need to import torch (a marker size to find them
    # by); 1 s was not: a fresh-clone run finished the whole benchmark within it
    done = run_cli("bench", "--nproc", "2", "--sizes", "3076", "--timeout", "0.2", timeout=60)
    # THEN one sentence, exit 2, and no rank left behind
    assert done.returncode == 2 and "did not finish in time" in done.stderr
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "doctor.bench.worker" in " ".join(p.info["cmdline"] or [])
        and "3076" in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []


def test_inside_a_torchrun_job_it_uses_the_jobs_ranks(tmp_path: Path) -> None:
    import subprocess
    import sys

    # GIVEN bench launched as the command of a 2-rank torchrun job
    torchrun = Path(sys.executable).with_name("torchrun")
    port = str(free_port())
    done = subprocess.run(
        [
            str(torchrun),
            "--nproc_per_node",
            "2",
            "--master_port",
            port,
            "--log-dir",  # torchrun's default, a mkdtemp in TMPDIR, is never removed
            str(tmp_path / "torchrun"),
            "-m",
            "doctor",
            "bench",
            "--sizes",
            "64K:1M:4",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=180,
    )
    # THEN rank 0 alone prints one result for the job's two ranks
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout)
    assert (data["nproc"], data["backend"]) == (2, "gloo")
    assert [row["bytes"] for row in data["rows"]] == [65536, 262144, 1048576]


def test_png_without_pillow_is_refused_before_any_rank_starts(tmp_path: Path) -> None:
    # GIVEN an environment where Pillow cannot be imported
    shadow = tmp_path / "PIL"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('no Pillow here')\n")
    env = clean_env({"PYTHONPATH": str(tmp_path)})
    # WHEN a PNG plot is asked for THEN one sentence says how to get it, and exit 2
    done = run_cli("bench", "--nproc", "2", "--plot", str(tmp_path / "x.png"), env=env, timeout=60)
    assert done.returncode == 2
    assert "needs Pillow" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.png").exists()
