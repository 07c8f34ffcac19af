"""The selected rank's whole stack: every thread, main thread first, innermost frame first."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.view import RankDetail, frame_text, rank_detail
from doctor.trust.safe_text import safe_text


def render_detail(detail: RankDetail) -> Text:
    text = safe_text(detail.summary, style="bold")
    text.append("\n")
    for thread in detail.threads:
        flags = [
            f
            for f, on in (
                ("main", thread.is_main),
                ("holds the GIL", thread.holds_gil),
                ("idle", not thread.active),
            )
            if on
        ]
        text.append("\n")
        text.append(safe_text(f"Thread {thread.thread_id} {thread.name!r}", style="bold cyan"))
        text.append(
            f" ({', '.join(flags)})\n" if flags else "\n",
            style="bold red" if thread.holds_gil else "dim",
        )
        for frame in thread.frames:
            text.append(safe_text(f"  {frame_text(frame)}")).append("\n")
    if not detail.threads:
        text.append("\nno stack for this rank\n", style="red")
    for line in detail.missing:
        text.append(safe_text(f"missing {line}", style="yellow")).append("\n")
    return text


class StackView(Widget):
    """Shows ``rank``'s stack from ``snapshot``; both are bound to the app's state."""

    DEFAULT_CSS = "StackView { height: auto; }"

    snapshot: reactive[TriageSnapshot | None] = reactive(None, layout=True)
    rank: reactive[int | None] = reactive(None, layout=True)

    @property
    def detail(self) -> RankDetail | None:
        if self.snapshot is None or self.rank is None:
            return None
        return rank_detail(self.snapshot, self.rank)

    def render(self) -> Text:
        detail = self.detail
        if detail is None:
            return Text("select a rank in the table", style="dim")
        return render_detail(detail)
