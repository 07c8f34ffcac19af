"""The ``nccl-doctor`` console script: one module per command, registered in --help order."""

from __future__ import annotations

import sys

import typer

from doctor.cli import (
    analyze,
    bench,
    collect,
    launch,
    playbook,
    preflight,
    recover,
    triage,
    watch,
)
from doctor.errors import DoctorError
from doctor.escape import escape_control

app = typer.Typer(
    name="nccl-doctor",
    help="Preflight, live triage and in-process recovery for distributed PyTorch jobs over NCCL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
for module in (preflight, triage, collect, analyze, launch, recover, watch, bench, playbook):
    module.register(app)


def main() -> None:
    """Run the CLI; a ``DoctorError`` becomes one sentence on stderr and its exit code."""
    try:
        app()
    except DoctorError as exc:
        # one line, whatever a file name or a dump put into the message
        print(f"nccl-doctor: {escape_control(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
