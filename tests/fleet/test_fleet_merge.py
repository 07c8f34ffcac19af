"""The fleet merge, the MAD outliers, the bisection and the table, on emulated host documents."""

from __future__ import annotations

import io
import json
import math
import re

import pytest
from clitools import clean_env, run_cli
from fleet_helpers import NOW, fleet, host_text, results
from rich.console import Console

from doctor.errors import NoSuchJobError, UsageError
from doctor.fleet.benchjudge import FleetBench, bench_findings
from doctor.fleet.bisect import Measure, isolate
from doctor.fleet.hostdoc import read_document
from doctor.fleet.merge import exclude_list, merge_fleet
from doctor.fleet.outliers import low_outliers
from doctor.fleet.render import fleet_renderable, to_json
from doctor.fleet.sweep import check_allocation
from doctor.gpu.nvml import Fleet, GpuState
from doctor.model import Severity
from doctor.remote.document import DocumentError
from doctor.remote.slurm import SlurmJob


def test_identical_hosts_hold_everywhere_and_differ_nowhere():
    # GIVEN six hosts with the same preflight
    texts = fleet(6)
    # WHEN merged
    report = merge_fleet(list(texts), results(texts))
    # THEN every finding holds everywhere once, nothing differs, nobody is excluded
    assert report.differences == ()
    assert len(report.everywhere) == len(read_document(texts["node0001"], "x").findings)
    assert exclude_list(report, strict=True) == ()


def test_odd_env_host_is_named_by_finding_and_by_fact():
    # GIVEN one host of six with a variable the others lack and a net plugin that is missing
    odd = host_text(
        "node0004", {"NCCL_NET_PLUGIN": "/opt/missing/libnccl-net-ofi.so", "NCCL_ALGOS": "x"}
    )
    texts = fleet(6, {"node0004": odd})
    # WHEN merged
    report = merge_fleet(list(texts), results(texts))
    # THEN node0004 alone differs: the plugin check fails there, and its env facts differ
    odd_hosts = {h for d in report.differences for g in d.outliers for h in g.hosts}
    assert odd_hosts == {"node0004"}
    keys = {(d.kind, d.key, d.severity) for d in report.differences}
    assert ("fact", "env.NCCL_NET_PLUGIN", Severity.WARN) in keys
    assert ("fact", "env.NCCL_ALGOS", Severity.WARN) in keys
    plugin = [d for d in report.differences if d.kind == "finding" and d.key.startswith("plugin.")]
    assert plugin and plugin[0].severity is Severity.FAIL, report.differences
    assert plugin[0].outliers[0].hosts == ("node0004",)
    # AND it is the one host to exclude (the env facts alone only under --strict)
    assert exclude_list(report, strict=False) == ("node0004",)


def test_versions_gpus_and_clock_differences():
    # GIVEN hosts with another torch, one GPU fewer (one lost) and a clock 5 minutes ahead
    seven = Fleet(
        gpus=tuple(GpuState(i, "NVIDIA H100 80GB HBM3") for i in range(7)), driver="570.86"
    )
    texts = fleet(
        8,
        {
            "node0002": host_text("node0002", torch="2.12.0+cu128"),
            "node0005": host_text("node0005", fleet=seven),
            "node0007": host_text("node0007", clock=NOW + 300),
        },
    )
    # WHEN merged (each host answered within NOW-1 .. NOW+1 by the login node's clock)
    report = merge_fleet(list(texts), results(texts))
    # THEN each is named by its fact, against the value of the other hosts
    by_key = {d.key: d for d in report.differences if d.kind == "fact"}
    assert by_key["version.torch"].outliers[0].hosts == ("node0002",)
    assert by_key["version.torch"].norm.value == "2.13.0+cu130"
    assert by_key["gpu.count"].outliers[0].hosts == ("node0005",)
    assert by_key["gpu.count"].outliers[0].value == "7"
    assert by_key["clock.offset"].outliers[0].hosts == ("node0007",)
    assert report.clock_offsets["node0007"] == pytest.approx(299.0)
    assert report.clock_offsets["node0001"] == 0


def test_unreachable_hosts_are_fail_findings_grouped_by_reason():
    # GIVEN 4 hosts of which two never answered for one reason and one sent garbage
    texts = fleet(2)
    got = results(texts)
    from doctor.fleet.merge import HostResult

    for h in ("node0003", "node0004"):
        got[h] = HostResult(h, None, "cannot connect to {h}:22 (timed out): cut off")
    # WHEN merged
    report = merge_fleet(["node0001", "node0002", "node0003", "node0004"], got)
    # THEN one fail finding names both hosts with the reason, and both are excluded
    found = [f for f in report.findings if f.check == "fleet.unreachable"]
    assert [(f.severity, f.subject) for f in found] == [(Severity.FAIL, "node[0003-0004]")]
    assert exclude_list(report, strict=False) == ("node0003", "node0004")


def test_a_document_from_another_machine_is_checked():
    # GIVEN documents that are not host preflights WHEN read THEN each is refused with why
    good = json.loads(host_text("h1"))
    for bad, why in [
        ("[]", "not nccl-doctor/host-preflight/v1"),
        ("{", "not JSON"),
        (json.dumps({**good, "clock": "soon"}), "'clock'"),
        (json.dumps({**good, "facts": {"a": 1}}), "not a string"),
        (json.dumps({**good, "findings": [{"severity": "dire"}]}), "unknown severity"),
        ("x" * 300_000, "larger than"),
    ]:
        with pytest.raises(DocumentError, match=why):
            read_document(bad, "h1")


def test_the_table_stays_short_at_many_hosts():
    # GIVEN 600 hosts of which three differ (the benchmark runs 2,000)
    odd = {
        "node0010": host_text("node0010", {"NCCL_IB_HCA": "mlx5_9"}),
        "node0300": host_text("node0300", torch="2.12.0"),
        "node0599": host_text("node0599", clock=NOW - 120),
    }
    texts = fleet(600, odd)
    report = merge_fleet(list(texts), results(texts))
    # WHEN printed
    out = io.StringIO()
    Console(file=out, width=140).print(fleet_renderable(report))
    text = out.getvalue()
    # THEN it names the three hosts, counts the rest, and stays within 30 lines
    assert len(text.splitlines()) <= 30, text
    assert "3 differ (node[0010,0300,0599]), 597 agree on everything" in text
    doc = to_json(report)
    assert doc["schema"] == "nccl-doctor/fleet-preflight/v1"
    assert doc["hosts"]["nodes"] == "node[0001-0600]"


def test_mad_outliers_name_the_slow_host_and_nobody_on_a_uniform_fleet():
    # GIVEN per-host link figures: one host at a tenth, the others within 10 %
    figures = {f"h{i}": 1.0 + 0.02 * (i % 5) for i in range(1, 7)}
    # WHEN judged THEN only the slow host is an outlier, and a clean fleet has none
    assert low_outliers({**figures, "h4": 0.1}) == ["h4"]
    assert low_outliers(figures) == []
    assert low_outliers({"h1": 1.0, "h2": 0.1}) == []  # too few hosts to tell


def oracle_for(slow: set[str], calls: list[list[tuple[str, ...]]]):
    """A round's measure: a group is short when it holds a slow host."""

    def measure(groups):
        calls.append(list(groups))
        return {g: Measure(g, 0.02 if slow & set(g) else 0.9, 1.0) for g in groups}

    return measure


@pytest.mark.parametrize("n", [4, 6, 8, 13, 64, 500])
def test_bisection_finds_any_one_slow_host_within_the_bound(n):
    hosts = [f"h{i}" for i in range(1, n + 1)]
    bound = math.ceil(math.log2(n)) + 1
    for slow in {hosts[0], hosts[n // 2], hosts[-1], hosts[n // 3]}:
        # GIVEN one slow host WHEN isolated
        calls: list = []
        iso = isolate(hosts, oracle_for({slow}, calls))
        # THEN exactly that host, within ceil(log2 N) + 1 rounds, each round disjoint groups
        assert [c.hosts for c in iso.culprits] == [(slow,)], (slow, calls)
        assert len(iso.rounds) <= bound, (slow, len(iso.rounds))
        for groups in calls:
            flat = [h for g in groups for h in g]
            assert len(flat) == len(set(flat)) and all(len(g) >= 2 for g in groups)


def test_bisection_names_nobody_on_a_clean_fleet_and_two_slow_hosts_when_two():
    hosts = [f"h{i}" for i in range(1, 7)]
    # GIVEN a clean fleet THEN one round, no culprit
    clean = isolate(hosts, oracle_for(set(), []))
    assert (len(clean.rounds), clean.culprits) == (1, ())
    # GIVEN two slow hosts THEN both are named
    two = isolate(hosts, oracle_for({"h2", "h5"}, []))
    assert sorted(h for c in two.culprits for h in c.hosts) == ["h2", "h5"]


def test_noise_in_the_first_round_names_no_false_culprit():
    # GIVEN a first round short by chance, every later round clean
    def noisy(groups):
        return {g: Measure(g, 0.3 if len(g) == 6 else 0.9, 1.0) for g in groups}

    iso = isolate([f"h{i}" for i in range(1, 7)], noisy)
    # THEN nobody is named; the findings say it was inconclusive
    assert iso.culprits == ()
    bench = FleetBench(iso, 4 << 20, (1.0, 1.0))
    assert [f.severity for f in bench_findings(bench) if f.check == "fleet.bench-culprit"] == [
        Severity.WARN
    ]


def test_an_allocation_that_cannot_be_swept_is_one_sentence():
    with pytest.raises(NoSuchJobError, match="SLURM knows no job '77'"):
        check_allocation("77", None, 1000)
    with pytest.raises(UsageError, match="belongs to uid 0, not to you"):
        check_allocation("5", SlurmJob("5", "RUNNING", ("h1",), 0), 1000)
    with pytest.raises(UsageError, match="holds no nodes \\(it is PENDING\\)"):
        check_allocation("6", SlurmJob("6", "PENDING", (), 1000), 1000)
    assert check_allocation("7", SlurmJob("7", "RUNNING", ("h1", "h2"), 1000), 1000) == ("h1", "h2")


def test_a_round_slow_for_every_group_names_nobody():
    # GIVEN a fleet whose every group measures at 30 % of the model (a busy CPU)
    iso = isolate([f"h{i}" for i in range(1, 7)], lambda gs: {g: Measure(g, 0.3, 1.0) for g in gs})
    # WHEN searched THEN the pairs, all equally slow beside each other, name nobody
    assert iso.culprits == () and len(iso.rounds) == 2, iso
    assert iso.inconclusive == (tuple(f"h{i}" for i in range(1, 7)),)


def test_the_benchmark_document_reads_back_and_refuses_garbage():
    # GIVEN the outcome rank 0 sends WHEN read back THEN the same findings come out
    from doctor.fleet.benchjudge import bench_from_json, bench_json

    iso = isolate([f"h{i}" for i in range(1, 7)], oracle_for({"h6"}, []))
    bench = FleetBench(iso, 4 << 20, (1.0, 2.0, 3.0), {"h1": {"link_gbps": 1.0}})
    again = bench_from_json(json.loads(json.dumps(bench_json(bench))))
    assert bench_findings(again) == bench_findings(bench)
    for bad in [{}, {**bench_json(bench), "culprits": [{"hosts": ["-oProxy=x"]}]}]:
        with pytest.raises(DocumentError):
            bench_from_json(bad)


def test_every_fleet_check_id_has_its_playbook():
    # GIVEN the ids the fleet emits WHEN their playbook is looked up
    from doctor import playbooks

    ids = {"fleet.differs", "fleet.unreachable", "fleet.bench", "fleet.bench-culprit"}
    ids |= {"fleet.link-outlier"}
    text = playbooks.load("fleet")
    # THEN each resolves to fleet.md, which names it, under the fixed headings
    assert {playbooks.resolve(i) for i in ids} == {"fleet"}
    assert all(f"`{i}`" in text for i in ids)
    assert tuple(re.findall(r"^## (.+)$", text, re.M)) == playbooks.HEADINGS


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (("--hosts", "h1", "--emit-env"), "--emit-env is for one host"),
        (("--via", "slurm", "--hosts", "h1"), "--via slurm needs --job ID"),
    ],
)
def test_bad_fleet_flags_are_one_sentence(args, sentence):
    # GIVEN flags that cannot name a fleet WHEN preflight runs THEN exit 2 and one sentence
    done = run_cli("preflight", *args, env=clean_env())
    assert done.returncode == 2 and sentence in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
