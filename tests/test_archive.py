"""The one archive reader: plain files with relative names only, and bounds that say which."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from doctor.trust.archive import Bounds, Member, Refused, clean_name, members


def _tar(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tar.addfile(link)
    return path


def _read(path: Path, bounds: Bounds = Bounds()) -> list[tuple[str, bytes | str]]:  # noqa: B008
    out: list[tuple[str, bytes | str]] = []
    for e in members(path, bounds):
        out.append((e.name, e.read()) if isinstance(e, Member) else (e.name, e.rule))
    return out


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("fr/rank_0", "fr/rank_0"),
        ("./evidence.json", "evidence.json"),
        ("a/./b", "a/b"),
        ("../evidence.json", None),
        ("fr/../../x", None),
        ("/etc/passwd", None),
        ("fr\\..\\x", None),
        (".", None),
    ],
)
def test_names_must_be_relative_and_stay_inside(raw: str, clean: str | None) -> None:
    assert clean_name(raw) == clean


def test_links_and_escaping_names_are_refused_by_rule(tmp_path: Path) -> None:
    # GIVEN a tar with a good file, an escaping name, an absolute name and a link
    path = _tar(
        tmp_path / "t.tar.gz",
        {"ok": b"1", "../up": b"2", "/abs": b"3"},
        links={"fr/rank_9": "/etc/passwd"},
    )
    # WHEN it is read THEN only the plain file comes back; the others say which rule
    assert _read(path) == [("ok", b"1"), ("../up", "name"), ("/abs", "name"), ("fr/rank_9", "type")]


def test_each_bound_is_a_value_that_names_it(tmp_path: Path) -> None:
    path = _tar(tmp_path / "t.tar.gz", {f"f{i}": b"x" * 10 for i in range(5)})
    # a member over its bound is refused alone; the rest still come
    assert _read(path, Bounds(member_bytes=9))[0] == ("f0", "member-bytes")
    # too many members, or too many bytes walked through: reading stops there
    assert _read(path, Bounds(members=2))[-1] == ("f2", "members")
    assert len(_read(path, Bounds(members=2))) == 3
    assert _read(path, Bounds(total_bytes=25)) == [
        ("f0", b"x" * 10),
        ("f1", b"x" * 10),
        ("f2", "total-bytes"),
    ]


def test_zip_follows_the_same_rules(tmp_path: Path) -> None:
    # GIVEN a zip with a good member, an escaping one and one marked as a symlink
    path = tmp_path / "z.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("fr/rank_0", b"dump")
        zf.writestr("../x", b"no")
        link = zipfile.ZipInfo("fr/rank_1")
        link.external_attr = 0o120777 << 16
        zf.writestr(link, "/etc/passwd")
    # WHEN read THEN the same rules apply as for tar
    assert _read(path) == [("fr/rank_0", b"dump"), ("../x", "name"), ("fr/rank_1", "type")]
    assert isinstance(next(iter(members(path, Bounds(member_bytes=1)))), Refused)
