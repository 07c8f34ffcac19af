"""The ssh transport (ClusterShell) against a stand-in ssh client (``NCCL_DOCTOR_SSH``).

Real sshd on real (namespaced) hosts is ``tests/multihost``; this pins the deadline,
the bounded fan-out and the reasons without a cluster.
"""

from __future__ import annotations

import threading
import time

from fake_ssh import fake_ssh

from doctor.remote.ssh import collect_via_ssh


def test_each_host_answers_or_says_why_within_the_deadline(tmp_path) -> None:
    # GIVEN four hosts: one answers, one hangs, one refuses the key, one lacks nccl-doctor
    env = fake_ssh(tmp_path)
    hosts = ["good1", "slow1", "nokey1", "bare1"]
    threads = threading.active_count()
    # WHEN collected with a 2 s deadline
    start = time.monotonic()
    answers = collect_via_ssh(hosts, ["collect"], 2.0, env)
    # THEN it returns by the deadline, and every host has its document or its reason
    assert time.monotonic() - start < 3.0
    assert answers["good1"].text == '{"ok": true}' and answers["good1"].seconds is not None
    assert answers["slow1"].text is None and "no answer within 2s" in answers["slow1"].reason
    assert "refused the login" in answers["nokey1"].reason
    assert "not installed" in answers["bare1"].reason
    # AND the ClusterShell task's thread is gone (a TUI calls this every few seconds)
    time.sleep(0.3)
    assert threading.active_count() <= threads


def test_the_fan_out_is_bounded(tmp_path) -> None:
    # GIVEN 40 hosts and a fan-out of 8 WHEN collected
    env = fake_ssh(tmp_path)
    hosts = [f"good{i}" for i in range(40)]
    answers = collect_via_ssh(hosts, ["collect"], 20.0, env, fanout=8)
    # THEN all answer, and never more than 8 ssh ran at once
    assert all(a.text == '{"ok": true}' for a in answers.values())
    running, most = 0, 0
    for mark in (tmp_path / "log").read_text().split():
        running += 1 if mark == "+" else -1
        most = max(most, running)
    assert 1 < most <= 8


def test_the_caller_ends_the_wait_early(tmp_path) -> None:
    # GIVEN one host that answers and one that never does
    env = fake_ssh(tmp_path)
    answered: list[str] = []
    # WHEN the caller says nothing more can come once the first has answered
    start = time.monotonic()
    answers = collect_via_ssh(
        ["good1", "slow1"],
        ["collect"],
        20.0,
        env,
        on_answer=answered.append,
        stop=lambda: bool(answered),
    )
    # THEN the wait ends then, not at the 20 s deadline, and the silent host says so
    assert time.monotonic() - start < 10
    assert answers["good1"].text == '{"ok": true}'
    assert answers["slow1"].reason.startswith("no answer when the round ended, after ")
