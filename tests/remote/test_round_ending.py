"""When a multi-host round ends: the pure rules, the watch that applies them, and one
round through a stand-in ssh (``tests/remote/test_remote_ssh.py``'s) with real probes.

The lost host within 5 s (issue 26): a round must not wait for a deadline that can no
longer bring anything, and must not lose a host that is only slow or answers late.
"""

from __future__ import annotations

import time

import pytest
from fake_ssh import fake_ssh

from doctor.remote.ending import (
    PROBE_BATCH,
    PROBE_S,
    Ending,
    Watch,
    ending,
    over,
    probe_due,
    to_probe,
)
from doctor.remote.reach import Via, gather

HOSTS = ("h1", "h2", "h3")
CUT = "cannot connect to h3:22 (timed out)"


def test_every_host_is_probed_from_the_start_and_a_failed_one_every_probe_s() -> None:
    # GIVEN a round that has not probed yet THEN a probe is due at once
    assert probe_due(0.0, None)
    # AND the next one only PROBE_S after the last one started
    assert not probe_due(2.0 + PROBE_S - 0.01, 2.0)
    assert probe_due(2.0 + PROBE_S, 2.0)


def test_a_probe_is_about_the_silent_hosts_not_yet_seen_taking_a_connection() -> None:
    # nothing known yet: every silent host
    assert to_probe(HOSTS, {"h1"}, {}) == ["h2", "h3"]
    # h2 took a connection (wait for it), h3 did not (probe it again)
    assert to_probe(HOSTS, {"h1"}, {"h2": "", "h3": CUT}) == ["h3"]
    assert to_probe(HOSTS, set(HOSTS), {"h3": CUT}) == []


def test_a_probe_is_bounded_and_takes_the_hosts_never_probed_first() -> None:
    # GIVEN 16,384 hosts, the first 300 probed and failed
    hosts = [f"n{i}" for i in range(16_384)]
    why = {h: CUT for h in hosts[:300]}
    # THEN one probe is about PROBE_BATCH hosts, those not yet probed before the failed
    assert to_probe(hosts, set(), why) == hosts[300 : 300 + PROBE_BATCH]
    # AND once every other host answered, the failed ones come again
    assert to_probe(hosts, set(hosts[300:]), why) == hosts[:PROBE_BATCH]


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
    """A watch of HOSTS, deadline t=6, whose probe answers ``reasons`` as they are when
    it runs (and records whom it probed)."""
    probed: list[list[str]] = []

    def prober(hosts, _timeout):
        probed.append(list(hosts))
        return {h: reasons.get(h, "") for h in hosts}

    return Watch(HOSTS, 6.0, lambda: 22, prober, clock), probed


def eventually(ok) -> bool:
    """``ok()`` within 5 s (a probe runs on a thread)."""
    end = time.monotonic() + 5
    while time.monotonic() < end:
        if ok():
            return True
        time.sleep(0.01)
    return False


def test_a_cut_off_host_ends_the_round_as_soon_as_the_others_answered() -> None:
    # GIVEN a round starting at t=0, h3 cut off
    clock = Clock()
    watch, probed = watch_with({"h3": CUT}, clock)
    # WHEN it starts THEN every host is probed at once, beside the transport
    assert not watch.done()
    assert eventually(lambda: watch.why.get("h3") == CUT) and probed == [list(HOSTS)]
    # AND with no answer yet, a failed probe alone does not end the round
    assert not watch.done()
    # WHEN h1 and h2 answer at t=2 THEN the round is over at once (no quiet to wait out)
    clock.now = 2.0
    watch.answer("h1")
    assert not watch.done()
    watch.answer("h2")
    assert watch.done()
    assert watch.finish() == {"h3": CUT}


def test_a_slow_host_that_takes_connections_is_waited_for() -> None:
    # GIVEN h3 silent but taking connections (busy, not cut off)
    clock = Clock()
    watch, probed = watch_with({}, clock)
    watch.done()
    assert eventually(lambda: len(watch.why) == 3)
    for host in ("h1", "h2"):
        watch.answer(host)
    assert watch.finish() == {"h3": ""}
    # THEN the round goes on (the transport waits for it until its deadline)
    clock.now = 4.9
    assert not watch.done()
    # AND when it answers at last, the round is over, and it was probed once only
    watch.answer("h3")
    assert watch.done() and probed == [list(HOSTS)]


def test_a_cut_off_host_that_comes_back_is_waited_for_again() -> None:
    # GIVEN h3 cut off when the round starts
    clock = Clock()
    reasons = {"h3": CUT}
    watch, probed = watch_with(reasons, clock)
    watch.done()
    assert eventually(lambda: watch.why.get("h3") == CUT)
    # WHEN its link comes back: not probed again before PROBE_S
    del reasons["h3"]
    clock.now = PROBE_S - 0.01
    watch.done()
    assert probed == [list(HOSTS)]
    # THEN h3 alone is probed again after PROBE_S, takes the connection, and is waited
    # for though h1 and h2 have answered
    clock.now = PROBE_S
    watch.done()
    assert eventually(lambda: watch.why.get("h3") == "") and probed[1:] == [["h3"]]
    watch.answer("h1")
    watch.answer("h2")
    assert not watch.done()


def test_a_host_proven_unreachable_that_answers_after_all_is_not_lost() -> None:
    # GIVEN h2 proven unreachable (a blip) and h3 slow
    clock = Clock()
    watch, _probed = watch_with({"h2": "cannot connect to h2:22 (timed out)"}, clock)
    watch.done()
    assert eventually(lambda: len(watch.why) == 3)
    watch.answer("h1")
    assert not watch.done()  # h3 takes connections: wait for it
    # WHEN h2 answers after all
    watch.answer("h2")
    # THEN h2 counts as answered (its document is merged), not as cut off
    assert "h2" not in watch.finish()
    assert ending(HOSTS, watch.answered, watch.unreachable(), False) is Ending.TRANSPORT


def test_no_answer_at_all_waits_for_the_deadline() -> None:
    # GIVEN every host unreachable (the login node's own link down?)
    clock = Clock()
    watch, probed = watch_with({h: "cannot resolve" for h in HOSTS}, clock)
    watch.done()
    assert eventually(lambda: len(watch.why) == 3)
    # THEN the round does not end on that alone: the transport's deadline ends it
    clock.now = 6.0 - PROBE_S
    assert not watch.done()
    assert eventually(lambda: len(probed) == 2) and probed[1] == list(HOSTS)
    assert not watch.done()


def test_no_probe_starts_without_the_time_to_finish_before_the_deadline() -> None:
    clock = Clock()
    clock.now = 6.0 - 0.15
    watch, probed = watch_with({}, clock)
    assert not watch.done() and watch.finish() == {} and probed == []


def test_the_transport_ending_first_waits_for_the_first_probe_only() -> None:
    # GIVEN a transport that returned before any probe (srun could not start)
    clock = Clock()
    watch, probed = watch_with({"h3": CUT}, clock)
    # THEN finish probes the silent hosts itself and says why
    assert watch.finish() == {"h1": "", "h2": "", "h3": CUT}
    assert probed == [list(HOSTS)]


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
