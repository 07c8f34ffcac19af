"""A framework's own check that its ranks disagree, in its own words: the ranks called
different collectives, or with different shapes, types or counts, so a collective hangs or
fails (``collective_mismatch``).

    [0]<stderr>: ... horovod/common/stall_inspector.cc:105] One or more tensors were submitted
        to be reduced, gathered or broadcasted by subset of ranks and are waiting for ...
    Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [4], but another ...
    Detected a disagreement on list contents between rank0 and rank3
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.lines import Line

RANKS_DISAGREE = re.compile(
    r"Detected a disagreement on list (?:contents|length) between rank\d{1,9} and rank\d{1,9}|"
    r"Different ranks tried to set up mismatching numbers of process sets|"
    r"sync_global_devices name mismatch|failure in recv completion Message truncated"
)
"""A framework's own check that its ranks disagree: DeepSpeed's ZeRO partition lists,
Horovod's process sets, JAX's named barrier, UCC's receive longer than the posted buffer."""
HOROVOD_STALL = re.compile(r"submitted to be reduced, gathered or broadcasted by subset of ranks")
HOROVOD_MISMATCH = re.compile(
    r"Mismatched [\w /-]{1,80}: One rank (?:sent|had|did|specified)[^,.]{0,120}"
)
"""Horovod's coordinator comparing the ranks' requests for one tensor (``controller.cc``):
``Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [4], but another rank
sent ...``, and the same for data types, operations, root ranks, reduction ops and devices."""


_ANY = re.compile("|".join(p.pattern for p in (RANKS_DISAGREE, HOROVOD_STALL, HOROVOD_MISMATCH)))
"""The three in one search: this runs for every line the reader's gate passes."""


def events(line: Line) -> list[LogEvent]:
    return [line.event(kinds.MISMATCH_DETECTED, rank=None)] if _ANY.search(line.text) else []
