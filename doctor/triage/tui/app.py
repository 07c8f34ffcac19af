"""The triage app: polls an injected snapshot provider and shows the newest snapshot.

Collection runs in a thread worker, one at a time; each result comes back as a
``SnapshotReady`` message and is assigned to the ``shown`` reactive, which every
pane is bound to. Pausing stops that assignment, never the collection, so
resuming shows the newest evidence at once. Bundles and recovery run in their
own workers so a slow write never freezes the screen.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical, VerticalScroll
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.widgets import Footer, HelpPanel

from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.confirm import Confirm
from doctor.triage.tui.messages import (
    ActionFailed,
    BundleWritten,
    CollectionFailed,
    RecoveryRequested,
    SnapshotReady,
)
from doctor.triage.tui.view import RankIndex
from doctor.triage.tui.widgets.flight_grid import FlightGrid
from doctor.triage.tui.widgets.rank_table import RankTable
from doctor.triage.tui.widgets.stack_groups import StackGroups
from doctor.triage.tui.widgets.stack_view import StackView
from doctor.triage.tui.widgets.status_line import StatusLine
from doctor.triage.tui.widgets.verdict_panel import VerdictPanel
from doctor.trust.escape import escape_control

Provider = Callable[[], TriageSnapshot]
BundleWriter = Callable[[TriageSnapshot, Path], object]
"""Writes the snapshot on screen, with its raw evidence, to the given ``.tar.gz`` path."""
RecoveryRequest = Callable[[], object]
"""Asks the job's ranks for an in-process restart; a returned string is shown to the person."""

NARROW_BELOW = 120
"""Terminal width (columns) under which the panes stack vertically."""

PANE_TITLES = {
    "ranks": "ranks",
    "grid-pane": "Flight Recorder: collectives by rank",
    "groups-pane": "stack groups",
    "stack-pane": "selected rank",
}
"""Border titles; the verdict pane is the rich panel ``--once`` prints, titled by itself."""


def bundle_name(job: str, taken_at: float) -> str:
    """``nccl-doctor-JOB-20261121-104107.tar.gz``: unique per snapshot, safe as a file name."""
    safe_job = re.sub(r"[^A-Za-z0-9._-]+", "_", job)
    return f"nccl-doctor-{safe_job}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(taken_at))}.tar.gz"


class TriageApp(App[int]):
    """Live triage of one job; the result of ``run()`` is the exit code."""

    CSS_PATH = "triage.tcss"
    TITLE = "nccl-doctor triage"
    BINDINGS = [
        Binding("f5", "refresh_now", "Refresh"),
        Binding("p", "pause", "Pause"),
        Binding("p", "resume", "Resume"),
        Binding("b", "bundle", "Bundle"),
        Binding("r", "recover", "Recover"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    shown: reactive[TriageSnapshot | None] = reactive(None, bindings=True)
    selected_rank: reactive[int | None] = reactive(None)
    paused = reactive(False, bindings=True)
    pending = reactive(False)
    collecting = reactive(False, bindings=True)
    problem = reactive("")

    def __init__(
        self,
        provider: Provider,
        interval: float,
        job: str,
        *,
        on_bundle: BundleWriter | None = None,
        on_recover: RecoveryRequest | None = None,
        bundle_dir: Path | None = None,
    ) -> None:
        super().__init__()
        self.provider = provider
        self.interval = interval
        self.job = job
        self.on_bundle = on_bundle
        self.on_recover = on_recover
        self.bundle_dir = bundle_dir or Path.cwd()
        self.latest: TriageSnapshot | None = None
        """The newest snapshot collected, shown or not (pause keeps ``shown`` still)."""

    def compose(self) -> ComposeResult:
        yield StatusLine(self.job, self.interval).data_bind(
            TriageApp.paused,
            TriageApp.pending,
            TriageApp.collecting,
            TriageApp.problem,
            snapshot=TriageApp.shown,
        )
        with Container(id="main"):
            with Vertical(id="left"):
                yield RankTable(id="ranks").data_bind(
                    TriageApp.selected_rank, snapshot=TriageApp.shown
                )
                with VerticalScroll(id="grid-pane"):
                    yield FlightGrid().data_bind(TriageApp.selected_rank, snapshot=TriageApp.shown)
                with Container(id="stacks"):
                    with VerticalScroll(id="groups-pane"):
                        yield StackGroups().data_bind(
                            TriageApp.selected_rank, snapshot=TriageApp.shown
                        )
                    with VerticalScroll(id="stack-pane"):
                        yield StackView().data_bind(
                            snapshot=TriageApp.shown, rank=TriageApp.selected_rank
                        )
            with VerticalScroll(id="verdict-pane"):
                yield VerdictPanel().data_bind(snapshot=TriageApp.shown)
        yield Footer()

    def on_mount(self) -> None:
        for pane_id, title in PANE_TITLES.items():
            self.query_one(f"#{pane_id}").border_title = title
        self.action_refresh_now()
        self.set_interval(self.interval, self.action_refresh_now)

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW_BELOW, "narrow")

    # -- collection ---------------------------------------------------------------------------

    def action_refresh_now(self) -> None:
        """Start a collection unless one is running (py-spy twice on a rank helps nobody)."""
        if not self.collecting:
            self.collecting = True
            self.collect()

    @work(thread=True, exclusive=True, group="collect")
    def collect(self) -> None:
        try:
            snapshot = self.provider()
        except Exception as exc:  # shown on screen; the next poll tries again
            self.post_message(CollectionFailed(f"collection failed: {exc}"))
        else:
            self.post_message(SnapshotReady(snapshot))

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        if not self.is_running:  # a collection that outlived the quit: nothing left to draw
            return
        self.collecting = False
        self.problem = ""
        self.latest = message.snapshot
        if self.paused:
            self.pending = True
        else:
            self._show(message.snapshot)

    def on_collection_failed(self, message: CollectionFailed) -> None:
        if not self.is_running:
            return
        self.collecting = False
        self.problem = message.error

    def _show(self, snapshot: TriageSnapshot) -> None:
        with self.batch_update():
            self.shown = snapshot
            self.pending = False
            ranks = RankIndex.of(snapshot.evidence).ranks
            if self.selected_rank not in ranks:
                culprits = [r for r in snapshot.verdict.culprit_ranks if r in ranks]
                self.selected_rank = next(iter(culprits or list(ranks)), None)

    def on_rank_table_selected(self, message: RankTable.Selected) -> None:
        self.selected_rank = message.rank

    # -- pause --------------------------------------------------------------------------------

    def action_pause(self) -> None:
        self.paused = True

    def action_resume(self) -> None:
        self.paused = False
        if self.latest is not None and self.latest is not self.shown:
            self._show(self.latest)

    # -- bundle and recovery -----------------------------------------------------------------

    def action_bundle(self) -> None:
        if self.on_bundle is not None and self.shown is not None:
            path = self.bundle_dir / bundle_name(self.job, self.shown.taken_at)
            self._tell(f"writing {path.name}…")
            self.write_bundle(self.on_bundle, self.shown, path)

    @work(thread=True, group="bundle")
    def write_bundle(self, writer: BundleWriter, snapshot: TriageSnapshot, path: Path) -> None:
        try:
            writer(snapshot, path)
        except Exception as exc:  # a failed write is reported, the TUI keeps running
            self.post_message(ActionFailed("bundle", str(exc)))
        else:
            self.post_message(BundleWritten(path))

    def on_bundle_written(self, message: BundleWritten) -> None:
        self._tell(f"bundle written: {message.path}", title="bundle", timeout=10)

    def action_recover(self) -> None:
        on_recover = self.on_recover
        if on_recover is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.request_recovery(on_recover)

        self.push_screen(
            Confirm(f"Ask every rank of job {escape_control(self.job)} for an in-process restart?"),
            answered,
        )

    @work(thread=True, group="recover")
    def request_recovery(self, on_recover: RecoveryRequest) -> None:
        try:
            answer = on_recover()
        except Exception as exc:  # a refused request is reported, the TUI keeps running
            self.post_message(ActionFailed("recover", str(exc)))
        else:
            self.post_message(
                RecoveryRequested(answer if isinstance(answer, str) else "recovery requested")
            )

    def on_recovery_requested(self, message: RecoveryRequested) -> None:
        self._tell(message.answer, title="recover", timeout=10)

    def on_action_failed(self, message: ActionFailed) -> None:
        self._tell(message.error, title=f"{message.action} failed", severity="error", timeout=15)

    def _tell(
        self,
        message: str,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
    ) -> None:
        """A notification: its text (file names, the ranks' answer, an error) escaped,
        never read as markup."""
        self.notify(
            escape_control(message),
            title=escape_control(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    # -- keys ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide keys that cannot work here; grey out those that wait for data."""
        if action == "pause":
            return not self.paused
        if action == "resume":
            return self.paused
        if action == "bundle":
            if self.on_bundle is None:
                return False
            return True if self.shown is not None else None
        if action == "recover":
            return self.on_recover is not None
        if action == "refresh_now":
            return None if self.collecting else True
        return True

    def action_help(self) -> None:
        if self.screen.query(HelpPanel):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    @property
    def exit_code(self) -> int:
        """What ``--once`` would return for the verdict on screen: 1 for a hang."""
        return int(self.shown is not None and self.shown.verdict.hang_class.is_hang)

    async def action_quit(self) -> None:
        self.exit(self.exit_code)


def run_tui(
    provider: Provider,
    interval: float,
    job: str,
    on_bundle: BundleWriter | None = None,
    on_recover: RecoveryRequest | None = None,
) -> int:
    """Run the TUI until the person quits; returns the exit code for the last verdict shown."""
    app = TriageApp(provider, interval, job, on_bundle=on_bundle, on_recover=on_recover)
    result = app.run()
    return result if result is not None else app.return_code or 0
