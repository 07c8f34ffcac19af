"""What a bench run measured, the rows it prints, and their JSON form (``nccl-doctor/bench/v1``)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from doctor.bench.model import ModelParams, RingStep, busbw_factor, predict
from doctor.bench.probe import ProbeResult

SCHEMA = "nccl-doctor/bench/v1"
DTYPE = "float"
TYPE_SIZE = 4


@dataclass(frozen=True)
class Timing:
    """One size: the AllReduce time and the ring step measured beside it."""

    bytes: int
    time_us: float
    step: RingStep | None = None


@dataclass(frozen=True)
class Measured:
    """Raw numbers from the ranks: the probe and one timing per size (averaged over ranks)."""

    backend: str
    nranks: int
    probe: ProbeResult
    timings: tuple[Timing, ...]
    device: str = "cpu"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measured:
        timings = tuple(
            Timing(
                int(t["bytes"]),
                float(t["time_us"]),
                RingStep(float(t["exchange_us"]), float(t["reduce_us"])),
            )
            for t in data["timings"]
        )
        return cls(
            data["backend"],
            int(data["nranks"]),
            ProbeResult.from_json(data["probe"]),
            timings,
            data.get("device", "cpu"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "nranks": self.nranks,
            "probe": self.probe.to_json(),
            "device": self.device,
            "timings": [
                {
                    "bytes": t.bytes,
                    "time_us": t.time_us,
                    "exchange_us": t.step.exchange_us if t.step else 0.0,
                    "reduce_us": t.step.reduce_us if t.step else 0.0,
                }
                for t in self.timings
            ],
        }


@dataclass(frozen=True)
class Row:
    """One line of the table: nccl-tests' columns plus the model's."""

    bytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    predicted_busbw_gbps: float
    algorithm: str

    @property
    def count(self) -> int:
        return self.bytes // TYPE_SIZE

    @property
    def efficiency(self) -> float:
        """Measured over predicted bus bandwidth (1.0 = as the model says)."""
        return self.busbw_gbps / self.predicted_busbw_gbps if self.predicted_busbw_gbps else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "count": self.count,
            "type": DTYPE,
            "time_us": round(self.time_us, 2),
            "algbw_gbps": round(self.algbw_gbps, 4),
            "busbw_gbps": round(self.busbw_gbps, 4),
            "predicted_busbw_gbps": round(self.predicted_busbw_gbps, 4),
            "efficiency": round(self.efficiency, 4),
            "algorithm": self.algorithm,
        }


def make_row(params: ModelParams, nbytes: int, time_us: float, step: RingStep | None = None) -> Row:
    """nccl-tests' arithmetic: algbw = bytes/time, busbw = algbw * 2(n-1)/n."""
    algbw = nbytes / (time_us * 1e3)
    expected = predict(params, nbytes, step)
    return Row(
        nbytes,
        time_us,
        algbw,
        algbw * busbw_factor(params.nranks),
        expected.busbw_gbps,
        expected.algorithm.value,
    )


@dataclass(frozen=True)
class BenchResult:
    backend: str
    params: ModelParams
    rows: tuple[Row, ...]
    probe: ProbeResult
    device: str = "cpu"

    @property
    def nproc(self) -> int:
        return self.params.nranks

    def large_rows(self, min_bytes: int = 1 << 20) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.bytes >= min_bytes)

    def median_efficiency(self, min_bytes: int = 1 << 20) -> float | None:
        """Median of measured/predicted over sizes of at least ``min_bytes`` (the issue's gate)."""
        rows = self.large_rows(min_bytes)
        return statistics.median(r.efficiency for r in rows) if rows else None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "backend": self.backend,
            "nproc": self.nproc,
            "device": self.device,
            "model": {**self.params.to_json(), "probe": self.probe.to_json()},
            "median_efficiency_1mib_up": self.median_efficiency(),
            "rows": [r.to_json() for r in self.rows],
        }


def build_result(measured: Measured, params: ModelParams) -> BenchResult:
    rows = tuple(make_row(params, t.bytes, t.time_us, t.step) for t in measured.timings)
    return BenchResult(measured.backend, params, rows, measured.probe, measured.device)
