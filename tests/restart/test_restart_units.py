"""The pure parts of the wrapper: rank assignment, options, the restart event, timeout rules."""

from __future__ import annotations

from datetime import timedelta

import pytest

from doctor.config import RestartConfig
from doctor.model import Severity
from doctor.restart import RankAssignment
from doctor.restart.assignment import Assignment
from doctor.restart.events import build_event
from doctor.restart.options import RestartOptions
from doctor.restart.timeouts import judge
from doctor.restart.watchdog import Phase, SharedProgress


@pytest.mark.parametrize(("policy", "live", "expected"), [
    (RankAssignment(), [0, 1, 2, 3], {0: (0, 4), 1: (1, 4), 2: (2, 4), 3: (3, 4)}),
    (RankAssignment(), [0, 2, 3], {0: (0, 3), 2: (1, 3), 3: (2, 3)}),
    (RankAssignment(spares=1), [0, 1, 2, 3], {0: (0, 3), 1: (1, 3), 2: (2, 3), 3: (None, 3)}),
    (RankAssignment(spares=1), [0, 2, 3], {0: (0, 3), 2: (1, 3), 3: (2, 3)}),
    (RankAssignment(spares=1), [0, 3], {0: (0, 2), 3: (1, 2)}),
    (RankAssignment(group_size=2), [0, 1, 3], {0: (0, 2), 1: (1, 2), 3: (None, 2)}),
])
def test_rank_assignment(policy: RankAssignment, live: list[int],
                         expected: dict[int, tuple[int | None, int]]) -> None:
    assert policy.assign(live, 4) == {r: Assignment(*v) for r, v in expected.items()}


def test_options_take_config_then_arguments_in_any_unit() -> None:
    config = RestartConfig(soft_timeout=20, hard_timeout=40, max_iterations=3)
    options = RestartOptions.build(config, hard_timeout=timedelta(seconds=45),
                                   barrier_timeout="2m")
    assert (options.soft_timeout, options.hard_timeout, options.barrier_timeout) == (20, 45, 120)
    assert options.max_iterations == 3


@pytest.mark.parametrize("overrides", [{"soft_timeout": 90}, {"hard_timeout": 500},
                                       {"max_iterations": 0}, {"soft_timeout": "soon"}])
def test_impossible_options_are_refused(overrides: dict) -> None:
    with pytest.raises(ValueError):
        RestartOptions.build(None, **overrides)


def test_event_phases_are_the_slowest_rank_after_the_fault() -> None:
    fault = {"cause": "exception", "rank": 1, "time": 100.0, "exception": "RuntimeError: x"}
    per_rank = {0: {"detect": 100.01, "reentry": 100.2}, 1: {"detect": 100.002, "reentry": 100.3}}
    event = build_event("j", 1, fault, [fault, {"rank": 3, "time": 100.1}], per_rank, 4, [])
    assert event["phases"] == {"detect": 0.01, "reentry": 0.3}
    assert event["rank"] == 1 and event["other_faulted_ranks"] == [3]
    assert event["per_rank"]["1"]["reentry"] == 0.3


def test_runtime_timeout_rules_match_preflight() -> None:
    options = RestartOptions.build(None, soft_timeout=60, hard_timeout=90)
    assert [f.check for f in judge("gloo", 90, options, {})] == ["timeout.watchdog-vs-hard"]
    assert judge("gloo", 91, options, {}) == []
    uninterruptible = judge("mpi", 120, options, {})
    assert [(f.check, f.severity) for f in uninterruptible] == [
        ("timeout.backend-uninterruptible", Severity.WARN)]
    assert judge("mpi", 30, options, {})[0].check == "timeout.watchdog-vs-hard"


def test_shared_progress_arms_manual_pings_per_phase() -> None:
    progress = SharedProgress()
    progress.enter(2, Phase.RUNNING)
    assert progress.read()[1:] == (0.0, 0.0, 2, Phase.RUNNING)
    progress.ping()
    progress.ping()
    _, manual, step, _, _ = progress.read()
    assert manual > 0 and step > 0
    progress.enter(3, Phase.RESTARTING)
    assert progress.read()[1] == 0.0, "a new phase disarms the manual timeout"
