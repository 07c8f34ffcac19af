"""The wheel installs one import package, ``doctor``, with every subpackage the tree holds."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _listed() -> tuple[set[str], dict[str, str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(config["packages"]), config["package-dir"]


def test_every_folder_with_an_init_is_a_listed_package():
    # GIVEN the package list and its folder mapping
    listed, folders = _listed()
    # WHEN every folder holding an __init__.py is named as the package it installs as
    on_disk = set()
    for name, folder in folders.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            on_disk.add(".".join((name, *rel.parts)))
    # THEN the two agree, and every installed package lives under `doctor`
    assert on_disk == listed
    assert all(p == "doctor" or p.startswith("doctor.") for p in listed)
