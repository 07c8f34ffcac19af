"""When a multi-host round ends: the pure rules, the watch that applies them, and one
round through a stand-in ssh (``tests/remote/test_remote_ssh.py``'s) with real probes.

The lost host within 5 s (issue 26): a round must not wait for a deadline that can no
longer bring anything, and must not lose a host that is only slow or answers late.
"""

from __future__ import annotations

import time

import pytest
from fake_ssh import fake_ssh

from doctor.remote.ending import PROBE_S, QUIET_S, Ending, Watch, ending, over, probe_due
from doctor.remote.reach import Via, gather

HOSTS = ("h1", "h2", "h3")


def test_the_probe_waits_for_the_answers_to_stop_coming() -> None:
    # GIVEN a round whose last answer came at t=2 and whose probe would start at t=5
    # THEN not while answers may still be arriving, but QUIET_S after the last one
    assert not probe_due(2.0 + QUIET_S / 2, 2.0, 5.0)
    assert probe_due(2.0 + QUIET_S + 1e-6, 2.0, 5.0)
    # AND with no answer at all, only in the deadline's last PROBE_S (as before)
    assert not probe_due(4.9, None, 5.0)
    assert probe_due(5.0, None, 5.0)


@pytest.mark.parametrize(
    ("answered", "unreachable", "deadline", "want"),
    [
        (HOSTS, (), False, Ending.ANSWERED),
        (HOSTS, (), True, Ending.ANSWERED),  # the last answer just in time
        (("h1", "h2"), ("h3",), False, Ending.UNREACHABLE),
        (("h1", "h2"), ("h3",), True, Ending.DEADLINE),  # proven too late to end early
        (("h1",), ("h3",), True, Ending.DEADLINE),  # h2 silent, not proven unreachable
        (("h1",), ("h3",), False, Ending.TRANSPORT),  # e.g. ssh refused h2's login
        ((), HOSTS, False, Ending.UNREACHABLE),
    ],
)
def test_why_a_round_ended(answered, unreachable, deadline, want) -> None:
    assert ending(HOSTS, answered, unreachable, deadline) is want


def test_a_round_is_over_only_when_every_host_answered_or_was_proven_unreachable() -> None:
    assert over(HOSTS, HOSTS, ())
    assert over(HOSTS, ("h1", "h2"), ("h3",))
    assert not over(HOSTS, ("h1", "h2"), ())  # h3 silent, not probed (or it takes connections)
    assert over(HOSTS, ("h1", "h2", "h3"), ("h3",))  # proven unreachable, then answered


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watch_with(reasons: dict[str, str], clock: Clock) -> tuple[Watch, list[list[str]]]:
    """A watch of HOSTS, deadline t=6, whose probe answers ``reasons`` (and records whom
    it probed)."""
    probed: list[list[str]] = []

    def prober(hosts, _timeout):
        probed.append(list(hosts))
        return {h: reasons.get(h, "") for h in hosts}

    return Watch(HOSTS, 6.0, lambda: 22, prober, clock), probed


def settled(watch: Watch) -> bool:
    """``watch.done()`` once its probe (a thread) has reported."""
    end = time.monotonic() + 5
    while time.monotonic() < end:
        if watch.done():
            return True
        time.sleep(0.01)
    return False


def test_a_cut_off_host_ends_the_round_once_the_others_answered() -> None:
    # GIVEN h1 and h2 answering at t=2, h3 cut off
    clock = Clock()
    watch, probed = watch_with({"h3": "cannot connect to h3:22 (timed out)"}, clock)
    clock.now = 2.0
    watch.answer("h1")
    watch.answer("h2")
    # WHEN the answers have stopped for QUIET_S
    assert not watch.done() and probed == []
    clock.now = 2.0 + QUIET_S + 1e-6
    # THEN h3 alone is probed, proven unreachable, and the round is over long before t=6
    assert settled(watch)
    assert probed == [["h3"]]
    assert watch.finish() == {"h3": "cannot connect to h3:22 (timed out)"}


def test_a_slow_host_that_takes_connections_is_waited_for() -> None:
    # GIVEN h3 silent at t=2.3 but taking connections (busy, not cut off)
    clock = Clock()
    watch, probed = watch_with({}, clock)
    for host in ("h1", "h2"):
        watch.answer(host)
    clock.now = 2.0 + QUIET_S + 1e-6
    watch.done()
    assert watch.finish() == {"h3": ""}
    # THEN the round goes on (the transport waits for it until its deadline)
    clock.now = 4.9
    assert not watch.done()
    # AND when it answers at last, the round is over, and it was probed once only
    watch.answer("h3")
    assert watch.done() and probed == [["h3"]]


def test_a_host_proven_unreachable_that_answers_after_all_is_not_lost() -> None:
    # GIVEN h2 and h3 silent at the probe, h2 proven unreachable (a blip), h3 slow
    clock = Clock()
    watch, _probed = watch_with({"h2": "cannot connect to h2:22 (timed out)"}, clock)
    watch.answer("h1")
    clock.now = QUIET_S + 1e-6
    watch.done()
    watch.finish()
    assert not watch.done()  # h3 takes connections: wait for it
    # WHEN h2 answers after all
    watch.answer("h2")
    # THEN h2 counts as answered (its document is merged), not as cut off
    assert "h2" not in watch.finish()
    assert ending(HOSTS, watch.answered, watch.unreachable(), False) is Ending.TRANSPORT


def test_no_answer_at_all_probes_in_the_deadlines_last_second() -> None:
    clock = Clock()
    watch, probed = watch_with({h: "cannot resolve" for h in HOSTS}, clock)
    clock.now = 6.0 - PROBE_S - 0.01
    assert not watch.done() and probed == []
    clock.now = 6.0 - PROBE_S
    assert settled(watch) and probed == [list(HOSTS)]


def test_a_round_through_ssh_ends_when_the_silent_host_is_proven_unreachable(tmp_path) -> None:
    # GIVEN a host that answers and one whose ssh never ends, whose name cannot resolve
    env = fake_ssh(tmp_path)
    # WHEN gathered with a 6 s deadline
    answers, ended = gather(Via.SSH, "7", ["good1", "lost.invalid"], ["collect"], 6.0, env)
    # THEN the round ended because it was proven unreachable, not at the deadline
    assert ended is Ending.UNREACHABLE
    assert answers["good1"].text == '{"ok": true}'
    reason = answers["lost.invalid"].reason
    assert reason.startswith("cannot resolve lost.invalid: cut off (no answer when the round")


def test_a_round_through_ssh_waits_for_a_reachable_host_and_keeps_a_late_one(tmp_path) -> None:
    # GIVEN a host that answers, one that takes connections but never answers (localhost),
    # and one whose name cannot resolve (proven unreachable) yet answers after 1.2 s
    env = fake_ssh(tmp_path)
    hosts = ["good1", "localhost", "late.invalid"]
    # WHEN gathered with a 3 s deadline
    start = time.monotonic()
    answers, ended = gather(Via.SSH, "7", hosts, ["collect"], 3.0, env)
    # THEN the round waited until the transport's deadline (3 s less PROBE_S) for localhost
    assert ended is Ending.DEADLINE
    assert time.monotonic() - start >= 3.0 - PROBE_S
    assert answers["localhost"].reason.endswith("(the host takes connections)")
    # AND the late host's document is there, not a "cut off"
    assert answers["late.invalid"].text == '{"ok": true}', answers["late.invalid"]
