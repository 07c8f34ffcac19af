"""The policy: one verdict, the watcher's recent decisions and the job's shape -> one decision.

Pure. The table (``[watch.actions]``) says what to do about a hang class; the
bounds decide whether that is still safe:

1. ``none`` records the event and does nothing.
2. A job not running inside the wrapper cannot be restarted in place: a restart
   becomes ``none`` (the job is left to its own timeouts), an exclusion becomes a stop
   that asks for a requeue without the culprit's host (94).
3. The same hang class at the same place (collective, or the culprit's frame) as a
   restart or exclusion within ``repeat_window`` stops the job (93): the cure did not
   cure it, and another try burns every GPU of the job again.
4. ``restart-once`` stops (93) when the class was already acted on within the window.
5. ``restart`` stops (93) once ``max_restarts`` restarts were made within the window.
6. ``exclude`` takes out the culprit's failure domain: its host when the job spans
   several hosts, else the culprit ranks (their GPUs). Spares must cover every active
   rank taken out; otherwise the job stops with 94, naming the host to leave out. A
   verdict without a culprit falls back to ``restart-once``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from doctor.errors import EXIT_NO_REQUEUE, EXIT_REQUEUE_WITHOUT_HOST
from doctor.jobconfig.durations import format_duration
from doctor.jobconfig.watch_settings import Action, WatchConfig
from doctor.model import Verdict
from doctor.ranks import rank_ranges


@dataclass(frozen=True)
class Decision:
    """What the watcher does now, and why (one sentence)."""

    action: Action
    """``stop``, ``restart``, ``exclude`` or ``none`` (never ``restart-once``)."""
    reason: str
    requested: Action
    """What the table said for the class, before the bounds."""
    exit_code: int | None = None
    """For a stop: 93 (do not requeue) or 94 (requeue without ``hosts``)."""
    ranks: tuple[int, ...] = ()
    """For an exclusion: the initial ranks that leave the job."""
    hosts: tuple[str, ...] = ()
    """Hosts excluded, or to leave out of the requeue."""


@dataclass(frozen=True)
class Past:
    """One earlier decision of this watcher."""

    time: float
    hang_class: str
    place: str
    action: Action


@dataclass(frozen=True)
class JobShape:
    """What the policy must know about the job now."""

    hosts: Mapping[int, str]
    """Initial rank -> host, for every rank still in the job."""
    active: frozenset[int]
    """Initial ranks running the function now (the others are idle spares)."""
    wrapped: bool
    """Whether the ranks run inside the restart wrapper (in-place actions possible)."""

    @property
    def spares(self) -> int:
        return len(set(self.hosts) - self.active)


def decide(
    verdict: Verdict,
    place: str,
    history: Sequence[Past],
    shape: JobShape,
    config: WatchConfig,
    now: float,
) -> Decision:
    """The decision for ``verdict`` seen at ``place`` (rules 1-6 of the module docstring)."""
    cls = verdict.hang_class.value
    requested = config.action_for(verdict.hang_class)
    recent = [p for p in history if now - p.time <= config.repeat_window]
    acted = [p for p in recent if p.action in (Action.RESTART, Action.EXCLUDE)]
    window = format_duration(config.repeat_window)

    def stop(reason: str, code: int = EXIT_NO_REQUEUE, hosts: tuple[str, ...] = ()) -> Decision:
        return Decision(Action.STOP, reason, requested, code, hosts=hosts)

    if requested is Action.NONE:
        return Decision(Action.NONE, f"the policy takes no action on {cls}", requested)
    if requested is Action.STOP:
        return stop(f"{cls} is not cured by a restart: it would hang again at the same step")
    if requested is Action.EXCLUDE and verdict.culprit_ranks:
        return _exclude(verdict, shape, requested)
    if not shape.wrapped:
        return Decision(
            Action.NONE,
            "the ranks do not run inside the restart wrapper (launch --wrap): "
            "nothing can restart them in place",
            requested,
        )
    if any(p.hang_class == cls and p.place == place for p in acted):
        return stop(f"{cls} again at {place} within {window}: the restart did not cure it")
    once = requested is Action.RESTART_ONCE or requested is Action.EXCLUDE
    if once and any(p.hang_class == cls for p in acted):
        return stop(f"{cls} again within {window}: one restart was tried")
    restarts = sum(1 for p in acted if p.action is Action.RESTART)
    if restarts >= config.max_restarts:
        return stop(f"{restarts} restarts within {window} (max_restarts): a person must look")
    return Decision(Action.RESTART, f"{cls}: restart in place", requested)


def _exclude(verdict: Verdict, shape: JobShape, requested: Action) -> Decision:
    culprits = [r for r in verdict.culprit_ranks if r in shape.hosts] or list(verdict.culprit_ranks)
    culprit_hosts = tuple(dict.fromkeys(shape.hosts[r] for r in culprits if r in shape.hosts))
    several_hosts = len(set(shape.hosts.values())) > 1
    leaving = sorted(
        {r for r, h in shape.hosts.items() if h in culprit_hosts} if several_hosts else culprits
    )
    domain = f"host {', '.join(culprit_hosts)}" if several_hosts else f"rank {rank_ranges(leaving)}"
    cls = verdict.hang_class.value
    taken = len([r for r in leaving if r in shape.active])
    if shape.wrapped and taken <= shape.spares:
        return Decision(
            Action.EXCLUDE,
            f"{cls} on {domain}: excluded, {taken} spare(s) take its place",
            requested,
            ranks=tuple(leaving),
            hosts=culprit_hosts if several_hosts else (),
        )
    why = "no spare rank" if shape.wrapped else "not running inside the restart wrapper"
    return Decision(
        Action.STOP,
        f"{cls} on {domain} and {why}: requeue without host {', '.join(culprit_hosts) or '?'}",
        requested,
        EXIT_REQUEUE_WITHOUT_HOST,
        ranks=tuple(leaving),
        hosts=culprit_hosts,
    )
