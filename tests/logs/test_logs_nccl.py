"""NCCL's debug lines -> who is who, transport errors, bootstrap failures (recorded text)."""

from __future__ import annotations

from pathlib import Path

from doctor.logs import kinds, parse_lines
from doctor.logs.nccl import bus_id

REAL = Path(__file__).parents[1] / "fixtures" / "real"
TRIAGE_LOGS = Path(__file__).parents[1] / "triage" / "data" / "logs"


def kinds_of(lines: list[str]) -> list[tuple[str, str]]:
    return [(e.kind, e.peer) for e in parse_lines(lines)]


def test_communicator_init_ties_a_process_to_its_rank_and_gpu() -> None:
    events = parse_lines(
        [
            "node-3:4242:4242 [3] NCCL INFO comm 0x55d1c0 rank 11 nranks 16 cudaDev 3 "
            "nvmlDev 3 busId 4d000 commId 0x9a1f - Init COMPLETE",
            "node-3:4242:4242 [3] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>",
        ]
    )
    init, address = events
    assert (init.kind, init.rank, init.nranks, init.device, init.host, init.pid) == (
        kinds.RANK_INFO,
        11,
        16,
        "0000:4d:00",
        "node-3",
        4242,
    )
    assert (address.kind, address.peer) == (kinds.RANK_INFO, "10.0.0.3")
    assert bus_id("1b000") == "0000:1b:00" and bus_id("11b000") == "0001:1b:00"


def test_transport_errors_keep_the_peer_they_name() -> None:
    recorded = (TRIAGE_LOGS / "network_nccl.log").read_text().splitlines()
    assert kinds_of(recorded) == [(kinds.NETWORK, "10.12.0.23<54201>")]
    issue_426 = (REAL / "nccl-426-roce-error12-gid-index" / "output.log").read_text()
    assert [k for k, _ in kinds_of(issue_426.splitlines())] == [kinds.NETWORK]
    # AND a connection the other side closed is kept apart from a link error
    gone = "node-1:77:90 [2] NCCL WARN Net : Connection closed by remote peer node-2<56978>"
    assert kinds_of([gone]) == [(kinds.PEER_GONE, "node-2<56978>")]


def test_bootstrap_failures_from_real_threads() -> None:
    for case in (
        "nccl-210-no-ip-interface",
        "nccl-1837-socket-ifname-missing",
        "nccl-342-docker-shm-size",
        "pytorch-ci-infra-490-dev-shm",
    ):
        text = (REAL / case / "output.log").read_text()
        assert kinds.BOOTSTRAP in {k for k, _ in kinds_of(text.splitlines())}, case


def test_an_error_returned_through_init_is_a_communicator_creation_failure() -> None:
    # GIVEN NCCL's error return path of a CUDA failure in NVLS setup (issue 1488)
    text = (REAL / "nccl-1488-nvls-fm-restart" / "output.log").read_text().splitlines()
    found = {k for k, _ in kinds_of(text)}
    # THEN it is a bootstrap failure (the CUDA error is kept too)
    assert {kinds.BOOTSTRAP, kinds.CUDA_ERROR} <= found


def test_info_lines_about_configuration_are_not_failures() -> None:
    quiet = [
        "gpu-node-03:9120:9120 [2] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v8)",
        "jupyter:15833:15833 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).",
        "node:1:1 [0] NCCL INFO Channel 02/0 : 13[5] -> 5[5] [receive] via NET/IB/1/GDRDMA",
    ]
    assert kinds_of(quiet) == []
