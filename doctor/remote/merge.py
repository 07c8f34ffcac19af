"""Host documents and the hosts that did not answer -> one ``Evidence`` for the classifier.

Every expected rank ends up in exactly one of three places:

* **found**: a host sent its live process and (usually) its stack;
* **lost**: expected (``WORLD_SIZE``) but alive on no host that answered; the
  host that should hold it says so when it can (``local_ranks``), else its
  host is unknown;
* **unreached**: on a host that did not answer before the deadline. Such a
  rank is kept as a live ``RankProcess`` with status ``unreached`` and no
  stack, so the rules see "could not be read", never "dead".

Which ranks an unreached host holds: the launch registry's records when there
are some, else the ranks nobody accounted for, split over the unreached hosts
in host order in blocks the size of the reached hosts' blocks (SLURM's and
torchrun's default block layout), else all of them named for all such hosts.

Stacks keep the classes the hosts formed: classes of equal stacks on different
hosts share one tuple of threads (``Interner``), so memory grows with the
distinct stacks of the job, not with ranks x frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from doctor.codec import builder
from doctor.evidence import UNREACHED, Evidence, HostReach, RankProcess, RankStack
from doctor.gcpause import collector_paused
from doctor.model import Skipped
from doctor.ranks import rank_ranges
from doctor.remote.document import DocumentError, HostDocument
from doctor.remote.reader import Interner, parse_document
from doctor.remote.transport import HostAnswer

_STACK = builder(RankStack)
"""A rank's stack, one a rank: ``RankStack`` built as the codec builds it."""


def read_answers(
    answers: Mapping[str, HostAnswer], interner: Interner | None = None
) -> tuple[dict[str, HostDocument], dict[str, str]]:
    """The documents that parse, by host; the reason for every host without one."""
    intern = interner or Interner()
    docs, reasons = {}, {}
    for host, answer in answers.items():
        if answer.text is None:
            reasons[host] = answer.reason or "no answer"
            continue
        try:
            docs[host] = parse_document(answer.text, intern)
        except DocumentError as exc:
            reasons[host] = f"sent an unreadable host document ({exc})"
    return docs, reasons


def _unreached_ranks(
    hosts: Sequence[str],
    unreached: Sequence[str],
    docs: Mapping[str, HostDocument],
    unaccounted: Sequence[int],
    known: Mapping[int, str],
) -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {h: [] for h in unreached}
    rest = []
    for rank in unaccounted:
        if known.get(rank) in out:
            out[known[rank]].append(rank)
        else:
            rest.append(rank)
    if rest and unreached:
        sizes = {len(d.local_ranks) for d in docs.values() if d.local_ranks}
        block = sizes.pop() if len(sizes) == 1 else None
        ordered = [h for h in hosts if h in out]
        if block and len(rest) == block * len(ordered):
            for i, host in enumerate(ordered):
                out[host] += rest[i * block : (i + 1) * block]
        elif len(ordered) == 1:
            out[ordered[0]] += rest
        else:
            for host in ordered:  # cannot tell which: each may hold any of them
                out[host] += rest
    return {h: tuple(sorted(set(r))) for h, r in out.items()}


@collector_paused()
def merge(
    job: str,
    hosts: Sequence[str],
    answers: Mapping[str, HostAnswer],
    seconds: float,
    known_hosts: Mapping[int, str] | None = None,
    world_size: int | None = None,
    interner: Interner | None = None,
) -> Evidence:
    """One ``Evidence`` from every host's answer (see the module docstring)."""
    docs, reasons = read_answers(answers, interner)
    known = dict(known_hosts or {})
    world = max([world_size or 0, *(d.world_size or 0 for d in docs.values())]) or None
    processes: dict[int, RankProcess] = {}
    for doc in docs.values():
        for p in doc.processes:
            if p.rank not in processes or (p.alive and not processes[p.rank].alive):
                processes[p.rank] = p
    expected = set(range(world or 0)) | set(known) | set(processes)
    unaccounted = sorted(expected - set(processes))
    unreached_hosts = [h for h in hosts if h not in docs]
    claims = _unreached_ranks(hosts, unreached_hosts, docs, unaccounted, known)
    claimed = {r: h for h in reversed(list(claims)) for r in claims[h]}  # first host wins
    local_of = {r: h for h, d in docs.items() for r in d.local_ranks}
    for rank in unaccounted:
        if rank in claimed:
            processes[rank] = RankProcess(rank, None, claimed[rank], alive=True, status=UNREACHED)
        else:
            host = local_of.get(rank) or known.get(rank) or "?"
            processes[rank] = RankProcess(rank, None, host, alive=False, status="missing")
    stacks = [
        _STACK(
            {
                "rank": rank,
                "threads": c.stack.threads,
                "source": c.stack.source,
                "native_from": None,
            }
        )
        for doc in docs.values()
        for c in doc.classes
        for rank in c.ranks
    ]
    skipped = [s for doc in docs.values() for s in doc.skipped]
    reach = []
    for host in hosts:
        answered = docs.get(host)
        if answered is not None:
            ranks = tuple(sorted(p.rank for p in answered.processes))
            note = "; ".join(f"bound hit: {t}" for t in answered.truncated)
            reach.append(HostReach(host, True, note, ranks, answers[host].seconds))
            continue
        ranks = claims.get(host, ())
        reach.append(HostReach(host, False, reasons[host], ranks, None))
        skipped.append(
            Skipped(
                None,
                "host",
                f"{host} did not answer ({reasons[host]})"
                + (f": ranks {rank_ranges(ranks)} unread" if ranks else ""),
            )
        )
    return Evidence(
        job=job,
        ranks_expected=world or (len(expected) or None),
        processes=tuple(sorted(processes.values(), key=lambda p: p.rank)),
        stacks=tuple(sorted(stacks, key=lambda s: s.rank)),
        gpus=tuple(g for d in docs.values() for g in d.gpus),
        logs=tuple(e for d in docs.values() for e in d.logs),
        progress=tuple(s for d in docs.values() for s in d.progress),
        skipped=tuple(skipped),
        dumps=tuple(d for doc in docs.values() for d in doc.dumps),
        unreadable_dumps=tuple(s for doc in docs.values() for s in doc.unreadable_dumps),
        world_size=world,
        seconds=round(seconds, 3),
        launcher="; ".join(sorted({f"{h}: {d.launcher}" for h, d in docs.items() if d.launcher}))[
            :1000
        ],
        hosts=tuple(reach),
    )
