"""Generated hostile inputs for the readers that landed after the first fuzz tests: bundles,
folders and archives through ``nccl-doctor analyze``, the log readers (NCCL RAS text and
JSON among them), remote host documents and py-spy's answers (issue 14).

The property, for every input: a verdict, a skip with its reason, or exit 2 with one
sentence; never a traceback, never exit 1 unless the verdict is a hang; within the time
and memory bound of ``bounded``.
"""

from __future__ import annotations

import io
import json
import pickle
import tarfile
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hostile_text import RAW_CONTROL
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_inputs import bounded, hostile_text, json_values
from triage_helpers import fault_evidence, recorded_stack
from typer.testing import CliRunner

from doctor.cli import app
from doctor.errors import EXIT_FOUND, EXIT_USAGE, DoctorError
from doctor.evidence import Evidence, RankStack
from doctor.logs.catalogue import catalogue
from doctor.logs.lines import split
from doctor.logs.parse import parse_text
from doctor.logs.paste import unwrapped
from doctor.logs.ras import from_json
from doctor.model import HangClass
from doctor.remote.document import DocumentError, to_document
from doctor.remote.reader import parse_document
from doctor.triage.sources.pyspy import parse_dump, parse_faulthandler

pytestmark = pytest.mark.fuzz
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DUMP = (FIXTURES / "fr" / "gloo-wrong-collective" / "rank_0").read_bytes()
CORPUS_LINES = sorted(
    {
        line
        for path in (FIXTURES / "real").glob("*/*")
        if path.suffix not in (".toml", ".md")
        for line in path.read_text(errors="replace").splitlines()
        if line.strip()
    }
)


def mutated(line: str, insert: str, at: int) -> str:
    """A real log line with hostile text put at one place (or its digits made huge)."""
    at %= len(line) + 1
    return line[:at] + insert + line[at:]


hostile_lines = st.lists(
    st.one_of(
        st.builds(mutated, st.sampled_from(CORPUS_LINES), hostile_text, st.integers(0, 400)),
        st.sampled_from(CORPUS_LINES).map(lambda s: s.replace("0", "9" * 5000, 1)),
        st.builds(lambda d: json.dumps(d, default=str), json_values),
        hostile_text,
    ),
    max_size=12,
)


@given(hostile_lines)
def test_log_text(lines: list[str]) -> None:
    # real lines of NCCL, torchrun, SLURM, RAS, py-spy and kernel logs, made hostile
    parsed = bounded("log text", lambda: parse_text(lines, "fuzz.log"), ())
    assert all(isinstance(e.text, str) for e in parsed.events)


@given(hostile_lines, st.integers(60, 200))
def test_pasted_text(lines: list[str], width: int) -> None:
    # the same lines as a small file's paste: cut at a terminal's width, quoted, indented
    rows = [
        "    > " + line[i : i + width] for line in lines for i in range(0, len(line) or 1, width)
    ]
    parsed = bounded("pasted text", lambda: parse_text(unwrapped(rows), "fuzz.log"), ())
    assert all(isinstance(e.text, str) for e in parsed.events)


LINE_PREFIXES = [
    "> ",
    "3: ",
    "[rank3]: ",
    "[default0]:",
    "worker-1: ",
    "[1,3]<stderr>:",
    "(pid=2345) ",
    "(RayTrainWorker pid=7, ip=10.0.0.5) ",
    "(VllmWorker rank=2 pid=2236) ERROR 05-01 12:00:00 [core.py:400] ",
    "2024-05-01T12:00:00.123Z stderr F ",
    "[2024-05-01 12:00:00,123] [INFO] ",
    "ERROR:root:",
    "WARNING:torch.distributed.run:",
    "05/01/2024 12:00:00 - INFO - transformers.trainer - ",
    "[2024-05-01 12:00:00,123] torch.distributed.elastic.multiprocessing.api: [ERROR] ",
    "2024-05-01 12:00:00 | INFO | fairseq.trainer | ",
    "[2024-05-01 12:00:00,123][__main__][INFO] - ",
    "[NeMo W 2024-05-01 12:34:56 nemo_logging:349] ",
    "[engine.py:96:step] ",
    "2024-05-01 12:34:56.789012: E tensorflow/core/x.cc:88] ",
    "E0501 12:34:56.789012 12345 trainer.cc:88] ",
]
"""Every prefix the reader peels (``doctor.logs.lines``): launchers', pastes', loggers'."""


@given(
    st.lists(st.sampled_from(LINE_PREFIXES) | hostile_text, max_size=10),
    st.sampled_from(CORPUS_LINES),
)
def test_prefixes_in_any_order_leave_a_suffix_of_the_line(prefixes: list[str], line: str) -> None:
    # GIVEN a real line behind prefixes nested in any order, some of them hostile text
    raw = "".join(prefixes) + line
    # WHEN its prefixes are peeled THEN within the bounds, what is left is the line's end,
    # and the logger's name is the line's own characters
    peeled = bounded("line prefixes", lambda: split(raw, "fuzz.log:1"), ())
    assert raw.endswith(peeled.text)
    assert all(word in raw for word in peeled.logger.split())


RAS_KEYS = ["communicators", "event", "peer", "hash", "size", "ranks", "status", "x"]
ras_docs = st.recursive(
    st.dictionaries(st.sampled_from(RAS_KEYS), json_values, max_size=5),
    lambda inner: st.dictionaries(
        st.sampled_from(RAS_KEYS), inner | st.lists(inner, max_size=3), max_size=4
    ),
    max_leaves=10,
)


@given(ras_docs)
def test_ras_json(doc: dict[str, Any]) -> None:
    # an ncclras JSON report or monitor event, each field of any type or shape
    line = split(json.dumps(doc, default=str), "ras.json")
    bounded("ras json", lambda: from_json(doc, line), ())
    text = json.dumps(doc, indent=1, default=str).splitlines()
    bounded("ras json", lambda: parse_text(text, "ras.json"), ())


def _host_document() -> dict[str, Any]:
    base = fault_evidence("dataloader")
    stacks = [RankStack(r, recorded_stack("dataloader", 0).threads, "py-spy") for r in range(2)]
    evidence = Evidence("job", 2, processes=base.processes[:2], stacks=tuple(stacks))
    return to_document(evidence, "h1", 2, range(2))


HOST_DOCUMENT = _host_document()


@given(st.sampled_from(sorted(HOST_DOCUMENT)), json_values, st.binary(max_size=200))
def test_host_documents(key: str, value: Any, raw: bytes) -> None:
    # a real host document with one hostile field, and hostile bytes
    doc = {**HOST_DOCUMENT, key: value}
    bounded("host document", lambda: parse_document(json.dumps(doc, default=str)), (DocumentError,))
    text = raw.decode(errors="replace")
    bounded("host document", lambda: parse_document(text), (DocumentError,))


PYSPY_THREAD = {
    "pid": 7,
    "thread_id": 1,
    "os_thread_id": 7,
    "thread_name": "MainThread",
    "owns_gil": False,
    "active": True,
    "frames": [{"name": "f", "filename": "a.py", "short_filename": "a.py", "line": 3}],
}


@given(
    st.sampled_from([*PYSPY_THREAD, "frame", "root"]),
    st.sampled_from(["name", "filename", "short_filename", "line", "module"]),
    json_values,
    st.text(max_size=300),
)
def test_pyspy_answers(where: str, field: str, value: Any, text: str) -> None:
    # py-spy's JSON with one hostile field (a thread's, a frame's, or the whole answer)
    thread: dict[str, Any] = dict(PYSPY_THREAD)
    if where == "frame":
        thread["frames"] = [{**thread["frames"][0], field: value}]
    elif where != "root":
        thread[where] = value
    answer = json.dumps(value if where == "root" else [thread], default=str)
    stack = bounded("py-spy answer", lambda: parse_dump(answer, 0), (ValueError,))
    assert stack is None or all(isinstance(f.line, int) for t in stack.threads for f in t.frames)
    # and faulthandler's text (the agent's answer), as a rank may print it
    lines = f'Current thread 0x{len(text):x}\n  File "{text}", line {"9" * len(text)} in {text}'
    bounded("py-spy answer", lambda: parse_faulthandler(lines, 0), ())


MEMBER_NAMES = [
    "evidence.json",
    "verdict.json",
    "fr/rank_0",
    "rank_1",
    "logs/job.log",
    "hosts/h1.json",
    "stacks/rank_0.json",
    "../escape",
    "a/../../b",
    "/abs",
    "rank_9999999",
    "x\x1b]52;c;eA==\x07\n[/x]",
]


def _content(kind: str, value: Any, raw: bytes, text: str) -> bytes:
    if kind == "dump":
        return DUMP
    if kind == "json":
        return json.dumps(value, default=str).encode()
    if kind == "evidence":
        return json.dumps({"schema": "nccl-doctor/evidence/v2", "job": "j", "x": value}).encode()
    if kind == "pickle":
        return pickle.dumps(value)
    if kind == "log":
        return text.encode(errors="replace")
    return raw


members = st.lists(
    st.tuples(
        st.sampled_from(MEMBER_NAMES),
        st.sampled_from(["dump", "json", "evidence", "pickle", "log", "bytes"]),
        json_values,
        st.binary(max_size=300),
        hostile_text,
    ),
    min_size=1,
    max_size=6,
)


def _write_input(folder: Path, shape: str, found: list[tuple[str, bytes]]) -> Path:
    """The members as a tar.gz, a zip, a folder, or (the first) one file."""
    if shape == "tar":
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for name, data in found:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        (folder / "bundle.tar.gz").write_bytes(buffer.getvalue())
        return folder / "bundle.tar.gz"
    if shape == "zip":
        with warnings.catch_warnings(), zipfile.ZipFile(folder / "dumps.zip", "w") as archive:
            warnings.simplefilter("ignore")  # a name twice is one of the hostile inputs
            for name, data in found:
                archive.writestr(name, data)
        return folder / "dumps.zip"
    if shape == "file":
        name, data = found[0]
        target = folder / (name.replace("/", "_").replace(".", "_") or "x")
        target.write_bytes(data)
        return target
    root = folder / "in"
    for name, data in found:
        target = root / name.replace("..", "_").lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def run_analyze(path: Path, as_json: bool) -> tuple[int, str]:
    """``nccl-doctor analyze`` in this process, as ``doctor.cli.main`` answers: the exit code
    and what it printed (a ``DoctorError`` becomes its code and one sentence)."""
    result = CliRunner().invoke(app, ["analyze", str(path), *(["--json"] if as_json else [])])
    error = result.exception
    if isinstance(error, DoctorError):
        assert error.exit_code == EXIT_USAGE, f"exit {error.exit_code} from bad input: {error}"
        assert str(error).strip(), "an error with no sentence"
        return error.exit_code, str(error)
    assert error is None or isinstance(error, SystemExit), repr(error)
    return result.exit_code, result.output


@given(st.sampled_from(["tar", "zip", "folder", "file"]), members, st.booleans())
def test_analyze_on_hostile_bundles_archives_and_folders(
    tmp_path_factory: pytest.TempPathFactory, shape: str, found: list[Any], as_json: bool
) -> None:
    folder = tmp_path_factory.mktemp("in")
    path = _write_input(folder, shape, [(n, _content(k, v, r, t)) for n, k, v, r, t in found])
    code, out = bounded("analyze", lambda: run_analyze(path, as_json), ())
    if code == EXIT_USAGE:
        return
    assert code in (0, EXIT_FOUND), out
    if as_json:
        verdict = json.loads(out)["verdict"]
        assert (code == EXIT_FOUND) == HangClass(verdict["hang_class"]).is_hang, out
    else:
        assert not RAW_CONTROL.findall(out), "raw control characters reached the terminal"


@given(
    st.one_of(st.none(), st.integers()),
    st.lists(st.integers(), min_size=1, max_size=4),
    st.integers(min_value=0, max_value=3),
)
def test_host_document_numbers_are_bounded_as_analyze_bounds_them(
    world: int | None, ranks: list[int], where: int
) -> None:
    # GIVEN a real host document whose world size and one place of rank numbers are hostile
    from doctor.ranks import MAX_WORLD_SIZE

    doc = json.loads(json.dumps(HOST_DOCUMENT))
    doc["world_size"] = world
    if where == 0:
        doc["classes"][0]["ranks"] = ranks
    elif where == 1:
        doc["local_ranks"] = ranks
    elif where == 2:
        doc["processes"][0]["rank"] = ranks[0]
    else:
        doc["progress"] = [[r, 0.0, None, None, 0, "wait"] for r in ranks]
        doc["signatures"] = ["s"]
    # WHEN read THEN refused, or every number within what analyze accepts
    try:
        read = parse_document(json.dumps(doc))
    except DocumentError:
        return
    assert read.world_size is None or 0 < read.world_size <= MAX_WORLD_SIZE
    seen = [*read.local_ranks, *(p.rank for p in read.processes), *(s.rank for s in read.progress)]
    seen += [r for c in read.classes for r in c.ranks]
    assert all(0 <= r < MAX_WORLD_SIZE for r in seen)


def test_host_document_lists_past_what_a_host_writes_are_refused() -> None:
    # GIVEN a host document with more processes than a host ever writes, and a huge text
    from doctor.remote.document import MAX_RANKS
    from doctor.remote.transport import MAX_HOST_BYTES

    doc = {**HOST_DOCUMENT, "processes": [HOST_DOCUMENT["processes"][0]] * (MAX_RANKS + 1)}
    # THEN each is a DocumentError naming the bound, never a read of it all
    with pytest.raises(DocumentError, match="at most"):
        parse_document(json.dumps(doc))
    with pytest.raises(DocumentError, match="more than a host sends"):
        parse_document(" " * (MAX_HOST_BYTES + 1))


@given(st.text(max_size=60), st.sampled_from(["", "-", "-o", " ", "h[1-2],"]))
def test_host_lists_yield_host_names_or_one_usage_error(text: str, prefix: str) -> None:
    # GIVEN any --hosts text (hostile, or starting like an ssh option)
    from doctor.errors import UsageError
    from doctor.remote.hosts import parse_hosts, valid_host

    # THEN host names that can never be read as an option, or one UsageError
    try:
        hosts = parse_hosts(prefix + text)
    except UsageError:
        return
    assert hosts and all(valid_host(h) and not h.startswith("-") for h in hosts)


@given(st.lists(st.text(max_size=40), max_size=6), st.integers(min_value=0, max_value=3))
def test_srun_lines_are_filed_under_the_task_that_wrote_them(lines: list[str], task: int) -> None:
    # GIVEN srun output lines, labelled or not, some claiming a host of their own
    from doctor.remote.frames import TAG
    from doctor.remote.slurm import _labelled

    order = ["n1", "n2", "n3"]
    for line in [*lines, f"{task}: {TAG} n3 0 1 {{}}"]:
        node, rest = _labelled(line, order)
        # THEN a line is a task's only with srun's label, and only a task in the step
        assert node is None or (node in order and line.endswith(rest))


CATALOGUE = catalogue()
FRAGMENTS = sorted({f for m in CATALOGUE.messages for f in m.fragments})


@given(
    st.lists(st.sampled_from(FRAGMENTS) | hostile_text, max_size=8),
    st.integers(min_value=1, max_value=2000),
)
def test_the_message_catalogue_matches_hostile_lines_within_bounds(
    parts: list[str], repeat: int
) -> None:
    # GIVEN a line of catalogued fragments (the words its index keys on) and hostile text,
    # repeated up to the reader's line bound WHEN it is matched THEN a message or None comes
    # back within the time and memory bound
    line = (" ".join(parts) * repeat)[:16_384]
    found = bounded("message catalogue", lambda: CATALOGUE.match(line), ())
    assert found is None or found.hang_class in ("bootstrap", "network", "rank_loss")


def test_the_message_catalogue_costs_linear_time_in_the_line() -> None:
    # GIVEN the worst line for the index: every catalogued fragment, so every message is a
    # candidate, repeated to 4 and to 16 KB WHEN each is matched (best of three)
    every = " ".join(FRAGMENTS[::-1])

    def took(size: int) -> float:
        line = (every * (size // len(every) + 1))[:size]
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            CATALOGUE.match(line)
            best = min(best, time.perf_counter() - start)
        return best

    small, large = took(4_096), took(16_384)
    # THEN four times the text costs well under sixteen times the time (quadratic would)
    assert large < 10 * small + 0.05, (small, large)
