"""Real multi-host hangs, triaged from the login node through SLURM and through ssh.

One gloo job, two ranks on each of three hosts (h1: ranks 0-1, h2: 2-3, h3: 4-5),
goes through its faults in order: healthy, a straggler, a rank stuck in its data
loader (and then its host cut off from the network), a rank holding the GIL, a
wrong collective, a rank whose process died. Every culprit lives on a host other
than the login node (which runs no rank at all), and every verdict must name the
class and the culprit ranks, by either transport.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow

CUT_TIMEOUT = 20
"""Far more than the round needs: it ends once h3 is proven unreachable (about 3 s on a
quiet machine), so the deadline only bounds a loaded one."""
VIA = (("slurm", ()), ("ssh", ("--hosts", "h[1-3]")))


def judge(phased_job, *args: str) -> list[tuple[str, list[int], dict]]:
    """The verdict of each transport, with the JSON for failure messages."""
    out = []
    for via, extra in VIA:
        doc, _wall, _rc = phased_job.triage("--via", via, *extra, *args)
        v = doc["verdict"]
        out.append((v["hang_class"], v["culprit_ranks"], doc))
    return out


def check(found, hang_class: str, culprits: list[int]) -> None:
    for got_class, got_culprits, doc in found:
        assert (got_class, got_culprits) == (hang_class, culprits), doc
        assert doc["collected"]["ranks_expected"] == 6
        assert {r["rank"]: r["host"] for r in doc["ranks"]} == {
            0: "h1",
            1: "h1",
            2: "h2",
            3: "h2",
            4: "h3",
            5: "h3",
        }, doc["ranks"]


def test_healthy_job(phased_job) -> None:
    # GIVEN the job running healthy on three hosts
    phased_job.enter("none")
    # WHEN it is triaged from the login node, through srun and through ssh
    found = judge(phased_job)
    # THEN both say healthy, every host answered, and ranks carry their real hosts
    check(found, "healthy", [])
    for _cls, _culprits, doc in found:
        assert [(h["host"], h["reached"], h["ranks"]) for h in doc["hosts"]] == [
            ("h1", True, [0, 1]),
            ("h2", True, [2, 3]),
            ("h3", True, [4, 5]),
        ]
        assert doc["collected"]["ended"] == "answered"


def test_collect_sends_a_small_versioned_document_from_each_host(phased_job) -> None:
    # GIVEN the running job WHEN each host's collect runs through one srun step
    from doctor.remote.document import SCHEMA
    from doctor.remote.reader import parse_document
    from doctor.remote.slurm import collect_via_srun
    from doctor.remote.transport import collect_argv

    env = {**os.environ, **phased_job.cluster.env}
    answers = collect_via_srun(
        phased_job.job, ["h1", "h2", "h3"], collect_argv(phased_job.job, 0.5, 8.0), 20, env
    )
    # THEN every host answers with a host-evidence/v1 document of its own two ranks,
    # a few tens of KiB at most
    for i, host in enumerate(["h1", "h2", "h3"]):
        text = answers[host].text
        assert text is not None, answers[host]
        assert f'"schema":"{SCHEMA}"' in text
        doc = parse_document(text)
        assert (doc.host, doc.local_ranks) == (host, (2 * i, 2 * i + 1))
        assert len(text) < 64 * 1024, len(text)
        print(f"{host}: host document {len(text) / 1024:.1f} KiB, {len(doc.classes)} classes")


def test_a_host_without_the_installation_is_named(phased_job) -> None:
    # GIVEN an interpreter path that does not exist on the hosts
    from doctor.remote.ssh import collect_via_ssh
    from doctor.remote.transport import collect_argv

    env = {**os.environ, **phased_job.cluster.env}
    argv = collect_argv(phased_job.job, 0.5, 4.0, python="/nonexistent/venv/bin/python")
    # WHEN collected over ssh
    answers = collect_via_ssh(["h2"], argv, 10, env)
    # THEN the host says so, instead of timing out
    assert answers["h2"].text is None
    assert "not installed" in answers["h2"].reason, answers["h2"]


def test_straggler_on_another_host(phased_job) -> None:
    # GIVEN rank 3 (on h2) late in its data loader every step
    phased_job.enter("straggler", 3)
    # WHEN triaged (a straggler is seen in samples: under heavy load a look may miss it,
    # so a transport gets a second look; the verdict must then name rank 3)
    # A 2 s window: several steps of the late rank in every look, so progress is measured.
    found = judge(phased_job, "--interval", "2")
    for i, (cls, _culprits, _doc) in enumerate(found):
        if cls != "straggler":
            again = phased_job.triage("--via", VIA[i][0], *VIA[i][1], "--interval", "2")
            again = again[0]["verdict"]
            found[i] = (again["hang_class"], again["culprit_ranks"], found[i][2])
    # THEN it is the straggler
    check(found, "straggler", [3])


def test_rank_stuck_in_its_data_loader(phased_job) -> None:
    # GIVEN rank 4 (on h3) blocked in its data loader while the others all_reduce
    phased_job.enter("dataloader", 4)
    # WHEN triaged; THEN cpu_stuck names rank 4
    found = judge(phased_job)
    check(found, "cpu_stuck", [4])
    assert "data loader" in found[0][2]["verdict"]["summary"]


def test_a_launched_job_is_found_through_its_shared_directory(phased_job) -> None:
    # GIVEN rank 4 stuck, and only the launch id and the shared job directory known
    phased_job.enter("dataloader", 4)
    env = {"NCCL_DOCTOR_JOB_DIR": str(phased_job.job_dir)}
    # WHEN triaged by the launch id (no --hosts, no --via: the rank records name the hosts)
    doc, _wall, rc = phased_job.triage(job=phased_job.launch_id, env=env)
    # THEN every host was reached (by ssh: SLURM does not know that id) and rank 4 named
    v = doc["verdict"]
    assert (v["hang_class"], v["culprit_ranks"], rc) == ("cpu_stuck", [4], 1), doc
    assert [(h["host"], h["reached"]) for h in doc["hosts"]] == [
        ("h1", True),
        ("h2", True),
        ("h3", True),
    ], doc["hosts"]
    # AND the in-rank agents' Flight Recorder dumps were aligned across the hosts
    assert any(4 in g["culprits"] for g in doc["groups"]), doc["groups"]


def test_host_cut_off_while_its_ranks_hang(phased_job) -> None:
    # GIVEN rank 4 still stuck, and its host h3 cut off from the network
    phased_job.enter("dataloader", 4)
    phased_job.cluster.cut(3)
    try:
        # WHEN triaged with a deadline far longer than the round needs
        found = [
            (via, *phased_job.triage("--via", via, *extra, "--timeout", str(CUT_TIMEOUT)))
            for via, extra in VIA
        ]
    finally:
        phased_job.cluster.cut(3, connected=True)
    for via, doc, wall, rc in found:
        # THEN the verdict still comes, within the deadline, and names h3's ranks as culprits
        v = doc["verdict"]
        assert (v["hang_class"], v["culprit_ranks"]) == ("network", [4, 5]), (via, doc)
        assert rc == 1
        assert doc["collected"]["seconds"] <= CUT_TIMEOUT + 0.5, doc["collected"]
        # AND the round ended once h3 was proven unreachable, not at the deadline (issue 26:
        # the figure, within 5 s of invocation, is bench_multihost_triage.py's)
        assert doc["collected"]["ended"] == "unreachable", (via, doc["collected"], doc["hosts"])
        assert wall < CUT_TIMEOUT + 5, "the command (with interpreter start-up) overran"
        h3 = next(h for h in doc["hosts"] if h["host"] == "h3")
        assert (h3["reached"], h3["ranks"]) == (False, [4, 5]), doc["hosts"]
        assert "cut off" in h3["reason"]
        states = {r["rank"]: r["state"] for r in doc["ranks"]}
        assert states[4] == states[5] == "unreached"
        assert doc["collected"]["ranks_found"] == 4


def test_rank_holding_the_gil(phased_job) -> None:
    # GIVEN rank 2 (on h2) spinning in pure Python, the GIL held
    phased_job.enter("gil", 2)
    # WHEN triaged; THEN cpu_stuck names rank 2 and says why
    found = judge(phased_job)
    check(found, "cpu_stuck", [2])
    assert all("GIL" in doc["verdict"]["summary"] for *_x, doc in found)


def test_wrong_collective(phased_job) -> None:
    # GIVEN rank 5 (on h3) calling all_gather where the others all_reduce (for good)
    phased_job.enter("wrong-collective", 5)
    # WHEN triaged; THEN collective_mismatch names rank 5
    check(judge(phased_job), "collective_mismatch", [5])


def test_rank_whose_process_died(phased_job) -> None:
    # GIVEN the job hung (wrong collective), and then rank 1 (on h1) killed
    phased_job.enter("wrong-collective", 5)
    phased_job.cluster.kill_rank(phased_job.job, 1)
    # WHEN triaged; THEN rank_loss names rank 1, missing on h1
    found = judge(phased_job)
    check(found, "rank_loss", [1])
    for *_x, doc in found:
        rank1 = next(r for r in doc["ranks"] if r["rank"] == 1)
        assert (rank1["alive"], rank1["state"]) == (False, "missing")
