"""Host lists (ClusterShell NodeSet) and the tagged lines host documents travel in."""

from __future__ import annotations

import random

import pytest

from doctor.errors import InputError, UsageError
from doctor.remote.frames import CHUNK, Reassembler, encode
from doctor.remote.hosts import fold, parse_hosts, read_hostfile


def test_host_lists_expand_in_the_order_given_and_fold_back() -> None:
    # GIVEN a SLURM-style list WHEN parsed THEN hosts come in order, without repeats
    assert parse_hosts("gpu[001-003],login1,gpu002") == ["gpu001", "gpu002", "gpu003", "login1"]
    # AND 2,048 hosts fold back to one short line
    assert fold(f"h{i}" for i in range(1, 2049)) == "h[1-2048]"


def test_a_bad_host_list_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="host list"):
        parse_hosts("h[3-1]")


def test_a_range_clustershell_fails_on_with_a_bare_value_error_is_a_usage_error() -> None:
    # GIVEN "[----]", on which ClusterShell's range parser raises ValueError, not its own
    # error (hypothesis found it in test_host_lists_yield_host_names_or_one_usage_error)
    with pytest.raises(UsageError, match="host list"):
        parse_hosts("[----]")
    # AND a host document naming it folds beside the others, as a name it cannot read
    assert fold(["h1", "[----]", "h2"]) == "h[1-2],[----]"


def test_hostfile_reads_mpi_and_plain_lines(tmp_path) -> None:
    # GIVEN a host file with comments, MPI slots and a range
    f = tmp_path / "hosts"
    f.write_text("# the job\nh1 slots=8\n\nh[2-3]  # rack 2\n")
    # WHEN read THEN every host, once
    assert read_hostfile(f) == ["h1", "h2", "h3"]
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    with pytest.raises(InputError, match="names no host"):
        read_hostfile(empty)


def test_documents_survive_any_interleaving_of_their_lines() -> None:
    # GIVEN three hosts' documents cut into tagged lines, shuffled together with noise
    docs = {f"h{i}": ("x" * (CHUNK * i + 17)) + f'{{"host": "h{i}"}}' for i in range(1, 4)}
    lines = [line for host, text in docs.items() for line in encode(host, text)]
    lines += ["srun: error: something", "NCDOC1 h9 7 2 bad index", "NCDOC1 h9 x y z"]
    random.Random(7).shuffle(lines)
    # WHEN reassembled
    frames = Reassembler()
    completed = [h for line in lines if (h := frames.feed(line))]
    # THEN each document comes back whole, and nothing else does
    assert sorted(completed) == ["h1", "h2", "h3"]
    assert frames.done == docs
