"""A yes/no question before an action that changes the job (recovery restarts every rank)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label


class Confirm(ModalScreen[bool]):
    """Dismisses with True on ``y``, False on ``n`` or escape."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Label(self.question, markup=False)
            yield Label("[b]y[/b] yes    [b]n[/b] no", id="confirm-keys")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
