"""``nccl-doctor collect`` on this host, and ``triage``'s multi-host flags, through the real CLI."""

from __future__ import annotations

import json

import pytest
from clitools import clean_env
from triage_helpers import start_sleeper

from doctor.remote.document import SCHEMA
from doctor.remote.frames import Reassembler
from doctor.remote.reader import parse_document
from doctor.trust.subproc import stop_all


def test_collect_prints_this_hosts_document(cli, tmp_path) -> None:
    # GIVEN two ranks of job "cj" on this host (of a world of 4: two live elsewhere)
    env = {"TORCHELASTIC_RUN_ID": "cj", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
    procs = [
        start_sleeper(tmp_path, {**env, "RANK": str(r), "LOCAL_RANK": str(r)}, f"r{r}")
        for r in (0, 1)
    ]
    try:
        # WHEN collect runs, as srun or ssh would run it
        done = cli("collect", "--job", "cj", "--json", "--interval", "0.3", env=clean_env())
        framed = cli("collect", "--job", "cj", "--json", "--frames", "--interval", "0.3")
    finally:
        stop_all(procs)
    # THEN one versioned document names this host's ranks, and the world they belong to
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == SCHEMA
    assert (doc["world_size"], doc["local_ranks"]) == (4, [0, 1])
    assert sorted(p["rank"] for p in doc["processes"]) == [0, 1]
    # AND the framed form carries the same kind of document, line by line
    frames = Reassembler()
    hosts = [h for line in framed.stdout.splitlines() if (h := frames.feed(line))]
    assert len(hosts) == 1 and parse_document(frames.done[hosts[0]]).local_ranks == (0, 1)


def test_collect_on_a_host_without_the_job_still_answers(cli) -> None:
    done = cli("collect", "--job", "nosuchjob-xyz", "--json", "--interval", "0.1")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["processes"] == [] and "no rank of job" in doc["skipped"][0]["reason"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--pids", "1", "--hosts", "h1"), "need --job"),
        (("--job", "j", "--via", "pigeon", "--hosts", "h1"), "--via must be slurm or ssh"),
        (("--job", "j", "--hosts", "h1", "--timeout", "1"), "--timeout must be more than"),
        (("--job", "j", "--hosts", "h[3-1]"), "cannot read"),
        (("--job", "j", "--via", "ssh"), "--via ssh needs the hosts"),
        (("--job", "j", "--hosts", "h1", "--hostfile", "/x"), "one of --hosts or --hostfile"),
    ],
)
def test_bad_multi_host_flags_are_one_sentence(cli, args, says) -> None:
    done = cli("triage", *args, "--once")
    assert done.returncode == 2
    assert says in done.stderr and "Traceback" not in done.stderr
