"""faulthandler's all-threads text, as the in-rank agent answers a stack request, read back.

Live triage reads it as a rank's stacks when py-spy cannot attach; the restart wrapper's
monitor process reads it to say where a rank stood when its soft timeout fired.
"""

from __future__ import annotations

import re

from doctor.evidence import Frame, RankStack, ThreadStack
from doctor.jobdir.agent import MAIN_THREAD_LINE

_FH_MAIN = re.compile(re.escape(MAIN_THREAD_LINE) + r"(0x[0-9a-f]{1,16})$")
_FH_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)")
_FH_FRAME = re.compile(r'^\s+File "(.*)", line (\d{1,18}) in (.+)$')


def parse_faulthandler(text: str, rank: int) -> RankStack:
    """faulthandler's all-threads text (the agent's answer) as a ``RankStack``.

    faulthandler names no threads. The agent's own dump says which one is the main
    thread in its first line; a dump from the signal handler does not, and there the
    main thread is the one whose outermost frame is ``<module>`` (the script), else
    the thread that took the signal.
    """
    threads: list[ThreadStack] = []
    current: list[Frame] = []
    header: tuple[int, bool] | None = None
    named_main: int | None = None

    def close() -> None:
        if header is not None:
            threads.append(ThreadStack(header[0], "", tuple(current), is_main=header[1]))

    for line in text.splitlines():
        if match := _FH_MAIN.match(line):
            named_main = int(match.group(1), 16)
        elif match := _FH_THREAD.match(line):
            close()
            header, current = (int(match.group(2), 16), match.group(1) == "Current thread"), []
        elif (match := _FH_FRAME.match(line)) and header is not None:
            current.append(Frame(match.group(3), match.group(1), int(match.group(2))))
    close()
    main = next((t for t in threads if t.thread_id == named_main), None) or next(
        (t for t in threads if t.frames and t.frames[-1].name == "<module>"), None
    )
    if main is not None:
        threads = [ThreadStack(t.thread_id, t.name, t.frames, is_main=t is main) for t in threads]
    return RankStack(rank, tuple(threads), "agent")
