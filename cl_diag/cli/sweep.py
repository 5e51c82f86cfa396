"""``cl-diag sweep``: a grid of training runs, each analysed, then compared."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from cl_diag.cli import app
from cl_diag.orchestration.sweep import SweepConfig, sweep as run_sweep


@app.command(
    no_args_is_help=True,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def sweep(
    ctx: typer.Context,
    recipe: str = typer.Argument(..., help="Training recipe every cell starts from: a path (trainers/*.toml) or a bundled name."),
    grid: List[str] = typer.Option(
        [], "--grid", help="KEY=V1,V2,... over any recipe key; repeat for more axes (cells = the product)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Sweep folder: one sub-folder per cell, and comparison/."),
    probe: Optional[str] = typer.Option(None, help="Probe suite for each cell's analysis: a path (probes/*.toml) or a bundled name."),
    parallel: int = typer.Option(1, help="Cells run at once, each in its own process on its own GPU."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Train and analyze every cell of a grid, skipping complete cells, then compare them all.

    Options after the recipe that are not the sweep's own (e.g. --epochs 5) override the recipe for every cell, exactly as with `cl-diag train`.

    Example: [bold]cl-diag sweep trainers/simclr.toml --grid batch-size=16,32,64 --grid vrn=0,30 --epochs 5 --out sweeps/bs[/]
    """
    config = SweepConfig(
        recipe=recipe, grid=list(grid), out=out, train_args=list(ctx.args), probe=probe, parallel=parallel, quiet=quiet
    )
    console = Console()
    if quiet or not sys.stdout.isatty():
        def report(name: str, done: int, total: int) -> None:
            if name:
                console.print(f"[{done}/{total}] {name} done", highlight=False, markup=False)

        outcome = run_sweep(config, on_progress=report)
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.description}"),
            console=console,
        ) as progress:
            task = progress.add_task("", total=None)

            def report(name: str, done: int, total: int) -> None:
                progress.update(task, completed=done, total=total, description=name)

            outcome = run_sweep(config, on_progress=report)
    if outcome.skipped:
        console.print(f"skipped {len(outcome.skipped)} complete cell(s): {', '.join(outcome.skipped)}", highlight=False)
    console.print(f"report: {outcome.comparison}", highlight=False)
