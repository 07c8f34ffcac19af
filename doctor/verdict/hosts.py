"""The rule over hosts that did not answer (multi-host triage): ``Evidence -> [Candidate]``.

When every rank on the hosts that answered was read and waits in a collective,
no rank is dead, and some hosts did not answer, the peers wait for the
ranks on those hosts: they are the culprits. Strength 62: above a transport
error in a log (60) and the "could not be read" unknown (40, which it
refines), below anything seen on a rank itself (a dead rank, a rank in its own
code, ranks in different collectives).

The class says what the silence means: a host that could not even be
connected to (ssh's connect timeout, srun's launch failure) is cut off from
the network the job uses too, so ``network``; a host that took the
connection but did not finish ``collect`` in time (overloaded, D state) is
``unknown``, with the same culprits.
"""

from __future__ import annotations

import re

from doctor.evidence import UNREACHED, Evidence
from doctor.model import Confidence, EvidenceLine, HangClass
from doctor.ranks import rank_prose, rank_ranges
from doctor.verdict.candidate import Candidate
from doctor.verdict.stacks import RankState, rank_state

_CUT_OFF = re.compile(r"(?i)cut off|cannot connect|connection timed out|no route to host")


def host_candidates(evidence: Evidence) -> list[Candidate]:
    silent = [h for h in evidence.hosts if not h.reached and h.ranks]
    if not silent:
        return []
    unreached = {p.rank for p in evidence.processes if p.status == UNREACHED}
    if any(not p.alive for p in evidence.processes):
        return []
    states = {s.rank: rank_state(s) for s in evidence.stacks if s.rank not in unreached}
    read = {p.rank for p in evidence.processes if p.status != UNREACHED}
    if not states or set(states) != read:
        return []  # a reached rank without a stack: the unreadable-rank rule speaks instead
    if any(s is not RankState.IN_COLLECTIVE for s in states.values()):
        return []
    culprits = tuple(sorted(unreached))
    cut_off = all(_CUT_OFF.search(h.reason) for h in silent)
    where = ", ".join(f"{h.host} (ranks {rank_ranges(h.ranks)}: {h.reason})" for h in silent)
    waiting = sorted(s.rank for s in evidence.stacks if s.rank not in unreached)
    summary = (
        f"{rank_prose(waiting) if len(waiting) <= 8 else f'{len(waiting)} ranks'} "
        f"{'waits' if len(waiting) == 1 else 'wait'} in a collective for {rank_prose(culprits)} on "
        + ", ".join(h.host for h in silent)
        + (
            ", which cannot be reached: a node cut off from the network; check its links "
            "and drain it"
            if cut_off
            else ", which did not answer in time: look at that node (load, D state, its ranks)"
        )
    )
    lines = (EvidenceLine("host", None, f"not reached: {where}"),)
    return [
        Candidate(
            HangClass.NETWORK if cut_off else HangClass.UNKNOWN,
            culprits,
            Confidence.MEDIUM if cut_off else Confidence.LOW,
            summary,
            62,
            evidence=lines,
            missing_evidence=tuple(f"stacks of the ranks on {h.host}" for h in silent),
            rule="unreached_host",
        )
    ]
