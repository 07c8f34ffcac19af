"""The watcher and ranks that leave its roster: through the wrapper's exit (the job ended,
no stall), or killed mid-step (a stall). Real progress files, a roster the test moves.

Seen in a fresh-clone run: every rank of a finished job entered its exit phase and left
the roster between two of the watcher's looks; the stale tracks of two ranks made a stall,
and the watcher stopped a job that had already ended with exit 0."""

from __future__ import annotations

import os
import time
from pathlib import Path

from doctor.jobconfig.watch_settings import WatchConfig
from doctor.restart.watchdog import Phase, SharedProgress, progress_path
from doctor.triage.target import RankTarget
from doctor.trust.process_identity import this_process
from doctor.watch.roster import Member, Roster
from doctor.watch.watcher import Watcher

STEP = 0.05


class MovableRoster(Roster):
    refresh = 0.0

    def __init__(self, ranks: list[int]) -> None:
        self.ranks = ranks

    def members(self) -> list[Member]:
        me = this_process()
        return [Member(RankTarget(r, os.getpid(), "h"), me) for r in self.ranks]


def started_job(tmp_path: Path) -> tuple[Watcher, dict[int, SharedProgress], MovableRoster]:
    """Four pinging ranks the watcher has watched long enough to judge them."""
    boards = {r: SharedProgress(progress_path(tmp_path, r)) for r in range(4)}
    roster = MovableRoster([0, 1, 2, 3])
    config = WatchConfig(stall_factor=2.5, min_stall=0.2)
    watcher = Watcher("j", tmp_path, config, lambda *a: None, roster)  # type: ignore[arg-type]
    for board in boards.values():
        board.enter(0, Phase.RUNNING)
    watcher.live = roster.members()
    for _ in range(6):
        for board in boards.values():
            board.ping()
        watcher._observe()
        time.sleep(STEP)
    assert watcher.detector.check(time.monotonic()) is None
    return watcher, boards, roster


def look_after_a_while(watcher: Watcher, roster: MovableRoster):
    watcher.live = roster.members()
    time.sleep(0.5)  # past the stall threshold (0.2 s floor)
    watcher._observe()
    return watcher.detector.check(time.monotonic())


def test_ranks_that_left_through_the_exit_phase_between_two_looks_are_no_stall(
    tmp_path: Path,
) -> None:
    watcher, boards, roster = started_job(tmp_path)
    # GIVEN every rank entering its exit phase, ranks 2 and 3 gone from the roster before
    # the watcher looked again
    for board in boards.values():
        board.enter(0, Phase.EXITING)
    roster.ranks = [0, 1]
    # THEN the watcher sees no stall: the job ended
    assert look_after_a_while(watcher, roster) is None


def test_a_rank_gone_mid_step_is_still_a_stall(tmp_path: Path) -> None:
    watcher, boards, roster = started_job(tmp_path)
    # GIVEN rank 2 gone from the roster with its board still running (killed), the others
    # waiting for it (no more pings)
    roster.ranks = [0, 1, 3]
    stall = look_after_a_while(watcher, roster)
    # THEN it is a stall, and rank 2 is among the stalled ranks
    assert stall is not None and 2 in stall.ranks
