"""Run the real triage TUI on a fake job, for the tmux test and the screenshot in docs/tui.md.

    python tests/triage/tui/drive_tui.py [--ranks 8] [--culprit 3] [--interval 1]
    python tests/triage/tui/drive_tui.py --svg docs/tui.svg [--size 160x48]

The first form is ``run_tui`` exactly as ``nccl-doctor triage`` calls it, on a
terminal; it exits with ``run_tui``'s code. Bundles (written to the current
directory) are small tarballs of the snapshot's JSON; recovery answers
without touching any process.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import tarfile
from pathlib import Path

from tui_fakes import FakeProvider, cpu_stuck_snapshot

from doctor.triage.snapshot import TriageSnapshot
from doctor.triage.tui.app import TriageApp, run_tui

JOB = "llm-pretrain-0412"


def write_bundle(snapshot: TriageSnapshot, path: Path) -> None:
    data = json.dumps(
        {"evidence": snapshot.evidence.to_json(), "verdict": snapshot.verdict.to_json()}
    ).encode()
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("triage.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def request_recovery() -> str:
    return f"restart requested for every rank of {JOB}"


async def save_svg(
    provider: FakeProvider, interval: float, out: Path, size: tuple[int, int]
) -> None:
    app = TriageApp(provider, interval, JOB, on_bundle=write_bundle, on_recover=request_recovery)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--culprit", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--svg", type=Path, help="write a screenshot here instead of running")
    parser.add_argument("--size", default="160x48", help="terminal size of the screenshot")
    args = parser.parse_args(argv)
    provider = FakeProvider([cpu_stuck_snapshot(ranks=args.ranks, culprit=args.culprit)])
    if args.svg:
        width, height = (int(n) for n in args.size.split("x"))
        asyncio.run(save_svg(provider, args.interval, args.svg, (width, height)))
        return 0
    return run_tui(
        provider, args.interval, JOB, on_bundle=write_bundle, on_recover=request_recovery
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
