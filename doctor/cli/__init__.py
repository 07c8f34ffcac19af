"""The ``nccl-doctor`` console script: one module per command, registered here in --help order.

Each command is a plain module-level function, so tests can import and call it directly.
"""

from __future__ import annotations

import sys

import typer

from doctor.cli.analyze import analyze
from doctor.cli.bench import bench
from doctor.cli.collect import collect
from doctor.cli.fleethost import fleet_host
from doctor.cli.launch import launch
from doctor.cli.playbook import playbook
from doctor.cli.preflight import preflight
from doctor.cli.recover import recover
from doctor.cli.report import report
from doctor.cli.triage import triage
from doctor.cli.watch import watch
from doctor.errors import DoctorError
from doctor.trust.escape import escape_control

app = typer.Typer(
    name="nccl-doctor",
    help="Preflight, live triage and in-process recovery for distributed PyTorch jobs over NCCL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.command("preflight")(preflight)
app.command("triage")(triage)
app.command("collect")(collect)
app.command("analyze")(analyze)
app.command("report")(report)
# launch passes everything after -- to the training command
app.command("launch", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
    launch
)
app.command("recover")(recover)
app.command("watch")(watch)
app.command("bench")(bench)
app.command("playbook")(playbook)
app.command("fleet-host", hidden=True)(fleet_host)


def main() -> None:
    """Run the CLI; a ``DoctorError`` becomes one sentence on stderr and its exit code."""
    try:
        app()
    except DoctorError as exc:
        # one line, whatever a file name or a dump put into the message
        print(f"nccl-doctor: {escape_control(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
