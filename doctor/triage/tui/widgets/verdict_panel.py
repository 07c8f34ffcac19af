"""The verdict: hang class, culprits, the evidence behind it and the playbook to follow.

The same renderables ``nccl-doctor triage --once`` prints (``doctor.verdict.render``),
plus the playbook's "What to do", so the screen and the terminal never disagree.
"""

from __future__ import annotations

from functools import lru_cache

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from doctor import playbooks
from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.view import playbook_section
from doctor.verdict.render import evidence_table, skipped_table, verdict_panel


@lru_cache(maxsize=32)
def playbook_steps(playbook_id: str) -> str:
    """The playbook's "What to do" section; read once per hang class, not on every repaint."""
    return playbook_section(playbooks.load(playbook_id)) if playbooks.resolve(playbook_id) else ""


def render_verdict(snapshot: TriageSnapshot) -> RenderableType:
    """What ``--once`` prints of the verdict, then the playbook's steps."""
    verdict = snapshot.verdict
    parts: list[RenderableType | None] = [
        verdict_panel(verdict),
        evidence_table(snapshot.analysis),
        skipped_table(snapshot.evidence, snapshot.flight),
    ]
    steps = playbook_steps(verdict.playbook)
    if steps:
        parts += [Text("what to do", style="bold"), Markdown(steps)]
    return Group(*(p for p in parts if p is not None))


class VerdictPanel(Widget):
    """Draws the verdict of the snapshot on screen."""

    DEFAULT_CSS = "VerdictPanel { height: auto; }"

    snapshot: reactive[TriageSnapshot | None] = reactive(None, layout=True)

    def render(self) -> RenderableType:
        """The verdict of the snapshot, or a note while the first one is collected."""
        if self.snapshot is None:
            return Text("collecting evidence…", style="dim")
        return render_verdict(self.snapshot)
