"""`pip install nccl-doctor` is lean: one import package, no torch, and the tools work there.

A fresh virtual environment (no torch, no numpy) gets the project from a copy of
its sources (a build never writes into the checkout), then runs what a login
node runs: preflight, triage of a live process with a bundle, analyze of that
bundle and of dumps. The parts that run inside a rank say in one sentence that
they need the job's PyTorch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import clean_env

REPO = Path(__file__).resolve().parents[1]
GLOO = REPO / "tests" / "fixtures" / "fr" / "gloo-wrong-collective"
SOURCES = ("pyproject.toml", "README.md", "doctor", "checks", "playbooks")


def _run(*args: str | Path, timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kw
    )  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def lean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding `pip install .` of this checkout and nothing else; its bin folder."""
    tmp = tmp_path_factory.mktemp("lean")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, src / name)
    # no pip inside: the test's own installer installs into it (--python), which saves ~10 s
    _run(
        sys.executable, "-m", "venv", "--without-pip", tmp / "venv", timeout=120
    ).check_returncode()
    python = tmp / "venv" / "bin" / "python"
    uv = Path(sys.executable).parent / "uv"  # make install's: 3 s where pip's resolver took 18
    install = (
        [uv, "pip", "install", "-q", "--python", python, "--compile-bytecode"]
        if uv.exists()
        else [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
    )
    (tmp / "tmp").mkdir()  # uv leaves a lock file of its build environment in TMPDIR
    done = _run(*install, src, timeout=600, env={**os.environ, "TMPDIR": str(tmp / "tmp")})
    assert done.returncode == 0, done.stderr[-2000:]
    return tmp / "venv" / "bin"


def _doctor(
    bin_dir: Path, *args: str | Path, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = clean_env({"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"})
    return _run(bin_dir / "nccl-doctor", *args, env=env, cwd=cwd)


@pytest.mark.slow
def test_one_import_package_and_no_torch(lean: Path) -> None:
    # GIVEN the lean venv WHEN we ask what it holds
    py = lean / "python"
    probe = (
        "import importlib.metadata as m, importlib.util as u, json;"
        "d = m.distribution('nccl-doctor');"
        "top = {f.parts[0] for f in d.files if f.suffix == '.py' and '..' not in f.parts};"
        "print(json.dumps([sorted(top), [n for n in ('torch', 'numpy') if u.find_spec(n)]]))"
    )
    top, heavy = json.loads(_run(py, "-c", probe, cwd=lean).stdout)  # not the checkout's metadata
    # THEN the project installed one package, `doctor`, and pulled neither torch nor numpy
    assert top == ["doctor"] and heavy == []


@pytest.mark.slow
def test_preflight_triage_and_analyze_work_without_torch(lean: Path, tmp_path: Path) -> None:
    # preflight judges this host
    pre = _doctor(lean, "preflight", "--json", cwd=tmp_path)
    assert (
        pre.returncode in (0, 1) and json.loads(pre.stdout)["schema"] == "nccl-doctor/preflight/v1"
    )
    # analyze judges dumps
    ana = _doctor(lean, "analyze", GLOO, "--json", cwd=tmp_path)
    assert ana.returncode == 1, ana.stderr
    assert json.loads(ana.stdout)["verdict"]["culprit_ranks"] == [2]
    # triage looks at a live process (a rank of nothing) and bundles what it saw
    ready = tmp_path / "ready"
    code = f"import pathlib, time; pathlib.Path({str(ready)!r}).touch(); time.sleep(120)"
    rank = subprocess.Popen(
        [sys.executable, "-c", code], env={**clean_env(), "RANK": "0", "WORLD_SIZE": "1"}
    )
    try:
        _wait_for(ready)
        bundle = tmp_path / "b.tar.gz"
        tri = _doctor(
            lean, "triage", "--pids", str(rank.pid), "--once", "--json", "--bundle", bundle
        )
        assert tri.returncode in (0, 1), tri.stderr
        assert json.loads(tri.stdout)["ranks"][0]["pid"] == rank.pid
    finally:
        rank.kill()
        rank.wait(10)
    again = _doctor(lean, "analyze", bundle, "--json")
    assert json.loads(again.stdout)["verdict"] == json.loads(tri.stdout)["verdict"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "what"),
    [
        (
            ("launch", "--wrap", "--job", "lean", "--lane", "single-node", "--", "x.py"),
            "restart wrapper",
        ),
        (("recover", "--job", "lean"), "restart wrapper"),
        (("bench", "--nproc", "2"), "AllReduce benchmark"),
    ],
)
def test_in_rank_parts_say_in_one_sentence_that_they_need_torch(
    lean: Path, tmp_path: Path, args: tuple[str, ...], what: str
) -> None:
    (tmp_path / "x.py").write_text("print('never runs')\n")
    done = _doctor(lean, *args, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("nccl-doctor:")]
    assert "PyTorch" in line
    assert what in line and "pip install 'nccl-doctor[torch]'" in line


def _wait_for(path: Path, timeout: float = 60) -> None:
    import time

    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)
