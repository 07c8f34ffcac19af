"""Which hosts make the allocation's AllReduce short: pairwise rounds over an oracle.

The oracle runs one *round*: a real AllReduce in each of several disjoint groups of
hosts at once, each measured against the model (``Measure.short``). The search:

1. round 1: every host in one group; not short -> no culprit, done;
2. each later round splits every group known to be short into *parts*, pairs (the
   last a triple when the count is odd) or, for a group of three or fewer, single
   hosts, and measures every part at once. A single host cannot run a collective
   alone: it runs with one host already proved clean (a *reference*, one per part
   per round); with no reference left, two single hosts run together (a clean pair
   clears both, a short one tells nothing). A short single host is a culprit; a
   short larger part is split again; a clean part's hosts become references.
3. A part that could not be measured is judged by its siblings: all of them clean ->
   this part holds the shortfall; otherwise it is measured in the next round. Two
   hosts with no reference at all are named together.
4. A short group whose parts are all clean names nobody (``inconclusive``): the
   shortfall came from noise or from the links between the parts, never a guess.

Short means below ``SHORT_FRACTION`` of the model *and*, in a round of several groups,
of the best group of that round: groups of one round share the machines' CPUs and
switches at the same moment, so a busy CPU slows all of them and names nobody, while
a slow link slows only its own group. (Every group of a round holding a slow host
names nobody either: a miss, never a false culprit.)

With one slow host among N >= 4 this takes 3 rounds, within ``1 + ceil(log2 N)``: the
pairs of round 2 are the same real collective operators run by hand, all at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

SHORT_FRACTION = 0.5
"""Short: measured bus bandwidth below this fraction of the model's (a slow link is a
fraction of a healthy one; a shared CPU costs a clean ring less than half)."""

Hosts = tuple[str, ...]


@dataclass(frozen=True)
class Measure:
    """One group's AllReduce in one round."""

    hosts: Hosts
    busbw_gbps: float | None
    """None when the group's collective did not complete (``error`` says why)."""
    predicted_gbps: float
    error: str = ""
    peer_gbps: float | None = None
    """The best group's bus bandwidth in the same round (None: the group ran alone)."""

    @property
    def short(self) -> bool:
        """Below the model, and below the best group that shared the round's machines:
        a round that is slow for every group (a busy CPU) names nobody."""
        if self.busbw_gbps is None:
            return True
        below_model = self.busbw_gbps < SHORT_FRACTION * self.predicted_gbps
        if self.peer_gbps is None:
            return below_model
        return below_model and self.busbw_gbps < SHORT_FRACTION * self.peer_gbps


Oracle = Callable[[Sequence[Hosts]], Mapping[Hosts, Measure]]


@dataclass(frozen=True)
class Culprit:
    """Hosts named together (one, unless they could not be told apart) and the measure."""

    hosts: Hosts
    measure: Measure
    deduced: bool = False
    """Named because its sibling half was clean, not measured on its own."""


@dataclass(frozen=True)
class Isolation:
    rounds: tuple[tuple[Measure, ...], ...]
    culprits: tuple[Culprit, ...]
    inconclusive: tuple[Hosts, ...] = ()

    @property
    def full(self) -> Measure:
        return self.rounds[0][0]


def parts(group: Hosts) -> list[Hosts]:
    """Pairs (the last a triple when odd); single hosts for a group of three or fewer."""
    if len(group) <= 3:
        return [(h,) for h in group]
    cut = [group[i : i + 2] for i in range(0, len(group) - 3, 2)]
    rest = group[2 * len(cut) :]
    return [*cut, rest] if len(rest) <= 3 else [*cut, rest[:2], rest[2:]]


def max_rounds(n: int) -> int:
    """The one-culprit bound plus room for a second culprit's rounds."""
    return 1 + math.ceil(math.log2(max(n, 2))) + 2


@dataclass
class _Search:
    pending: list[tuple[Hosts, Measure]]
    """Groups known short (more than one host), with the measure that showed it."""
    unknown: list[tuple[Hosts, Measure]]
    """Parts not measured yet whose siblings did not clear them (with the parent's measure)."""
    good: list[str]
    culprits: list[Culprit]
    inconclusive: list[Hosts]


Plan = list[list[tuple[Hosts, Hosts | None]]]
"""Per family (a pending group's parts, or one unknown part): (part, the group it runs in)."""


def _plan(s: _Search) -> Plan:
    """This round's groups (module docstring, step 2)."""
    refs = list(s.good)
    plan: Plan = [[(p, None) for p in parts(g)] for g, _ in s.pending]
    plan += [[(h, None)] for h, _ in s.unknown]
    alone: list[tuple[int, int]] = []
    for i, family in enumerate(plan):
        for j, (part, _) in enumerate(family):
            if len(part) > 1:
                family[j] = (part, part)
            elif refs:
                family[j] = (part, (*part, refs.pop(0)))
            else:
                alone.append((i, j))
    whole = {g for g, _ in s.pending}
    for (i, j), (k, m) in zip(alone[::2], alone[1::2], strict=False):
        pair = plan[i][j][0] + plan[k][m][0]
        if pair in whole:
            continue  # a short pair measured again tells nothing
        plan[i][j], plan[k][m] = (plan[i][j][0], pair), (plan[k][m][0], pair)
    return plan


def _judge(s: _Search, plan: Plan, got: Mapping[Hosts, Measure]) -> None:
    """Update the search with one round's measures (module docstring, steps 2-4)."""
    parents = [m for _, m in s.pending] + [m for _, m in s.unknown]
    families = len(s.pending)
    s.pending, s.unknown = [], []
    suspects = {h for family in plan for part, _ in family for h in part}

    def mine(part: Hosts, group: Hosts | None) -> Measure | None:
        m = got.get(group) if group else None
        if m is not None and m.short and any(h in suspects and h not in part for h in group or ()):
            return None  # short beside another suspect: which of the two is unknown
        return m

    for i, (family, parent) in enumerate(zip(plan, parents, strict=True)):
        measures = [mine(part, group) for part, group in family]
        if i < families and all(m is not None and not m.short for m in measures):
            s.good.extend(h for part, _ in family for h in part)
            s.inconclusive.append(tuple(h for part, _ in family for h in part))
            continue
        if i < families and all(g is None for _, g in family) and not s.good:
            s.culprits.append(Culprit(tuple(h for p, _ in family for h in p), parent, True))
            continue
        for j, (part, _) in enumerate(family):
            siblings = [m for k, m in enumerate(measures) if k != j]
            cleared = i < families and all(m is not None and not m.short for m in siblings)
            _settle(s, part, measures[j], cleared, parent)


def _settle(s: _Search, part: Hosts, mine: Measure | None, cleared: bool, parent: Measure) -> None:
    if mine is not None and not mine.short:
        s.good.extend(h for h in part if h not in s.good)
    elif mine is not None or cleared:  # short itself, or every sibling is clean
        measure, deduced = (mine, False) if mine is not None else (parent, True)
        if len(part) == 1:
            s.culprits.append(Culprit(part, measure, deduced))
        else:
            s.pending.append((part, measure))
    else:
        s.unknown.append((part, parent))


def with_peers(got: Mapping[Hosts, Measure]) -> dict[Hosts, Measure]:
    """Each measure with the round's best bus bandwidth beside it (when it had company)."""
    figures = [m.busbw_gbps for m in got.values() if m.busbw_gbps is not None]
    if len(got) < 2 or not figures:
        return dict(got)
    return {g: replace(m, peer_gbps=max(figures)) for g, m in got.items()}


def isolate(hosts: Sequence[str], oracle: Oracle) -> Isolation:
    """The culprit hosts of a short AllReduce across ``hosts`` (module docstring)."""
    everyone = tuple(hosts)
    first = oracle([everyone])[everyone]
    rounds: list[tuple[Measure, ...]] = [(first,)]
    if not first.short:
        return Isolation(tuple(rounds), ())
    s = _Search([(everyone, first)], [], [], [], [])
    while (s.pending or s.unknown) and len(rounds) < max_rounds(len(everyone)):
        plan = _plan(s)
        groups = list(dict.fromkeys(g for family in plan for _, g in family if g is not None))
        if not groups:  # nothing measurable is left: what remains is named together below
            break
        got = with_peers(oracle(groups))
        rounds.append(tuple(got[g] for g in groups if g in got))
        _judge(s, plan, got)
    leftover = [Culprit(h, m, deduced=True) for h, m in [*s.pending, *s.unknown]]
    return Isolation(tuple(rounds), tuple(s.culprits + leftover), tuple(s.inconclusive))
