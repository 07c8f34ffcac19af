"""`nccl-doctor bench`: AllReduce bandwidth against the ring/tree/NVLS model."""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from doctor.errors import UsageError


class Backend(StrEnum):
    """The collective backend to measure: gloo on CPUs, NCCL on GPUs."""

    GLOO = "gloo"
    NCCL = "nccl"


def bench(
    nproc: Annotated[int | None, typer.Option(help="Local ranks to start (default 2).")] = None,
    backend: Annotated[Backend, typer.Option(help="gloo (CPU) or nccl (GPUs).")] = Backend.GLOO,
    sizes: Annotated[
        str | None,
        typer.Option(help="BEGIN:END[:FACTOR] as nccl-tests' -b/-e/-f, e.g. 1K:64M:2."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    plot: Annotated[
        Path | None, typer.Option(help="Write the plot to FILE (.svg, or .png with Pillow).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds before the run is abandoned.")] = 300,
) -> None:
    """AllReduce bandwidth against the ring/tree model (nccl-tests' table and columns)."""
    from rich.console import Console

    from doctor.bench.explain import explain
    from doctor.bench.plot import png_plot, svg_plot, terminal_plot
    from doctor.bench.render import format_table
    from doctor.bench.session import DEFAULT_SIZES, BenchRequest, run_bench
    from doctor.bench.sizes import parse_sweep

    if plot is not None:
        _check_plot_target(plot)
    request = BenchRequest(
        backend.value, tuple(parse_sweep(sizes or DEFAULT_SIZES[backend])), nproc, timeout
    )
    with _progress(len(request.sizes)) as emit:
        result = run_bench(request, os.environ, emit)
    if result is None:
        return  # a non-zero rank of a job: rank 0 reports
    if plot is not None:
        try:
            if plot.suffix.lower() == ".png":
                plot.write_bytes(png_plot(result))
            else:
                plot.write_text(svg_plot(result))
        except OSError as exc:
            raise UsageError(f"cannot write {plot}: {exc.strerror}") from exc
    if json_out:
        print(json.dumps(result.to_json(), indent=2))
        return
    out = Console(highlight=False, soft_wrap=True)
    out.print(format_table(result), markup=False)
    out.print()
    out.print(terminal_plot(result), markup=False)
    out.print()
    for note in explain(result):
        out.print(f"- {note}", markup=False)


def _check_plot_target(plot: Path) -> None:
    """Refuse before the run, not after it: a bad name costs the user the whole sweep."""
    suffix = plot.suffix.lower()
    if suffix not in (".svg", ".png"):
        raise UsageError(f"--plot writes .svg or .png; {plot.name!r} is neither")
    if suffix == ".png":
        try:
            import PIL  # noqa: F401
        except ImportError:
            raise UsageError(
                "--plot .png needs Pillow: pip install 'nccl-doctor[plot]', or write .svg"
            ) from None


class _progress:
    """A rich progress bar on stderr fed by the ranks' events; silent when stderr is no terminal."""

    def __init__(self, sizes: int) -> None:
        from doctor.cli.progress import stderr_bar

        self.bar = stderr_bar()
        self.task = self.bar.add_task("starting ranks", total=sizes + 1)

    def __enter__(self) -> Any:
        self.bar.start()
        return self.emit

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def emit(self, event: dict[str, Any]) -> None:
        if event.get("event") == "probe":
            self.bar.update(self.task, advance=1, description="p2p probe done")
        elif event.get("event") == "size":
            self.bar.update(self.task, advance=1, description=f"{event['bytes']} B")
