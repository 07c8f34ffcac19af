"""NCCL's debug lines -> who is who, transport errors, bootstrap failures (recorded text)."""

from __future__ import annotations

from pathlib import Path

from doctor.evidence import Evidence
from doctor.logs import kinds, parse_lines
from doctor.logs.nccl import bus_id
from doctor.model import HangClass
from doctor.verdict.classify import classify

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
    # THEN it is a bootstrap failure, and so is its CUDA error (``Cuda failure 1 'invalid
    # argument'``: a call the machine refused, not GPU work that stopped)
    assert kinds.BOOTSTRAP in found and kinds.CUDA_ERROR not in found


def test_info_lines_about_configuration_are_not_failures() -> None:
    quiet = [
        "gpu-node-03:9120:9120 [2] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v8)",
        "jupyter:15833:15833 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).",
        "node:1:1 [0] NCCL INFO Channel 02/0 : 13[5] -> 5[5] [receive] via NET/IB/1/GDRDMA",
    ]
    assert kinds_of(quiet) == []


def test_a_truncated_message_is_a_size_mismatch_in_a_job_and_mixed_versions_at_bootstrap() -> None:
    # GIVEN the socket transport's truncation (NVIDIA/nccl#268, a TensorFlow job) and the
    # bootstrap's (NVIDIA/nccl#1176, at communicator creation), verbatim
    in_job = (
        "hvd1:2918:3333 [0] external/nccl_archive/src/transport/net_socket.cc:200 NCCL WARN "
        "NET/Socket : message truncated : receiving 696320 bytes instead of 32768"
    )
    at_start = (
        "0: compute-st-p4de24xlarge-1:34639:36718 [5] bootstrap.cc:77 NCCL WARN Message "
        "truncated : received 256 bytes instead of 4"
    )
    # THEN the first is ranks disagreeing on a collective's size (NCCL's own hint), with
    # the sizes said; the second a set-up failure, not the network either way
    assert kinds_of([in_job]) == [(kinds.MISMATCH_DETECTED, "")]
    assert kinds_of([at_start])[0][0] == kinds.BOOTSTRAP
    verdict = classify(Evidence("job", None, logs=tuple(parse_lines([in_job]))))
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert "696320 bytes" in verdict.summary and "NCCL_PROTO" in verdict.summary


def test_info_lines_of_configuration_are_read_by_nccl_s_parser_and_failures_by_all() -> None:
    # GIVEN NCCL_DEBUG=INFO lines: a ring's channel, a communicator's rank, a failure's return
    lines = [
        "node1:1:1 [0] NCCL INFO Channel 07/1 : 5[3] -> 6[3] [send] via NET/IB/3/GDRDMA",
        "node1:1:1 [0] NCCL INFO comm 0x5 rank 3 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE",
        "node1:1:1 [0] NCCL INFO Call to connect returned Connection refused, retrying",
        "node1:1:1 [0] NCCL INFO init.cc:1356 -> 6",
    ]
    # WHEN read THEN the channel says nothing, the rank is known, the retry is one, the
    # failure is set-up
    found = [[(e.kind, e.rank) for e in parse_lines([line])] for line in lines]
    assert found == [
        [],
        [(kinds.RANK_INFO, 3)],
        [(kinds.CONNECT_RETRY, None)],
        [(kinds.BOOTSTRAP, None)],
    ]
