"""The unpickler reads a pickle laid out in parts in place (``safe_pickle._Parts``): any
value, any protocol (protocol 0's lines too), cut into parts anywhere, even inside an
opcode, decodes to what ``pickle.loads`` gives; and a global is refused however it is cut."""

from __future__ import annotations

import itertools
import pickle
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.flight import safe_pickle
from doctor.flight.reader import PARALLEL_FROM, read_flight

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(max_size=8), inner, max_size=5)
        | st.tuples(inner, inner)
    ),
    max_leaves=40,
)


def parts_of(data: bytes, cuts: list[int]) -> list[Any]:
    """``data`` cut at ``cuts``, as bytes, bytearrays and memoryviews in turn."""
    edges = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    kinds = (bytes, bytearray, memoryview)
    return [kinds[i % 3](data[a:b]) for i, (a, b) in enumerate(itertools.pairwise(edges))]


@settings(max_examples=300, deadline=None)
@given(value=VALUES, protocol=st.integers(0, 5), cuts=st.lists(st.integers(0, 10**6), max_size=6))
def test_any_pickle_cut_anywhere_decodes_as_pickle_loads_it(
    value: Any, protocol: int, cuts: list[int]
) -> None:
    data = pickle.dumps(value, protocol)
    got, _memo = safe_pickle.loads_with_memo(parts_of(data, cuts), None)
    assert got == pickle.loads(data)


@settings(max_examples=100, deadline=None)
@given(
    value=st.lists(st.binary(max_size=300_000), max_size=3),
    protocol=st.integers(3, 5),
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
)
def test_bytes_cut_anywhere_decode_whole(
    value: list[bytes], protocol: int, cuts: list[int]
) -> None:
    """Protocol 3's bytes are read into their object (``readinto``), across parts too."""
    data = pickle.dumps(value, protocol)
    assert safe_pickle.loads_with_memo(parts_of(data, cuts), None)[0] == value


@pytest.mark.parametrize("protocol", [0, 2, 4])
@pytest.mark.parametrize("cut", [1, 3, 7, 20])
def test_a_global_is_refused_wherever_the_parts_are_cut(protocol: int, cut: int) -> None:
    data = pickle.dumps({"a": [1, 2], "b": pickle.loads}, protocol)
    with pytest.raises(safe_pickle.UnsafePickleError):
        safe_pickle.loads_with_memo(parts_of(data, [cut, cut * 5]), None)


def test_a_long_protocol_0_line_across_parts_is_read_whole() -> None:
    """The unpickler asks ``readline`` only for a line its buffer does not end: a string of
    50,000 characters (one line in protocol 0) split over three parts."""
    value = [7**3000, "y" * 50_000]
    data = pickle.dumps(value, 0)
    middle = len(data) // 2
    got, _ = safe_pickle.loads_with_memo(parts_of(data, [middle - 9_000, middle + 5]), None)
    assert got == value


_PEAK_OF_HOSTILE = """
import sys
from doctor.flight import dump
try:
    dump.reduce_dump(0, "rank_0", bytes.fromhex(sys.argv[1]))
except dump.DumpError as exc:
    print(exc)
status = open("/proc/self/status").read()
print(status.split("VmHWM:")[1].split()[0])
"""


@pytest.mark.parametrize(
    "hostile",
    [
        b"\x80\x02]r\x00\x00\x00\x04.",  # LONG_BINPUT 0x04000000: 1 GiB of memo
        b"\x80\x02]r\x00\x00\x00\x3c.",  # 0x3c000000: 15 GiB, the OOM kill of a make test
        b"(lp4000000000\n.",  # protocol 0's PUT: any size of index
    ],
)
def test_a_memo_index_out_of_range_is_refused_in_bounded_memory(hostile: bytes) -> None:
    """The C unpickler grows its memo to twice a put's index: one altered byte asked for
    gigabytes before decoding was capped. Run apart, so the peak is this decode's (VmHWM:
    ``ru_maxrss`` keeps the forking parent's)."""
    run = subprocess.run(
        [sys.executable, "-c", _PEAK_OF_HOSTILE, hostile.hex()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reason, peak_kib = run.stdout.splitlines()
    assert "more memory than a dump of its size needs" in reason
    assert int(peak_kib) < 200 << 10  # the interpreter and doctor: about 40 MiB


def test_the_cap_is_lifted_after_decoding() -> None:
    before = resource.getrlimit(resource.RLIMIT_DATA)
    with pytest.raises(MemoryError), safe_pickle.memory_cap(0):
        safe_pickle.loads(b"\x80\x02]r\x00\x00\x00\x04.")
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    assert len(bytearray(safe_pickle.FLOOR * 2)) == safe_pickle.FLOOR * 2


def test_the_cap_holds_in_the_workers_of_a_large_folder(tmp_path: Path) -> None:
    """A folder of dumps is reduced by worker processes: each caps its own decoding."""
    for r in range(PARALLEL_FROM):
        (tmp_path / f"rank_{r}").write_bytes(b"\x80\x02]r\x00\x00\x00\x04.")
    read = read_flight([tmp_path])
    assert not read.dumps and len(read.skipped) == PARALLEL_FROM
    assert all("more memory than a dump of its size needs" in s.reason for s in read.skipped)
