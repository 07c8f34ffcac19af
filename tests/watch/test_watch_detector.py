"""The stall detector: learned step time, floor, factor, segments, pauses and backoff."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.restart.watchdog import Phase, ProgressRecord
from doctor.watch.detector import Detector, Reading
from doctor.watch.progress import moved

TICK = 0.05


def feed(detector: Detector, gaps: list[float], rank: int = 0, start: float = 0.0) -> float:
    """Pings at the given gaps, the detector looking every TICK; returns the last ping time.
    Fails if a stall is reported while the pings keep coming."""
    now, count = start, 1
    detector.observe(Reading(rank, count, now))
    for gap in gaps:
        end = now + gap
        while now + TICK < end:
            now += TICK
            assert detector.check(now) is None, f"flagged {now - (end - gap):.2f}s into a step"
        now, count = end, count + 1
        detector.observe(Reading(rank, count, now))
    return now


def first_stall(detector: Detector, since: float, limit: float = 60.0) -> float | None:
    now = since
    while now < since + limit:
        now += TICK
        if detector.check(now) is not None:
            return now - since
    return None


def test_a_steady_job_is_flagged_after_factor_times_its_step() -> None:
    # GIVEN a job stepping every 0.4 s, factor 2.5, floor 0.5 s
    detector = Detector(stall_factor=2.5, min_stall=0.5)
    last = feed(detector, [0.4] * 10)
    # WHEN it stops
    stalled = first_stall(detector, last)
    # THEN the stall is called after 2.5 steps (one tick of resolution)
    assert stalled is not None and 1.0 <= stalled <= 1.0 + 2 * TICK
    assert detector.check(last + stalled).step_time == pytest.approx(0.4)  # type: ignore[union-attr]


def test_the_floor_holds_under_very_short_steps() -> None:
    # GIVEN 10 ms steps and a 2 s floor
    detector = Detector(stall_factor=2.5, min_stall=2.0)
    last = feed(detector, [0.01] * 30)
    # WHEN it stops THEN nothing is called before the floor
    stalled = first_stall(detector, last)
    assert stalled is not None and 2.0 <= stalled <= 2.0 + 2 * TICK


def test_nothing_is_judged_before_a_step_time_is_learned() -> None:
    # GIVEN a rank that pinged twice (only the warm-up gap: nothing learned)
    detector = Detector(stall_factor=2.5, min_stall=0.5)
    last = feed(detector, [3.0])
    # WHEN it stops THEN the detector leaves it to the wrapper's soft timeout
    assert first_stall(detector, last, limit=20) is None


def test_the_first_gap_of_a_segment_is_warm_up_and_not_learned() -> None:
    # GIVEN a 5 s first step (communicators, compile), then 0.2 s steps
    detector = Detector(stall_factor=2.5, min_stall=0.3)
    last = feed(detector, [5.0, 0.2, 0.2, 0.2])
    # THEN the step time is the steady one
    stalled = first_stall(detector, last)
    assert stalled is not None and stalled <= 0.5 + 2 * TICK


def test_a_watcher_that_starts_late_uses_the_wrappers_average() -> None:
    # GIVEN a rank first seen at its 40th ping, with the wrapper's average step of 0.3 s
    detector = Detector(stall_factor=2.5, min_stall=0.5)
    detector.observe(Reading(0, 40, 10.0, step_hint=0.3))
    # WHEN it never pings again THEN the stall is called from the hint
    stalled = first_stall(detector, 10.0)
    assert stalled is not None and stalled <= 0.75 + 2 * TICK


def test_a_new_segment_starts_counting_again_and_keeps_the_learned_step() -> None:
    # GIVEN a learned step of 0.2 s, then a restart (segment 1) whose counter starts at 1
    detector = Detector(stall_factor=2.5, min_stall=0.3)
    feed(detector, [0.2] * 6)
    detector.observe(Reading(0, 1, 100.0, segment=1))
    # THEN the first step of the new segment is not judged (warm-up) ...
    assert first_stall(detector, 100.0, limit=5) is None
    # ... and after it, the learned step applies at once
    detector.observe(Reading(0, 2, 110.0, segment=1))
    stalled = first_stall(detector, 110.0)
    assert stalled is not None and stalled <= 0.5 + 2 * TICK


def test_an_atomic_section_anywhere_pauses_the_whole_job() -> None:
    # GIVEN two ranks; rank 0 writes a checkpoint in atomic() while rank 1 waits for it
    detector = Detector(stall_factor=2.5, min_stall=0.3)
    feed(detector, [0.2] * 6, rank=0)
    last = feed(detector, [0.2] * 6, rank=1)
    detector.observe(Reading(0, 7, last, paused=True))
    # THEN no stall is called while the section is open
    assert first_stall(detector, last, limit=10) is None
    # WHEN it closes and nothing moves THEN the stall is called
    detector.observe(Reading(0, 7, last, paused=False))
    assert detector.check(last + 10) is not None


def test_the_culprit_that_stopped_first_is_named_first() -> None:
    detector = Detector(stall_factor=2.5, min_stall=0.3)
    feed(detector, [0.2] * 6, rank=0)
    feed(detector, [0.2] * 7, rank=1)
    stall = detector.check(5.0)
    assert stall is not None and stall.ranks == (0, 1)


def test_snooze_doubles_the_wait_until_the_job_moves_again() -> None:
    detector = Detector(stall_factor=2.5, min_stall=0.3)
    last = feed(detector, [0.2] * 6)
    first = first_stall(detector, last)
    detector.snooze()
    assert first is not None and detector.check(last + first + TICK) is None
    assert detector.check(last + 2 * first + TICK) is not None
    detector.observe(Reading(0, 8, last + 3.0))  # it moves: the backoff is gone
    assert detector.backoff == 1.0


def test_a_rank_not_armed_is_not_judged() -> None:
    # GIVEN a spare (never pings) and a restarting rank
    detector = Detector(stall_factor=2.5, min_stall=0.3)
    last = feed(detector, [0.2] * 6)
    detector.observe(Reading(0, 7, last, armed=False))
    assert first_stall(detector, last, limit=5) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=0.1, max_value=0.25), min_size=3, max_size=40),
    st.integers(min_value=0, max_value=5),
)
def test_uneven_steps_within_the_factor_are_never_flagged(gaps: list[float], slow: int) -> None:
    # GIVEN steps that vary fourfold at most against a factor of 2.5 and a 0.3 s floor, and
    # an "evaluation" step of 3x the shortest one every sixth step after the first learned ones
    steps = [g * 3 if i % 6 == 5 and i > slow + 3 else g for i, g in enumerate(gaps)]
    detector = Detector(stall_factor=2.5, min_stall=0.3 * 2.5)
    # WHEN they run THEN nothing is flagged (feed asserts it at every tick) ...
    last = feed(detector, steps)
    # ... and the stop after them is called within the factor of the longest step learned
    learned = max(steps[1:]) if len(steps) > 2 else None
    stalled = first_stall(detector, last)
    assert stalled is not None
    if learned is not None:
        assert stalled <= max(0.75, 2.5 * learned) + 2 * TICK


def test_after_an_action_a_rank_is_judged_again_only_from_its_next_move() -> None:
    # GIVEN two ranks stepping every 0.4 s that stop together (one hung, one waiting on it)
    detector = Detector(stall_factor=2.5, min_stall=0.5)
    last = max(feed(detector, [0.4] * 6, rank=rank) for rank in (0, 1))
    assert first_stall(detector, last) is not None
    # WHEN the watcher acts (the hung rank excluded, the job restarted in place)
    detector.forget(1)
    detector.acted()
    # THEN the waiting rank is not flagged while its restart takes long on a loaded host
    assert first_stall(detector, last, limit=20.0) is None
    # AND once it moves again (its next iteration) it is judged as before
    moved = feed(detector, [0.4] * 6, rank=0, start=last + 20.0)
    assert first_stall(detector, moved) is not None


def _board(pings: int, phase: str = "RUNNING", iteration: int = 0) -> ProgressRecord:
    return ProgressRecord(1.0, 1.0, 0.4, iteration, Phase[phase], pings, 0)


def test_a_stalled_rank_that_pinged_or_left_its_function_while_diagnosed_moved() -> None:
    # GIVEN ranks 2 and 3 stalled at their last ping, read before and after the diagnosis
    before = {2: _board(8), 3: _board(8)}
    # THEN the same readings are no move, nor is a rank the stall does not name
    assert not moved(before, dict(before), [2, 3])
    assert not moved(before, {**before, 0: _board(9)}, [2, 3])
    # AND a ping, the wrapper's exit from the function (the job's end) or a new iteration
    # (a restart) is one
    for after in (_board(9), _board(8, "EXITING"), _board(0, "RUNNING", iteration=1)):
        assert moved(before, {**before, 3: after}, [2, 3])
    # AND a rank with no board either time tells nothing
    assert not moved({}, {2: _board(9)}, [2])
