"""The policy: a verdict, the watcher's history and the job's shape -> one decision."""

from __future__ import annotations

from dataclasses import replace

import pytest

from doctor.jobconfig.watch_settings import DEFAULT_ACTIONS, Action, WatchConfig
from doctor.model import Confidence, HangClass, Verdict
from doctor.watch.policy import Decision, JobShape, Past, decide

ONE_HOST = JobShape({r: "h1" for r in range(4)}, frozenset(range(4)), wrapped=True)
WITH_SPARE = replace(ONE_HOST, active=frozenset({0, 1, 2}))
TWO_HOSTS = JobShape(
    {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}, frozenset(range(4)), wrapped=True
)
UNWRAPPED = replace(ONE_HOST, wrapped=False)
NOW = 10_000.0


def verdict(cls: HangClass, *culprits: int) -> Verdict:
    return Verdict(cls, culprits, Confidence.HIGH, f"{cls.value} on {culprits}")


def judge(
    cls: HangClass,
    *culprits: int,
    shape: JobShape = ONE_HOST,
    history: tuple[Past, ...] = (),
    place: str = "all_reduce pg 0 seq 12",
    config: WatchConfig | None = None,
) -> Decision:
    return decide(verdict(cls, *culprits), place, history, shape, config or WatchConfig(), NOW)


def past(cls: HangClass, action: Action, ago: float = 60.0, place: str = "x") -> Past:
    return Past(NOW - ago, cls.value, place, action)


@pytest.mark.parametrize(
    ("cls", "action", "code"),
    [
        (HangClass.COLLECTIVE_MISMATCH, Action.STOP, 93),
        (HangClass.UNSUPPORTED_OP, Action.STOP, 93),
        (HangClass.CPU_STUCK, Action.RESTART, None),
        (HangClass.NETWORK, Action.RESTART, None),
        (HangClass.STRAGGLER, Action.RESTART, None),
        (HangClass.UNKNOWN, Action.RESTART, None),
        (HangClass.BOOTSTRAP, Action.RESTART, None),
        (HangClass.COMPILE_WARMUP, Action.NONE, None),
        (HangClass.HEALTHY, Action.NONE, None),
    ],
)
def test_the_default_table_on_a_first_verdict(
    cls: HangClass, action: Action, code: int | None
) -> None:
    decision = judge(cls, 2)
    assert (decision.action, decision.exit_code) == (action, code)


def test_every_hang_class_has_a_default_action() -> None:
    assert set(DEFAULT_ACTIONS) == {c.value for c in HangClass}


def test_the_same_verdict_at_the_same_place_again_stops_instead_of_looping() -> None:
    # GIVEN a restart for cpu_stuck at seq 12 a minute ago
    history = (past(HangClass.CPU_STUCK, Action.RESTART, place="all_reduce pg 0 seq 12"),)
    # WHEN cpu_stuck comes back at the same place THEN the job stops, not requeued
    again = judge(HangClass.CPU_STUCK, 1, history=history)
    assert (again.action, again.exit_code) == (Action.STOP, 93)
    assert "did not cure it" in again.reason
    # ... but elsewhere it is restarted again
    assert judge(HangClass.CPU_STUCK, 1, history=history, place="other").action is Action.RESTART


def test_restarts_are_bounded_by_max_restarts_within_the_window() -> None:
    config = WatchConfig(max_restarts=2)
    history = tuple(
        past(HangClass.NETWORK, Action.RESTART, ago=100 * i, place=f"p{i}") for i in (1, 2)
    )
    decision = judge(HangClass.NETWORK, history=history, config=config)
    assert (decision.action, decision.exit_code) == (Action.STOP, 93)
    assert "max_restarts" in decision.reason
    # restarts older than the window are forgotten
    old = tuple(replace(p, time=p.time - 7200) for p in history)
    assert judge(HangClass.NETWORK, history=old, config=config).action is Action.RESTART


def test_unknown_is_restarted_once_then_stops() -> None:
    history = (past(HangClass.UNKNOWN, Action.RESTART, place="somewhere"),)
    decision = judge(HangClass.UNKNOWN, history=history, place="elsewhere")
    assert (decision.action, decision.exit_code) == (Action.STOP, 93)


def test_a_bad_gpu_is_excluded_when_a_spare_can_take_its_place() -> None:
    decision = judge(HangClass.GPU_HANG, 1, shape=WITH_SPARE)
    assert (decision.action, decision.ranks) == (Action.EXCLUDE, (1,))
    assert "1 spare" in decision.reason


def test_without_a_spare_the_job_stops_asking_for_a_requeue_without_the_host() -> None:
    decision = judge(HangClass.GPU_HANG, 1, shape=ONE_HOST)
    assert (decision.action, decision.exit_code, decision.hosts) == (Action.STOP, 94, ("h1",))
    assert "requeue without host h1" in decision.reason


def test_on_several_hosts_the_culprits_whole_host_leaves() -> None:
    # GIVEN ranks 0-3 active on hosts a and b, ranks 4-5 spare on host c; rank 2 lost
    decision = judge(HangClass.RANK_LOSS, 2, shape=TWO_HOSTS)
    # THEN both ranks of host b leave and the two spares take their places
    assert (decision.action, decision.ranks, decision.hosts) == (Action.EXCLUDE, (2, 3), ("b",))


def test_outside_the_wrapper_nothing_is_restarted_in_place() -> None:
    assert judge(HangClass.CPU_STUCK, 1, shape=UNWRAPPED).action is Action.NONE
    stop = judge(HangClass.GPU_HANG, 1, shape=UNWRAPPED)
    assert (stop.action, stop.exit_code) == (Action.STOP, 94)
    assert judge(HangClass.COLLECTIVE_MISMATCH, 2, shape=UNWRAPPED).exit_code == 93


def test_the_table_in_the_config_overrides_the_defaults() -> None:
    config = WatchConfig(actions={**DEFAULT_ACTIONS, "cpu_stuck": Action.STOP})
    decision = judge(HangClass.CPU_STUCK, 1, config=config)
    assert (decision.action, decision.requested, decision.exit_code) == (
        Action.STOP,
        Action.STOP,
        93,
    )


def test_an_exclusion_without_a_culprit_falls_back_to_one_restart() -> None:
    assert judge(HangClass.GPU_HANG).action is Action.RESTART
    history = (past(HangClass.GPU_HANG, Action.RESTART),)
    assert judge(HangClass.GPU_HANG, history=history).action is Action.STOP
