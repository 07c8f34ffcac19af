"""Generated hostile inputs for the readers of configuration, environment, NCCL config files,
registry records and restart-store values (issue 14). The property, for every input: the
reader returns a result, or raises the one error it documents (an exit 2 with one
sentence at the CLI); never another exception, and within its time and memory bound."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzz_counter import TRIED, tried
from hypothesis import given
from hypothesis import strategies as st

from doctor.checks.catalogue import catalogue
from doctor.checks.facts import Facts
from doctor.checks.fixes import _SAFE_LINE, emit_env
from doctor.checks.ncclconf import ConfFile, merge, parse_conf
from doctor.checks.registry import run_checks
from doctor.checks.values import check_value
from doctor.errors import DoctorError
from doctor.jobconfig.config import parse_config
from doctor.jobconfig.durations import parse_duration
from doctor.jobdir.registry import RankRecord, read_ranks
from doctor.restart.auth import Sealer, new_key
from doctor.restart.store import valid_fault

pytestmark = pytest.mark.fuzz
SECONDS = 10.0
"""Generous: it catches a quadratic or endless reader, not a machine busy with other work."""
PEAK_BYTES = 64 << 20
NAMES = sorted(catalogue())

hostile_text = st.one_of(
    st.text(max_size=200),
    st.builds(lambda n: "9" * n, st.integers(4000, 6000)),
    st.sampled_from(
        [
            "inf",
            "-inf",
            "nan",
            "1e400",
            "0x" + "f" * 40,
            "0" * 5000,
            "\x1b]52;c;ZWNobyBwd25lZA==\x07",
            "\x1b[2J",
            "a\nexport X=$(touch pwned)",
            "`touch pwned`",
            "$(touch pwned)",
            "'\"'\"'",
            "\u202e",
            "16k",
            "10m",
            "-1",
            "",
        ]
    ),
    st.builds(lambda n: "1" * n + "s", st.integers(0, 131072)),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def bounded(reader: str, call: Callable[[], Any], allowed: tuple[type[BaseException], ...]) -> Any:
    """Run one input: only ``allowed`` errors, within the time and memory bound."""
    tried(reader)
    tracemalloc.start()
    start = time.monotonic()
    try:
        return call()
    except allowed:
        return None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        took = time.monotonic() - start
        assert took < SECONDS, f"{reader} took {took:.1f}s"
        assert peak < PEAK_BYTES, f"{reader} allocated {peak >> 20} MB"


@given(
    st.dictionaries(
        st.sampled_from(["distributed", "restart", "compile", "lane", "x"]), json_values, max_size=4
    )
)
def test_config_tables(data: dict[str, Any]) -> None:
    bounded("config", lambda: parse_config(data, "", "fuzz.toml"), (DoctorError,))


@given(st.text(max_size=400))
def test_config_files(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    from doctor.jobconfig.config import parse_config_file

    path = tmp_path_factory.mktemp("cfg") / "nccl-doctor.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    bounded("config", lambda: parse_config_file(path), (DoctorError,))


@given(json_values)
def test_durations(value: Any) -> None:
    seconds = bounded("duration", lambda: parse_duration(value), (ValueError,))
    assert seconds is None or 0 <= seconds <= 366 * 86400


@given(st.sampled_from(NAMES), hostile_text)
def test_env_values(name: str, value: str) -> None:
    spec = catalogue()[name]
    bounded("env value", lambda: check_value(spec, value), ())


@given(
    st.dictionaries(
        st.sampled_from([*NAMES[:40], "WORLD_SIZE", "NCCL_SOCKT_IFNAME"]), hostile_text, max_size=5
    )
)
def test_env_checks_and_emit_env(env: dict[str, str]) -> None:
    # every finding comes back, no family crashes, and --emit-env prints only inert shell
    report = bounded("env checks", lambda: run_checks(Facts(env=env)), ())
    assert not [f for f in report.findings if f.check.endswith("internal-error")]
    snippet, _ = emit_env(report.findings)
    for line in snippet.split("\n"):
        assert not line or line.startswith("# ") or _SAFE_LINE.fullmatch(line), line


@given(st.text(max_size=600))
def test_nccl_conf(text: str) -> None:
    def read() -> Any:
        entries = parse_conf(text)
        merged = merge({}, [ConfFile("/etc/nccl.conf", text)])
        facts = Facts(env=merged.env, env_sources=merged.sources)
        snippet, _ = emit_env(run_checks(facts).findings)
        return entries, snippet

    _, snippet = bounded("nccl.conf", read, ())
    for line in snippet.split("\n"):
        assert not line or line.startswith("# ") or _SAFE_LINE.fullmatch(line), line


@given(
    st.dictionaries(
        st.sampled_from(list(RankRecord.__dataclass_fields__) + ["x"]), json_values, max_size=10
    )
)
def test_registry_records(tmp_path_factory: pytest.TempPathFactory, record: dict[str, Any]) -> None:
    directory = tmp_path_factory.mktemp("reg")
    (directory / "rank-0.json").write_text(json.dumps(record))
    (directory / "rank-1.json").write_bytes(json.dumps(record).encode()[:17])
    records = bounded("registry record", lambda: read_ranks(directory), ())
    for r in records:
        assert 0 <= r.rank < r.world_size <= 1 << 18


@given(json_values, st.binary(max_size=200))
def test_store_values(record: Any, raw: bytes) -> None:
    sealer = Sealer(new_key())
    bounded("store value", lambda: valid_fault(record, 4), ())
    assert bounded("store value", lambda: sealer.open("k", raw), ()) is None
    sealed = sealer.seal("k", json.dumps(record, default=str))
    assert sealer.open("other-key", sealed) is None


def test_the_fuzz_tests_count_what_they_try() -> None:
    # in any order and in any worker of a parallel run: a fuzz test run here counts
    before = TRIED.get("store value", 0)
    test_store_values()
    assert TRIED["store value"] > before, "a fuzz test ran no input"


FR_DUMP = (
    Path(__file__).resolve().parents[1] / "fixtures" / "fr" / "gloo-wrong-collective" / "rank_0"
)
ENTRY_FIELDS = [
    "collective_seq_id",
    "record_id",
    "profiling_name",
    "process_group",
    "input_sizes",
    "input_dtypes",
    "state",
    "frames",
    "time_created_ns",
    "is_p2p",
    "pg_id",
]


@given(
    st.sampled_from(["entry", "version", "pg_config", "pg_status", "entries", "bytes"]),
    st.sampled_from(ENTRY_FIELDS),
    json_values,
    st.binary(max_size=300),
)
def test_flight_recorder_dumps(
    tmp_path_factory: pytest.TempPathFactory, where: str, field: str, value: Any, raw: bytes
) -> None:
    # a real dump with one hostile field, or hostile bytes, as pickle and as JSON
    import pickle

    from doctor.flight.reader import read_flight

    doc = pickle.loads(FR_DUMP.read_bytes())
    if where == "entry":
        doc["entries"][0][field] = value
    elif where != "bytes":
        doc[where] = value
    folder = tmp_path_factory.mktemp("fr")
    (folder / "rank_0").write_bytes(raw if where == "bytes" else pickle.dumps(doc))
    try:
        (folder / "rank_1.json").write_text(json.dumps(doc, default=str))
    except (ValueError, TypeError):
        pass
    read = bounded("flight recorder dump", lambda: read_flight([folder]), ())
    assert all(s.reason for s in read.skipped)


EVIDENCE_KEYS = ["job", "ranks_expected", "processes", "stacks", "dumps", "world_size", "x"]


@given(st.dictionaries(st.sampled_from(EVIDENCE_KEYS), json_values, max_size=6))
def test_evidence_json(data: dict[str, Any]) -> None:
    from doctor.codec import DecodeError
    from doctor.evidence import SCHEMA, Evidence

    document = {"schema": SCHEMA, "job": "j", "ranks_expected": None, **data}
    evidence = bounded("evidence.json", lambda: Evidence.from_json(document), (DecodeError,))
    if evidence is not None and evidence.ranks_expected is not None:
        assert 0 <= evidence.ranks_expected <= 1 << 18
