"""The reader: hostile, broken and odd dumps become ``Skipped``; good ones are read."""

from __future__ import annotations

import io
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from clitools import clean_env, run_cli

from doctor.flight import reader
from doctor.flight.align import align
from doctor.flight.dump import reduce_dump_raw
from doctor.flight.reader import rank_of, read_flight

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fr"
GLOO = FIXTURES / "gloo-wrong-collective"


def test_hostile_pickle_really_would_run_code(tmp_path: Path) -> None:
    # GIVEN the hostile fixture WHEN a plain pickle.loads reads it THEN it runs code
    # (this proves the next test can fail)
    marker = tmp_path / "pwned"
    code = "import pickle,sys; pickle.loads(open(sys.argv[1],'rb').read())"
    subprocess.run(
        [sys.executable, "-c", code, str(FIXTURES / "hostile_rank_0.pkl")],
        env=clean_env({"NCCL_DOCTOR_TEST_MARKER": str(marker)}),
        timeout=60,
        capture_output=True,
    )
    assert marker.exists()


def test_hostile_pickle_runs_nothing(tmp_path: Path) -> None:
    # GIVEN a pickle that would touch a marker file WHEN analyze reads it
    marker = tmp_path / "pwned"
    res = run_cli(
        "analyze",
        str(FIXTURES / "hostile_rank_0.pkl"),
        env=clean_env({"NCCL_DOCTOR_TEST_MARKER": str(marker)}),
    )
    # THEN nothing ran, and the one sentence says why the file was refused
    assert not marker.exists()
    assert res.returncode == 2
    assert "hostile pickle" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("truncated_rank_1", "truncated or corrupt"),
        ("empty_rank_2", "empty"),
        ("version-1.5_rank_3", "format version 1.5 is not supported"),
        ("not-a-dump_rank_5", "not a Flight Recorder dump"),
        ("hostile_rank_0.pkl", "hostile pickle"),
        ("bad-seq_rank_6", "malformed entries"),
    ],
)
def test_bad_dump_is_skipped_with_its_reason(name: str, reason: str) -> None:
    read = read_flight([FIXTURES / name])
    assert read.dumps == ()
    (skip,) = read.skipped
    assert skip.rank == rank_of(name) and reason in skip.reason


def test_broken_archive_is_reported_not_raised() -> None:
    read = read_flight([FIXTURES / "not-a-tar_rank_7.tar.gz", GLOO])
    assert len(read.dumps) == 4
    assert [(s.rank, "unreadable" in s.reason) for s in read.skipped] == [(None, True)]


def test_bad_dumps_do_not_stop_the_good_ones(tmp_path: Path) -> None:
    # GIVEN three good gloo dumps and a truncated one for rank 1
    for r in (0, 2, 3):
        shutil.copy(GLOO / f"rank_{r}", tmp_path / f"rank_{r}")
    shutil.copy(FIXTURES / "truncated_rank_1", tmp_path / "rank_1")
    read = read_flight([tmp_path])
    # THEN the three are read, rank 1 is reported, and the culprit is still found
    assert [d.rank for d in read.dumps] == [0, 2, 3]
    assert [s.rank for s in read.skipped] == [1]
    fa = align(read.dumps, read.skipped)
    assert fa.divergent[0].divergence.culprits == (2,)


def test_folder_with_missing_ranks(tmp_path: Path) -> None:
    for r in (0, 2, 3):
        shutil.copy(GLOO / f"rank_{r}", tmp_path / f"node-7_rank_{r}")
    read = read_flight([tmp_path])
    fa = align(read.dumps, read.skipped, world_size=4)
    assert fa.missing_dumps == (1,)
    assert fa.divergent[0].divergence.culprits == (2,)


def test_gloo_dump_without_pg_config_recovers_members() -> None:
    read = read_flight([FIXTURES / "no-pg-config_rank_0"])
    (dump,) = read.dumps
    assert dump.backend == "gloo" and dump.config == {}
    fa = align(read.dumps, world_size=4)
    assert fa.groups[0].members == (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank_3", 3),
        ("_dump_12", 12),
        ("nccl_trace_rank_7", 7),
        ("host-a12_rank5.json", 5),
        ("node0042-rank-9", 9),
        ("fault_injection.log", None),
        ("evidence.json", None),
        ("stacks/rank_1.json", None),
        ("README.md", None),
    ],
)
def test_rank_from_any_naming(name: str, rank: int | None) -> None:
    assert rank_of(name) == rank


def _culprits(path: Path) -> tuple[int, ...]:
    read = read_flight([path])
    return align(read.dumps, read.skipped).divergent[0].divergence.culprits


def test_tar_zip_and_explicit_files_read_the_same(tmp_path: Path) -> None:
    tar = tmp_path / "dumps.tar.gz"
    with tarfile.open(tar, "w:gz") as t:
        t.add(GLOO, arcname="fr")
    zf = tmp_path / "dumps.zip"
    with zipfile.ZipFile(zf, "w") as z:
        for p in GLOO.iterdir():
            z.write(p, f"dumps/{p.name}")
    files = sorted(GLOO.iterdir())
    read = read_flight(files)
    assert len(read.dumps) == 4
    assert _culprits(tar) == _culprits(zf) == _culprits(GLOO) == (2,)


def test_json_dump_is_read(tmp_path: Path) -> None:
    # GIVEN a dump in the _dump_fr_trace_json layout (lists for tuples, 0 for None)
    doc = pickle.loads((GLOO / "rank_2").read_bytes())
    for e in doc["entries"]:
        e["process_group"] = list(e["process_group"])
        e.pop("frames", None)
    import json

    (tmp_path / "rank_2.json").write_text(json.dumps(doc))
    (dump,) = read_flight([tmp_path / "rank_2.json"]).dumps
    assert dump.groups["0"].ops[-1].name == "all_gather"


def test_oldest_supported_version_is_read(tmp_path: Path) -> None:
    # GIVEN a 2.2-style dump: no pg_status, no is_p2p, no p2p_seq_id
    doc = pickle.loads((GLOO / "rank_0").read_bytes())
    doc["version"] = "2.2"
    doc.pop("pg_status")
    for e in doc["entries"]:
        for k in ("is_p2p", "p2p_seq_id", "pg_id"):
            e.pop(k)
    buf = io.BytesIO()
    pickle.dump(doc, buf)
    (tmp_path / "rank_0").write_bytes(buf.getvalue())
    (dump,) = read_flight([tmp_path]).dumps
    assert dump.version == "2.2" and dump.groups["0"].enqueued == 7


def test_nothing_readable_is_an_input_error(tmp_path: Path) -> None:
    os.mkdir(tmp_path / "empty")
    res = run_cli("analyze", str(tmp_path / "empty"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    res = run_cli("analyze", str(tmp_path / "nope"))
    assert res.returncode == 2 and "no such file or folder" in res.stderr


def _many(tmp_path: Path, n: int) -> Path:
    """``n`` dumps (copies of a real gloo dump) and one truncated: the parallel path."""
    for r in range(n):
        shutil.copy(GLOO / "rank_0", tmp_path / f"rank_{r}")
    shutil.copy(FIXTURES / "truncated_rank_1", tmp_path / f"rank_{n}")
    return tmp_path


def test_large_folder_is_read_in_workers(tmp_path: Path) -> None:
    read = read_flight([_many(tmp_path, 70)])
    assert len(read.dumps) == 70 and [s.rank for s in read.skipped] == [70]
    assert {d.rank for d in read.dumps} == set(range(70))


def test_large_folder_is_read_from_a_thread(tmp_path: Path) -> None:
    # GIVEN a caller with other threads running (triage collects in threads), in a process
    # of its own: spawned workers leave multiprocessing's resource tracker running until
    # that process ends
    import subprocess
    import sys

    folder = _many(tmp_path, 70)
    code = (
        "import sys, threading; from pathlib import Path\n"
        "from doctor.flight.reader import read_flight\n"
        "out = []\n"
        "read = lambda: out.append(len(read_flight([Path(sys.argv[1])]).dumps))\n"
        "t = threading.Thread(target=read); t.start(); t.join(120); print(out)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=180
    )
    # THEN the workers are spawned, not forked, and the result is the same
    assert done.stdout.strip() == "[70]", done.stderr[-2000:]


def test_a_large_dump_file_is_read_in_a_third_of_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the benchmark's dump of one rank of a 4,096-rank job (2,000 entries, 550 kB)
    monkeypatch.syspath_prepend(str(FIXTURES.parents[2] / "benchmarks"))
    bench = __import__("bench_analyze")
    path = tmp_path / "rank_5"
    path.write_bytes(pickle.dumps(bench.dump_of(5, 4096, 2000, 5), 2))
    # WHEN a worker reads it
    hint = reader._Hint()
    got = reader._reduce_pieces(5, "rank_5", path, hint)
    # THEN it reads the head and the newest entries only, and reduces it as the whole would
    assert hint.head is not None and hint.head + hint.tail < path.stat().st_size * 0.4
    assert got == reduce_dump_raw(5, "rank_5", path.read_bytes())


def test_a_dump_file_cut_short_while_it_is_read_is_a_skip(tmp_path: Path) -> None:
    # GIVEN a dump whose file is cut short after its size was taken (a job still writing)
    path = tmp_path / "rank_3"
    path.write_bytes(pickle.dumps({"version": "2.10", "entries": [{"a": "b" * 100_000}]}, 2))
    real = reader._Pieces

    def cut(fd: int, size: int) -> reader._Pieces:
        os.truncate(path, size // 2)
        return real(fd, size)

    # WHEN a worker reads it
    with pytest.MonkeyPatch.context() as m:
        m.setattr(reader, "_Pieces", cut)
        got = reader._reduce_file((3, "rank_3", str(path)), reader._Hint())
    # THEN it is skipped with the reason, and nothing waits or raises
    assert got == "rank_3: the file was cut short while it was read"


def test_a_worker_faults_in_no_fresh_memory_for_each_dump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each dump's copies (1.4 MB at 32,768 ranks: the pieces joined, a BytesIO of them, a
    buffered reader's blocks) were pages glibc gave back and faulted in zeroed again, 344 a
    dump; the unpickler now reads the file's buffer in place. Counted in a process of its
    own, with glibc's default thresholds."""
    monkeypatch.syspath_prepend(str(FIXTURES.parents[2] / "benchmarks"))
    data = pickle.dumps(__import__("bench_analyze").dump_of(5, 32768, 2000, 5), 2)
    for r in range(40):
        (tmp_path / f"rank_{r}").write_bytes(data)
    code = (
        "import resource, sys; from doctor.flight import reader\n"
        "jobs = [(r, f'rank_{r}', f'{sys.argv[1]}/rank_{r}') for r in range(40)]\n"
        "reader._reduce_files(jobs[:8])\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "reader._reduce_files(jobs[8:])\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 32)\n"
    )
    run = [sys.executable, "-c", code, str(tmp_path)]
    done = subprocess.run(run, capture_output=True, text=True, check=True, env=clean_env())
    faults = float(done.stdout)
    assert faults < 30, faults


def test_a_process_allowed_one_cpu_reads_a_large_folder_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login node's cgroup or ``taskset`` may leave one CPU of many: workers would only
    take turns on it. Before, the host's CPU count decided."""
    for r in range(reader.PARALLEL_FROM):
        (tmp_path / f"rank_{r}").write_bytes(b"x")
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {3})
    assert reader._parallel([tmp_path], [], None, set()) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {3, 5})
    assert reader._parallel([tmp_path], [], None, set()) is not None


def test_a_folder_is_listed_as_a_path_sort_would_without_links_or_special_files(
    tmp_path: Path,
) -> None:
    """``_folder`` walks by the directory's file types (no ``stat`` a file), iteratively:
    the same names in the same order as ``sorted(rglob)`` of the regular files, no link
    followed or taken, no FIFO, and a folder nested 600 deep is no recursion error."""
    (tmp_path / "a-b").mkdir()
    (tmp_path / "a" / "x").mkdir(parents=True)
    for name in ("rank_1", "a-b/rank_2", "a/rank_3", "a/x/rank_4", "a.txt"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "link_5").symlink_to(tmp_path / "rank_1")
    (tmp_path / "dirlink").symlink_to(tmp_path / "a")
    os.mkfifo(tmp_path / "rank_6")
    deep = tmp_path.joinpath(*["d"] * 600)
    deep.mkdir(parents=True)
    (deep / "rank_7").write_bytes(b"x")
    listed = [name for name, _opener in reader._folder(tmp_path)]
    expected = [
        str(p.relative_to(tmp_path))
        for p in sorted(tmp_path.rglob("*"))
        if p.is_file() and not p.is_symlink()
    ]
    assert listed == expected
    assert listed[:4] == ["a/rank_3", "a/x/rank_4", "a-b/rank_2", "a.txt"]  # by parts
    assert listed[-1] == "rank_1" and any(n.endswith("d/rank_7") for n in listed)
