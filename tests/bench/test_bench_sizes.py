"""nccl-tests' -b/-e/-f semantics."""

from __future__ import annotations

import pytest

from doctor.bench.sizes import human, parse_size, parse_sweep, sweep
from doctor.errors import UsageError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8", 8), ("1K", 1024), ("64M", 64 << 20), ("1G", 1 << 30), ("4k", 4096), ("2MB", 2 << 20)],
)
def test_parse_size_uses_powers_of_1024(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_sweep_multiplies_until_past_the_end() -> None:
    assert sweep(8, 128, 2) == [8, 16, 32, 64, 128]
    assert sweep(1024, 5000, 4) == [1024, 4096]


def test_sweep_rounds_to_whole_elements_and_drops_empty_sizes() -> None:
    assert sweep(2, 8, 3) == [4]  # 2 -> 0 elements (dropped), 6 -> 4 bytes, 18 > 8


def test_parse_sweep_forms() -> None:
    assert parse_sweep("1K:4K:2") == [1024, 2048, 4096]
    assert parse_sweep("1M") == [1 << 20]
    assert parse_sweep("1K:4K") == [1024, 2048, 4096]


@pytest.mark.parametrize("spec", ["", "abc", "1K:4K:x", "4K:1K:2", "1K:4K:1", "1:2:3:4"])
def test_bad_sweeps_are_usage_errors(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_sweep(spec)


def test_human_names_sizes_like_the_flags() -> None:
    assert [human(n) for n in (512, 1024, 3 << 20, 1 << 30, 1536)] == [
        "512",
        "1K",
        "3M",
        "1G",
        "1536",
    ]
