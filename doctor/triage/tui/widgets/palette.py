"""Colours shared by the widgets, so a state or an op reads the same everywhere on screen."""

from __future__ import annotations

from doctor.verdict.stacks import RankState

STATE_STYLES: dict[str, str] = {
    RankState.IN_COLLECTIVE: "cyan",
    RankState.GPU_WAIT: "cyan",
    RankState.COMPILE: "magenta",
    RankState.DATA_LOADING: "yellow",
    RankState.GIL_WAIT: "yellow",
    RankState.GIL_LOOP: "yellow",
    RankState.USER_CODE: "yellow",
    RankState.IDLE: "dim",
    RankState.UNKNOWN: "dim",
}
"""Liveness states (dead, exited, zombie, stopped, missing) are red."""

CULPRIT = "bold red"
ODD = "bold yellow"


def state_style(state: str) -> str:
    """The style of a rank state; anything not listed (a liveness state) is red."""
    return STATE_STYLES.get(state, "red")
