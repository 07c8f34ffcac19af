"""Item 7 of issue 14 for preflight: values from the environment, ``nccl.conf`` lines and
file names reach the report on a terminal only as escapes, never as markup."""

from __future__ import annotations

from dataclasses import replace
from io import StringIO
from pathlib import Path

from clitools import clean_env, run_cli
from hostile_text import HOSTILE, assert_inert
from rich.console import Console

from doctor.checks.fixes import comment
from doctor.checks.render import report_renderable
from doctor.checks.report import Report
from doctor.jobconfig.config import Config
from doctor.jobconfig.timeouts import resolve_timeouts
from doctor.model import Finding, Severity


def printed(renderable: object) -> str:
    console = Console(file=StringIO(), force_terminal=True, width=4000, color_system="truecolor")
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_every_text_field_of_a_report_is_escaped() -> None:
    # GIVEN a report whose subject, message, fix, lane, lane source, config file names
    # and timeout sources all hold hostile text (a fix's lines are built inert by
    # checks.fixes, as every check builds them: its line breaks are kept)
    chain = resolve_timeouts(Config(), {})
    layers = tuple(replace(layer, title=HOSTILE, source=HOSTILE) for layer in chain.layers)
    chain = replace(chain, layers=layers, recover_how=HOSTILE)
    report = Report(
        HOSTILE,
        (
            Finding("env.unknown", Severity.WARN, HOSTILE, HOSTILE, f"unset X\n{comment(HOSTILE)}"),
            Finding(HOSTILE, Severity.FAIL, "s", HOSTILE),
        ),
        lane_source=HOSTILE,
        conf_files=(HOSTILE,),
        timeouts=chain,
    )
    # WHEN it is rendered on a terminal THEN nothing hostile is raw, each field was shown
    assert_inert(printed(report_renderable(report)), shown_at_least=10)


def test_preflight_cli_on_hostile_values_and_conf_file(tmp_path: Path) -> None:
    # GIVEN hostile values in the environment and in an nccl.conf whose name is hostile too
    conf = tmp_path / HOSTILE.replace("/", "_")
    conf.write_text(f"NCCL_SOCKET_IFNAME={HOSTILE}\nNCCL_IB_HCA{HOSTILE}=mlx5\n")
    env = clean_env(
        {
            "NCCL_CONF_FILE": str(conf),
            "NCCL_SOCKT_IFNAME": HOSTILE,
            "NCCL_DEBUG": HOSTILE,
            "NCCL_TIMEOUT": HOSTILE,
            "NCCL_NET_PLUGIN": HOSTILE,
            "FORCE_COLOR": "1",
            "COLUMNS": "4000",
        }
    )
    # WHEN preflight prints its report to a terminal
    out = run_cli("preflight", "--lane", "single-node", env=env, cwd=tmp_path)
    # THEN it answers (0 or 1) and nothing hostile reaches the terminal raw
    assert "Traceback" not in out.stderr and out.returncode in (0, 1), out.stderr
    assert_inert(out.stdout + out.stderr, shown_at_least=2)
