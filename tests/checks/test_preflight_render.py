"""Renderers: print to a Console on a StringIO at a fixed width and compare strings."""

from __future__ import annotations

import json
from io import StringIO

from rich.console import Console

from doctor.checks.render import findings_table, print_report, summary_line, timeout_table, to_json
from doctor.checks.report import Report
from doctor.jobconfig.config import Config
from doctor.jobconfig.timeouts import resolve_timeouts
from doctor.model import Finding, Severity

FINDINGS = (
    Finding(
        "env.unknown",
        Severity.WARN,
        "NCCL_TIMEOUT",
        "NCCL_TIMEOUT is read by nothing.",
        "unset NCCL_TIMEOUT",
    ),
    Finding("env.deprecated", Severity.PASS, "environment", "no deprecated alias is set"),
    Finding(
        "net.socket-ifname",
        Severity.FAIL,
        "NCCL_SOCKET_IFNAME",
        "NCCL_SOCKET_IFNAME=ib matches nothing.",
        "unset NCCL_SOCKET_IFNAME",
    ),
    Finding("gpu.health", Severity.SKIP, "nvml", "no GPU."),
)


def report() -> Report:
    return Report(
        "single-node",
        FINDINGS,
        lane_source="--lane",
        conf_files=("/etc/nccl.conf",),
        timeouts=resolve_timeouts(Config(), {}),
    )


def render(renderable, width: int = 90) -> str:
    out = StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


def test_findings_table_groups_by_family_with_marks_and_fixes():
    assert (
        render(findings_table(report()))
        == """\
nccl-doctor preflight · lane single-node                                                  
┏━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃        ┃ check             ┃ finding                                                   ┃
┡━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ ! warn │ env.unknown       │ NCCL_TIMEOUT is read by nothing.                          │
│        │                   │ fix: unset NCCL_TIMEOUT                                   │
│ ✓ pass │ env.deprecated    │ environment: no deprecated alias is set                   │
├────────┼───────────────────┼───────────────────────────────────────────────────────────┤
│ ✗ fail │ net.socket-ifname │ NCCL_SOCKET_IFNAME=ib matches nothing.                    │
│        │                   │ fix: unset NCCL_SOCKET_IFNAME                             │
├────────┼───────────────────┼───────────────────────────────────────────────────────────┤
│ - skip │ gpu.health        │ nvml: no GPU.                                             │
└────────┴───────────────────┴───────────────────────────────────────────────────────────┘
"""
    )


def test_timeout_table_shows_the_chain_and_worst_cases():
    text = render(timeout_table(report().timeouts), width=100)
    lines = [line.rstrip() for line in text.splitlines()]
    assert any(
        line.startswith(
            "│ collective timeout (watchdog) │   10m │ PyTorch default for "
            "nccl (10m nccl, 30m gloo or mixed)"
        )
        for line in lines
    )
    assert any(
        line.startswith("│ wrapper hard timeout          │   off │ restart wrapper off")
        for line in lines
    )
    assert any(
        line.startswith("│ time to detect a hang         │   10m │ worst case") for line in lines
    )
    assert any(
        line.startswith("│ time to recover               │   11m │ a job restart") for line in lines
    )


def test_summary_line_counts_and_names_lane_source_and_files():
    assert render(summary_line(report()), width=200).strip() == (
        "preflight FAIL: 1 fail · 1 warn · 1 pass · 1 skip · lane single-node (--lane) · "
        "NCCL config files read: /etc/nccl.conf"
    )


def test_full_report_prints_table_chain_and_summary_in_order():
    out = StringIO()
    print_report(report(), Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    assert (
        text.index("nccl-doctor preflight")
        < text.index("timeout chain")
        < text.index("preflight FAIL")
    )


def test_json_is_the_design_contract_plus_timeouts():
    data = json.loads(to_json(report()))
    assert list(data) == ["schema", "lane", "findings", "summary", "timeouts"]
    assert data["schema"] == "nccl-doctor/preflight/v1" and data["lane"] == "single-node"
    assert data["findings"][0] == {
        "check": "env.unknown",
        "severity": "warn",
        "subject": "NCCL_TIMEOUT",
        "message": "NCCL_TIMEOUT is read by nothing.",
        "fix": "unset NCCL_TIMEOUT",
    }
    assert {k: data["summary"][k] for k in ("fail", "warn", "pass", "skip")} == {
        "fail": 1,
        "warn": 1,
        "pass": 1,
        "skip": 1,
    }


def test_consecutive_skips_with_one_reason_collapse_into_one_row():
    skips = tuple(
        Finding(check, Severity.SKIP, "nvml", "NVML cannot start.")
        for check in ("gpu.xid", "gpu.ecc", "nvlink.down")
    )
    text = render(findings_table(Report("single-node", skips)))
    assert "│ - skip │ gpu.*, nvlink.* (3) │ nvml: NVML cannot start." in text
    assert text.count("NVML cannot start") == 1


def test_config_sources_in_brackets_are_printed_not_parsed_as_markup():
    from preflight_helpers import config

    chain = resolve_timeouts(config('[distributed]\ntimeout = "60s"\n'), {})
    assert "[distributed] timeout in nccl-doctor.toml" in render(timeout_table(chain), width=120)
