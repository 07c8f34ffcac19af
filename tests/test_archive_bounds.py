"""Archives that ask for more than they are: a 1 GiB PAX header in a 4 MB .tar.gz, a FIFO
where an archive is expected (issue 14, item 6)."""

from __future__ import annotations

import gzip
import os
import tarfile
import time
from pathlib import Path

from doctor.flight.reader import read_flight
from doctor.trust.archive import is_archive


def test_a_gigabyte_extended_header_is_refused_naming_the_bound(tmp_path: Path) -> None:
    # GIVEN a .tar.gz whose first member is a PAX header claiming 1 GiB (131 s, 3.2 GB)
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, 1 << 30
    path = tmp_path / "bundle.tar.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(header.tobuf(format=tarfile.USTAR_FORMAT))
        for _ in range(64):
            f.write(b"\0" * (1 << 20))
    # WHEN the dumps in it are read THEN at once, skipped, the bound named
    start = time.monotonic()
    read = read_flight([path])
    assert time.monotonic() - start < 5.0
    (skipped,) = read.skipped
    assert "header-bytes bound" in skipped.reason and not read.dumps


def test_a_fifo_is_not_probed_as_an_archive(tmp_path: Path) -> None:
    fifo = tmp_path / "bundle.tar.gz"
    os.mkfifo(fifo)
    start = time.monotonic()
    assert not is_archive(fifo) and time.monotonic() - start < 1.0
