"""Every check id preflight emits has a playbook with the fixed headings; the playbook command."""

from __future__ import annotations

import re

import pytest
from clitools import clean_env, run_cli
from preflight_helpers import facts

from doctor import playbooks
from doctor.checks.registry import run_checks

OWN_FAMILIES = ("env", "lane", "net", "nvls", "plugin", "timeout", "diag", "stack")
DESIGN_IDS = {
    "env.unknown",
    "env.deprecated",
    "env.invalid-value",
    "env.debug-in-production",
    "lane.ib-leak",
    "lane.ib-disabled-multinode",
    "net.socket-ifname",
    "nvls.restart",
    "plugin.restart",
    "plugin.missing",
    "timeout.watchdog-vs-hard",
    "timeout.soft-vs-hard",
    "timeout.heartbeat-vs-warmup",
    "timeout.watchdog-vs-warmup",
    "timeout.monitoring-disabled",
    "diag.ptrace",
    "diag.flight-recorder",
    "stack.versions",
    "stack.nccl-ras",
}


def emitted_ids() -> set[str]:
    """Check ids emitted over a clean, a broken and a restart-enabled environment."""
    broken = {
        "NCCL_X": "1",
        "NCCL_BLOCKING_WAIT": "1",
        "NCCL_BUFFSIZE": "1k",
        "NCCL_DEBUG": "TRACE",
        "NCCL_IB_HCA": "m",
        "NCCL_SOCKET_IFNAME": "zz",
        "NCCL_TUNER_PLUGIN": "nope",
        "TORCH_NCCL_ENABLE_MONITORING": "0",
    }
    scenarios = [
        facts({}),
        facts(broken),
        facts({}, "[restart]\nenabled = true\n"),
        facts({"NCCL_IB_DISABLE": "1"}, '[compile]\nwarmup = "1h"\n', lane="multi-node"),
    ]
    return {f.check for s in scenarios for f in run_checks(s).findings}


def test_every_emitted_check_id_has_a_playbook():
    ids = {i for i in emitted_ids() if i.split(".")[0] in OWN_FAMILIES}
    assert ids == DESIGN_IDS
    assert {i for i in ids if playbooks.resolve(i) is None} == set()


@pytest.mark.parametrize("family", OWN_FAMILIES)
def test_family_playbook_has_the_fixed_headings_in_order(family):
    text = playbooks.load(family)
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert tuple(headings) == playbooks.HEADINGS
    for check_id in (i for i in DESIGN_IDS if i.startswith(family + ".")):
        assert f"`{check_id}`" in text, check_id


def test_every_own_playbook_matches_a_check_family():
    assert set(OWN_FAMILIES) <= set(playbooks.known())


def test_playbook_command_prints_one_and_lists_all():
    done = run_cli("playbook", "env.invalid-value", env=clean_env())
    assert done.returncode == 0 and "What to do" in done.stdout and "strtoll" in done.stdout
    listing = run_cli("playbook", env=clean_env())
    assert listing.returncode == 0
    assert [line.split()[0] for line in listing.stdout.splitlines()] == playbooks.known()


def test_unknown_playbook_exits_2_naming_the_known_ids():
    done = run_cli("playbook", "no.such-id", env=clean_env())
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no playbook for 'no.such-id'" in done.stderr and "timeout" in done.stderr
