"""``nccl-doctor/host-evidence/v1``: stacks merged per host, bounded, versioned, read back."""

from __future__ import annotations

import json

import pytest
from triage_helpers import fault_evidence, recorded_stack

from doctor.evidence import Evidence, Frame, RankStack, ThreadStack
from doctor.remote.document import (
    MAX_DOC_BYTES,
    MAX_FRAMES,
    MAX_THREADS,
    SCHEMA,
    DocumentError,
    to_document,
)
from doctor.remote.reader import Interner, from_document, parse_document


def eight_rank_host() -> Evidence:
    """A typical host: 8 ranks, 7 waiting in one collective, one in its data loader."""
    base = fault_evidence("dataloader")
    stacks = [
        RankStack(r, recorded_stack("dataloader", 2 if r == 5 else 0).threads, "py-spy")
        for r in range(8)
    ]
    return Evidence(
        "job", 8, processes=base.processes, stacks=tuple(stacks), progress=base.progress
    )


def size(doc: dict) -> int:
    return len(json.dumps(doc, separators=(",", ":")))


def test_a_typical_host_sends_one_stack_per_class_in_a_few_kib() -> None:
    # GIVEN 8 ranks whose stacks fall in two classes
    doc = to_document(eight_rank_host(), "h7", 64, range(8), "0.1.0")
    # THEN the document is versioned, and carries two classes with their rank sets
    assert doc["schema"] == SCHEMA and doc["host"] == "h7"
    assert [c["ranks"] for c in doc["classes"]] == [[0, 1, 2, 3, 4, 6, 7], [5]]
    # AND it stays small (measured: a few KiB; the bound is tens of KiB)
    assert size(doc) < 32 * 1024, size(doc)


def test_a_document_reads_back_to_the_same_evidence() -> None:
    # GIVEN a host document WHEN read back
    evidence = eight_rank_host()
    doc = from_document(json.loads(json.dumps(to_document(evidence, "h7", 64, range(8)))))
    # THEN every rank's stack, process and sample is what the host had
    by_rank = {r: c.stack.threads for c in doc.classes for r in c.ranks}
    for stack in evidence.stacks:
        got = by_rank[stack.rank]
        assert [(t.frames, t.is_main, t.holds_gil) for t in got] == [
            (t.frames, t.is_main, t.holds_gil) for t in stack.threads
        ]
    assert {p.rank for p in doc.processes} == {p.rank for p in evidence.processes}
    assert all(p.host == "h7" for p in doc.processes)
    assert len(doc.progress) == len(evidence.progress)
    assert (doc.world_size, doc.local_ranks) == (64, tuple(range(8)))


def test_documents_share_frames_and_threads_across_hosts() -> None:
    # GIVEN two hosts with the same stacks, read through one interner
    intern = Interner()
    a = from_document(to_document(eight_rank_host(), "h1", 16, range(8)), intern)
    b = from_document(to_document(eight_rank_host(), "h2", 16, range(8)), intern)
    # THEN their classes hold the very same thread tuples (memory grows with classes)
    assert a.classes[0].stack.threads is b.classes[0].stack.threads


def test_a_host_with_thousands_of_threads_and_huge_frames_stays_bounded() -> None:
    # GIVEN a host of 64 ranks, each with its own 2,000 threads of 500 long frames
    def stack(rank: int) -> RankStack:
        frames = tuple(Frame(f"f{rank}_{i}_" + "x" * 1000, "/a/" * 200, i) for i in range(500))
        threads = tuple(
            ThreadStack(t, f"t{t}", frames[t % 7 :], is_main=t == 0) for t in range(2000)
        )
        return RankStack(rank, threads, "py-spy")

    evidence = Evidence("job", 64, stacks=tuple(stack(r) for r in range(64)))
    # WHEN it becomes a document
    doc = to_document(evidence, "big", 64, range(64))
    # THEN the document holds its bound and says which bounds it hit
    assert size(doc) <= MAX_DOC_BYTES
    hit = " ".join(doc["truncated"])
    for bound in ("threads", "frames", "classes", "size"):
        assert bound in hit, doc["truncated"]
    read = from_document(doc)
    assert all(len(c.stack.threads) <= MAX_THREADS for c in read.classes)
    assert all(len(t.frames) <= MAX_FRAMES for c in read.classes for t in c.stack.threads)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[]", "not a JSON object"),
        ('{"schema": "nccl-doctor/host-evidence/v9"}', "schema"),
        ("{", "not JSON"),
        (
            json.dumps(
                {
                    "schema": SCHEMA,
                    "frames": [],
                    "classes": [{"ranks": [1], "threads": [[1, "m", 4, [3]]]}],
                }
            ),
            "outside the frame table",
        ),
        (json.dumps({"schema": SCHEMA, "processes": [{"rank": "x", "bogus": 1}]}), "malformed"),
    ],
)
def test_a_bad_document_is_refused_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(DocumentError, match=why):
        parse_document(text)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"frames": [["f", "a.py", True]]}, "expected an integer, got bool"),
        ({"frames": [["f", ["a.py"], 1]]}, "expected a string, got list"),
        ({"local_ranks": [0, True]}, "expected an integer, got bool"),
        ({"local_ranks": [0, -1]}, "rank -1 is out of range"),
        ({"local_ranks": [0, 1 << 40]}, "out of range"),
        ({"progress": [[0, float("nan"), None, None, 0, "w"]]}, "out of range"),
        ({"progress": [[0, 1.0, 2.5, None, 0, "w"]]}, "expected an integer, got float"),
        ({"progress": [[0, 1.0, None, None, 0, 7]]}, "expected a string, got int"),
        ({"progress": [[True, 1.0, None, None, 0, "w"]]}, "expected an integer, got bool"),
    ],
)
def test_a_bad_value_after_good_ones_is_still_refused(change: dict, why: str) -> None:
    # GIVEN a host's good document read first, so its frames are known to the interner
    intern = Interner()
    good = to_document(eight_rank_host(), "h1", 16, range(8))
    from_document(good, intern)
    base = {**good, "frames": [["f", "a.py", 1]], "classes": [], "signatures": ["s"]}
    base["progress"] = []
    from_document(base, intern)
    # WHEN another host's document differs from it in one value of the wrong kind
    # THEN the quick paths of the usual rows do not let it through
    with pytest.raises(DocumentError, match=why):
        from_document({**base, **change}, intern)
    # AND the usual values still read as before (an int time and seq become a float, kept)
    row = from_document({**base, "progress": [[3, 2, 4, None, 0, "w"]]}, intern).progress[0]
    assert (row.rank, row.time_s, row.last_enqueued_seq, row.state) == (3, 2.0, 4, "w")
    assert type(row.time_s) is float
