"""Host documents -> one Evidence -> one verdict: found, lost and unreached ranks."""

from __future__ import annotations

import json
from dataclasses import replace

from triage_helpers import hung_evidence, recorded_stack

from doctor.analyze.format import write_bundle
from doctor.analyze.load import load_evidence
from doctor.evidence import UNREACHED, Evidence
from doctor.remote.document import to_document
from doctor.remote.merge import merge
from doctor.remote.transport import HostAnswer
from doctor.verdict.classify import analyse, classify
from doctor.verdict.render import to_json

HOSTS = ["h1", "h2", "h3"]


def host_answers(fault: str, silent: dict[str, str] = {}) -> dict[str, HostAnswer]:  # noqa: B006
    """A 6-rank job, 2 ranks per host, each host's slice of a recorded 4-rank fault."""
    stacks = [recorded_stack(fault, min(r, 3) if r != 2 else 2) for r in range(6)]
    stacks = [replace(s, rank=r) for r, s in enumerate(stacks)]
    whole = hung_evidence(stacks, world=6)
    answers = {}
    for i, host in enumerate(HOSTS):
        mine = {2 * i, 2 * i + 1}
        if host in silent:
            answers[host] = HostAnswer(host, None, None, silent[host])
            continue
        part = Evidence(
            "7",
            6,
            processes=tuple(p for p in whole.processes if p.rank in mine),
            stacks=tuple(s for s in whole.stacks if s.rank in mine),
            progress=tuple(s for s in whole.progress if s.rank in mine),
        )
        text = json.dumps(to_document(part, host, 6, sorted(mine)))
        answers[host] = HostAnswer(host, text, 1.5)
    return answers


def test_hosts_merge_into_one_verdict_naming_the_culprit_on_another_host() -> None:
    # GIVEN rank 2 (on h2) in its data loader while the others wait
    evidence = merge("7", HOSTS, host_answers("dataloader"), 2.0)
    # WHEN judged once
    verdict = classify(evidence)
    # THEN the same classifier that judges one host names rank 2, and ranks carry hosts
    assert (verdict.hang_class.value, verdict.culprit_ranks) == ("cpu_stuck", (2,))
    doc = to_json(evidence, analyse(evidence))
    assert [(r["rank"], r["host"]) for r in doc["ranks"]] == [
        (0, "h1"),
        (1, "h1"),
        (2, "h2"),
        (3, "h2"),
        (4, "h3"),
        (5, "h3"),
    ]
    assert [(h["host"], h["reached"], h["ranks"]) for h in doc["hosts"]] == [
        ("h1", True, [0, 1]),
        ("h2", True, [2, 3]),
        ("h3", True, [4, 5]),
    ]
    # AND the stack tree shows where rank 2 parts from the others
    tree = doc["stack_tree"]
    assert tree["count"] == 6 and {b["ranks"] for b in tree["branches"]} == {"2", "0-1,3-5"}


def test_a_silent_host_is_evidence_its_ranks_the_culprits() -> None:
    # GIVEN every readable rank waiting (healthy stacks of a hung collective), h3 silent
    answers = host_answers(
        "wrong-collective", {"h3": "cannot connect to h3:22 (timed out): cut off"}
    )
    answers = {h: a for h, a in answers.items()}
    evidence = merge("7", HOSTS, answers, 5.0)
    # WHEN judged, the readable ranks all waiting in one collective
    evidence = replace(
        evidence,
        stacks=tuple(
            replace(s, threads=recorded_stack("dataloader", 0).threads) for s in evidence.stacks
        ),
    )
    verdict = classify(evidence)
    # THEN h3's ranks are accounted for as unreached, and named as the culprits
    procs = {p.rank: p for p in evidence.processes}
    assert [procs[r].status for r in (4, 5)] == [UNREACHED, UNREACHED]
    assert all(procs[r].host == "h3" for r in (4, 5))
    assert (verdict.hang_class.value, verdict.culprit_ranks) == ("network", (4, 5))
    assert "h3" in verdict.summary
    doc = to_json(evidence, analyse(evidence))
    assert doc["collected"]["ranks_found"] == 4
    assert any(s["probe"] == "host" and "ranks 4-5 unread" in s["reason"] for s in doc["skipped"])


def test_a_rank_gone_from_a_reached_host_is_lost_there() -> None:
    # GIVEN h1 answering with rank 0 only (rank 1 died and was reaped)
    answers = host_answers("dataloader")
    doc = json.loads(answers["h1"].text)
    doc["processes"] = [p for p in doc["processes"] if p["rank"] == 0]
    for c in doc["classes"]:
        c["ranks"] = [r for r in c["ranks"] if r == 0]
    doc["classes"] = [c for c in doc["classes"] if c["ranks"]]
    answers["h1"] = HostAnswer("h1", json.dumps(doc), 1.0)
    # WHEN merged
    evidence = merge("7", HOSTS, answers, 2.0)
    # THEN rank 1 is lost on h1 (its host said it holds it), not on an unreached host
    lost = next(p for p in evidence.processes if p.rank == 1)
    assert (lost.alive, lost.status, lost.host) == (False, "missing", "h1")
    assert classify(evidence).hang_class.value == "rank_loss"


def test_a_bundle_of_a_multi_host_triage_gives_the_same_verdict(tmp_path) -> None:
    # GIVEN a merged multi-host evidence and its verdict, bundled with every host document
    answers = host_answers("dataloader")
    evidence = merge("7", HOSTS, answers, 2.0)
    verdict = classify(evidence)
    out = write_bundle(
        tmp_path / "b.tar.gz",
        evidence,
        verdict,
        hosts={h: a.text.encode() for h, a in answers.items() if a.text},
    )
    # WHEN analyze reads it back
    again = load_evidence([out])
    # THEN the verdict and the hosts are the same
    assert classify(again) == verdict
    assert again.hosts == evidence.hosts
    import tarfile

    with tarfile.open(out) as tar:
        assert {m.name for m in tar if m.name.startswith("hosts/")} == {
            "hosts/h1.json",
            "hosts/h2.json",
            "hosts/h3.json",
        }


def test_the_tui_shows_hosts_groups_by_host_and_names_unreached_ones() -> None:
    # GIVEN a multi-host snapshot whose host h3 did not answer
    import time

    from doctor.triage.snapshot import TriageSnapshot
    from doctor.triage.tui.view import rank_rows, stack_groups
    from doctor.triage.tui.widgets.stack_groups import render_groups

    answers = host_answers("dataloader", {"h3": "cannot connect to h3:22 (timed out): cut off"})
    evidence = merge("7", HOSTS, answers, 5.0)
    snapshot = TriageSnapshot(evidence, analyse(evidence), time.time())
    # WHEN the TUI's views are built
    rows = {r.rank: r for r in rank_rows(snapshot)}
    groups = stack_groups(snapshot)
    # THEN the host column holds the real hosts, h3's ranks read "unreached" ...
    assert [rows[r].host for r in range(6)] == ["h1", "h1", "h2", "h2", "h3", "h3"]
    assert rows[4].state == rows[5].state == "unreached"
    # ... groups say which hosts their ranks are on, and why h3's could not be read
    silent = next(g for g in groups if g.ranks == (4, 5))
    assert silent.hosts == "h3" and "host h3 not reached: cannot connect" in silent.note
    text = render_groups(groups, None).plain
    assert "on h3" in text and "on h[1-2]" in text
