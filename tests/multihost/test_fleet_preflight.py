"""The allocation's preflight on a real 6-host SLURM cluster: the odd host and the slow link.

One cluster for the module (``fakecluster``, its own names so it never meets the
3-host cluster of the triage tests) and one 6-node allocation (``sleep``) that every
test steps into. Host h4 reads an ``nccl.conf`` the others lack (a variable none of
them sets, a net plugin that is not there); host h6's link is rate-limited with
``tc qdisc ... tbf rate 200mbit`` on its veth. The sweep must name exactly those two,
with the right reasons; the benchmark must name h6 alone, within ceil(log2 6) + 1 = 4
rounds and a minute, and nobody once the limit is lifted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from clusterconf import ClusterNames
from fakecluster import Cluster, cluster_or_skip, sh

pytestmark = pytest.mark.slow

NAMES = ClusterNames(tag="fl", bridge="flbr0", subnet="10.201.0", ctld_port=6827, hosts=6)
ODD, SLOW = "h4", "h6"
RATE = "200mbit"


@dataclass
class Allocation:
    cluster: Cluster
    job: str

    @property
    def env(self) -> dict[str, str]:
        # every host reads /var/tmp/nccl.conf: its own /var/tmp (only h4 has one)
        return {**os.environ, **self.cluster.env, "NCCL_CONF_FILE": "/var/tmp/nccl.conf"}

    def preflight(self, *args: str, timeout: float = 150) -> tuple[dict, int, float, str]:
        argv = [sys.executable, "-m", "doctor", "preflight", *args]
        start = time.monotonic()
        done = subprocess.run(
            self.cluster.login(argv), capture_output=True, text=True, env=self.env, timeout=timeout
        )
        wall = time.monotonic() - start
        doc = json.loads(done.stdout) if done.stdout.startswith("{") else {}
        return doc, done.returncode, wall, done.stdout + done.stderr

    def slow_link(self, on: bool) -> None:
        dev = self.cluster.names.veth(int(SLOW[1:]))
        sh("tc", "qdisc", "del", "dev", dev, "root", check=False)
        if on:
            sh(
                "tc",
                "qdisc",
                "add",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                RATE,
                "burst",
                "64kb",
                "latency",
                "100ms",
            )


@pytest.fixture(scope="module")
def allocation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Allocation]:
    if not Path("/usr/sbin/tc").exists():
        pytest.skip("the slowed link needs tc (iproute2)")
    with cluster_or_skip(NAMES, tmp_path_factory.mktemp("fleet")) as cluster:
        conf = cluster.base / "hostfs" / ODD / "nccl.conf"
        conf.write_text("NCCL_NET_PLUGIN=/var/tmp/missing/libnccl-net-odd.so\nNCCL_IB_HCA=mlx5_0\n")
        job = cluster.sbatch("--wrap=sleep 900", "--ntasks-per-node=1", "--output=/dev/null")
        _wait_running(job)
        running = Allocation(cluster, job)
        running.slow_link(True)
        yield running


def _wait_running(job: str) -> None:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if sh("squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip() == "RUNNING":
            return
        time.sleep(0.2)
    raise AssertionError(f"allocation {job} did not start")


def test_sweep_and_bisection_name_the_odd_host_and_the_slow_link(allocation) -> None:
    # GIVEN the 6-node allocation, h4 with its own nccl.conf and h6 behind a 200 Mbit/s link
    # WHEN the allocation is preflighted through one srun step, with the benchmark
    doc, rc, wall, out = allocation.preflight("--job", allocation.job, "--json", "--bench")
    # THEN every host answered, and the hosts that differ are exactly h4, by the right facts
    assert doc.get("schema") == "nccl-doctor/fleet-preflight/v1", out
    assert doc["hosts"]["answered"] == 6, doc["hosts"]
    odd = {h for d in doc["differences"] for g in d["outliers"] for h in g["hosts"]}
    assert odd == {ODD}, doc["differences"]
    keys = {d["key"]: d for d in doc["differences"]}
    assert keys["env.NCCL_IB_HCA"]["outliers"][0]["value"] == "mlx5_0"
    assert keys["env.NCCL_NET_PLUGIN"]["outliers"][0]["hosts"] == [ODD]
    plugin = [d for d in doc["differences"] if d["kind"] == "finding" and d["severity"] == "fail"]
    assert plugin and plugin[0]["outliers"][0]["hosts"] == [ODD], doc["differences"]
    # AND the benchmark names h6 alone, in at most ceil(log2 6) + 1 rounds, under a minute
    bench = doc["bench"]
    assert [c["hosts"] for c in bench["culprits"]] == [[SLOW]], bench
    assert bench["round_count"] <= 4 and bench["wall_seconds"] < 60, bench
    measured = bench["culprits"][0]["measure"]
    assert SLOW in measured["hosts"] and measured["short"], measured
    assert measured["busbw_gbps"] < 0.5 * measured["predicted_gbps"], measured
    # AND the exit code fails the job, naming both for --exclude
    assert (rc, doc["exclude"]) == (1, [ODD, SLOW]), out


def test_clean_links_name_no_culprit_through_ssh(allocation) -> None:
    # GIVEN the same hosts with the rate limit lifted, reached by ssh
    from doctor.fleet.benchjudge import FleetBench, bench_findings
    from doctor.fleet.benchrun import run_bench

    allocation.slow_link(False)
    try:
        # WHEN the benchmark runs among them (the sweep's ssh route: the next test)
        found = run_bench(allocation.cluster.names.host_names, None, allocation.env)
    finally:
        allocation.slow_link(True)
    # THEN nobody is named and nothing fails: a first round short by a busy CPU is
    # searched and cleared by the pairs beside each other
    assert isinstance(found, FleetBench), found
    assert found.isolation.culprits == (), found.isolation
    assert not [f for f in bench_findings(found) if f.severity.value == "fail"], found


def test_bad_allocations_and_hosts_get_one_sentence(allocation) -> None:
    # GIVEN a job that holds no node yet, a job SLURM does not know, and an unknown host
    pending = allocation.cluster.sbatch("--wrap=true", "--begin=now+1hour", "--output=/dev/null")
    try:
        _doc, rc, _w, out = allocation.preflight("--job", pending)
    finally:
        allocation.cluster.scancel(pending)
    # THEN each is one sentence (exit 2), or, for the host, a fail finding with its reason
    assert rc == 2 and f"job {pending} holds no nodes (it is PENDING)" in out, out
    _doc, rc, _w, out = allocation.preflight("--job", "987654")
    assert rc == 2 and "SLURM knows no job '987654'" in out, out
    assert "Traceback" not in out
    doc, rc, wall, out = allocation.preflight(
        "--hosts", "h1,nosuchhost", "--json", "--timeout", "8"
    )
    assert rc == 1, out
    assert "nosuchhost" in doc["hosts"]["unreachable"], out
    assert "resolve" in doc["hosts"]["unreachable"]["nosuchhost"], doc["hosts"]
    assert wall < 8 + 25, (wall, out)  # the deadline, and the CLI's own start on a busy machine


def test_a_host_cut_off_ends_the_sweep_once_it_is_proven_unreachable(allocation) -> None:
    # GIVEN h5 of the allocation cut off from the network
    allocation.cluster.cut(5)
    try:
        # WHEN the allocation is preflighted with a deadline far longer than the sweep needs
        doc, rc, wall, out = allocation.preflight(
            "--job", allocation.job, "--json", "--timeout", "40"
        )
    finally:
        allocation.cluster.cut(5, connected=True)
    # THEN the others answered and h5 is named cut off, and the exit code fails the job
    assert doc["hosts"]["answered"] == 5, out
    assert "cut off" in doc["hosts"]["unreachable"]["h5"], doc["hosts"]
    assert rc == 1, out
    # AND the sweep ended once h5 was proven unreachable, not at the deadline (triage's
    # round: doctor.remote.reach.gather; the old sweep waited for srun until the deadline)
    assert wall < 40 - 10, (wall, out)
