"""The host document a real H200 host sent for a fleet preflight (recorded, see README.txt).

The fleet tests' other documents are emulated; this one carries facts only a GPU host has
(NVML's model, driver and counters), read back and merged as the sweep does.
"""

from __future__ import annotations

import json
from pathlib import Path

from fleet_helpers import results

from doctor.fleet.hostdoc import read_document
from doctor.fleet.merge import exclude_list, merge_fleet
from doctor.remote.frames import Reassembler

RECORDED = Path(__file__).parents[1] / "fixtures" / "gpu" / "h200" / "fleet-host.txt"


def recorded_text() -> str:
    """The document, put back together from the tagged lines the host printed."""
    frames = Reassembler()
    done = [h for line in RECORDED.read_text().splitlines() if (h := frames.feed(line))]
    assert done == ["vm"]  # the microVM's own name
    return frames.done["vm"]


def test_the_h200_document_reads_back_with_its_gpu_facts() -> None:
    doc = read_document(recorded_text(), "gpu01")
    assert doc.facts["gpu.models"] == "NVIDIA H200"
    assert doc.facts["gpu.count"] == "1"
    assert doc.facts["gpu.driver"] == doc.facts["version.driver"] == "580.159.04"
    assert doc.facts["version.nccl"] == "2.28.9"
    assert doc.facts["gpu.ecc-uncorrected"] == "0"


def test_a_host_whose_driver_and_ecc_differ_is_the_one_named() -> None:
    # GIVEN five copies of the real H200 document, one with another driver and ECC errors
    real = recorded_text()
    odd = json.loads(real)
    odd["facts"].update({"gpu.driver": "570.86.15", "gpu.ecc-uncorrected": "3"})
    texts = {f"gpu{i:02d}": real for i in range(1, 6)}
    texts["gpu04"] = json.dumps(odd)
    # WHEN merged
    report = merge_fleet(list(texts), results(texts))
    # THEN gpu04 alone differs, by those two facts, and nothing holds of the others
    named = {h for d in report.differences for g in d.outliers for h in g.hosts}
    assert named == {"gpu04"}
    assert {d.key for d in report.differences} == {"gpu.driver", "gpu.ecc-uncorrected"}
    assert exclude_list(report, strict=True) == ("gpu04",)
