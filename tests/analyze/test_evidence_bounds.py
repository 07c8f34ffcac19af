"""evidence.json values are checked, not trusted (issue 14, item 8)."""

from __future__ import annotations

import pytest

from doctor.codec import DecodeError
from doctor.evidence import Evidence


@pytest.mark.parametrize(
    ("field", "value"), [("ranks_expected", -5), ("ranks_expected", 10**9), ("world_size", -1)]
)
def test_rank_counts_out_of_bounds_are_refused(field: str, value: int) -> None:
    data = {**Evidence(job="j", ranks_expected=2).to_json(), field: value}
    with pytest.raises(DecodeError, match=field):
        Evidence.from_json(data)
