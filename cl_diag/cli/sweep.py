"""``cl-diag sweep``: a grid of training runs, each analysed, then compared.

The command line of :mod:`cl_diag.orchestration.sweep` (one concept at two layers: options and
printing here; the grid, the cells and their runs there)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from cl_diag.cli import app
from cl_diag.errors import UserError

if TYPE_CHECKING:  # what runs a sweep is imported by the command alone: help stays instant
    from cl_diag.orchestration.sweep import SweepConfig, SweepResult


def _command(name: str) -> Any:
    """The app's command ``name`` as click parses it (typer builds this app as a group)."""
    group = typer.main.get_command(app)
    if not isinstance(group, TyperGroup):  # pragma: no cover - several commands make a group
        raise TypeError(f"cl-diag's app built a {type(group).__name__}, not a command group")
    return group.commands[name]


def _train_overrides(args: list[str]) -> dict[str, Any]:
    """The options after the recipe (e.g. ``--epochs 5``), parsed by the train command's own
    option definitions, as typed values; only those given count."""
    if not args:
        return {}
    from cl_diag.recipes import explicit_options

    command = _command("train")
    try:
        ctx = command.make_context("train", list(args))
    except Exception as exc:
        # click's usage errors (an unknown option, a value of the wrong type); matched by their
        # format_message, as typer ships its own copy of click whose classes differ by version
        format_message = getattr(exc, "format_message", None)
        if not callable(format_message):
            raise
        message = format_message()
        raise UserError(f"The train options after the recipe are not valid: {message}") from None
    given = explicit_options(ctx)
    if ctx.params.get("recipe") is not None or "recipe_name" in given:
        raise UserError("The sweep takes one recipe, its first argument; drop the second one.")
    if "resume" in given:
        raise UserError(
            "--resume is the sweep's to set: each cell resumes its own last.pt. Drop --resume."
        )
    return {name: ctx.params[name] for name in given}


def _analysis_fields(probe: str | None) -> dict[str, Any]:
    """The AnalyzeConfig fields a probe suite sets, read as ``analyze --probe`` reads them."""
    if probe is None:
        return {}
    from cl_diag.cli.analyze import renamed_batch_size
    from cl_diag.orchestration.analysis_config import PROBES, AnalyzeConfig, option_names
    from cl_diag.recipes import read_recipe
    from cl_diag.vocabulary import LAYERS

    suite = read_recipe(probe, _command("analyze"))
    if suite.get("batch_size") is not None:
        raise renamed_batch_size(suite["batch_size"])
    names = {f.name for f in fields(AnalyzeConfig)} - {"input", "out"}
    values = {key: value for key, value in suite.items() if key in names}
    for key, allowed in (("layers", LAYERS), ("probes", PROBES)):
        if key in values:
            values[key] = option_names(values[key], allowed, key, none=key == "probes")
    return values


@app.command(
    no_args_is_help=True,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def sweep(
    ctx: typer.Context,
    recipe: str = typer.Argument(
        ...,
        help="Training recipe every cell starts from: a path (trainers/*.toml) or a bundled name.",
    ),
    grid: list[str] = typer.Option(
        [],
        "--grid",
        help="KEY=V1,V2,... over any recipe key; repeat for more axes (cells = the product).",
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Sweep folder: one sub-folder per cell, and comparison/."
    ),
    probe: str | None = typer.Option(
        None, help="Probe suite for each cell's analysis: a path (probes/*.toml) or a bundled name."
    ),
    parallel: int = typer.Option(
        1,
        help="Cells run at once, each in its own process (on its own GPU where there are "
        "GPUs; on CPUs set OMP_NUM_THREADS to the cores / N).",
    ),
    equal_steps: int | None = typer.Option(
        None,
        help="Equal-steps mode: every cell trains N optimiser steps whatever its batch size, with "
        "the same warm-up (--warmup-steps, else the recipe's warm-up fraction of its epochs). "
        "Without it the cells hold the epochs.",
    ),
    plan: Path | None = typer.Option(
        None,
        "--plan",
        help="The study's plan (plans/*.toml), checked before any run; the comparison records "
        "its SHA-256, lists its primary claims first and says where the runs differ from it.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Train and analyze every cell of a grid, skipping complete cells, then compare them all.

    Options after the recipe that are not the sweep's own (e.g. --epochs 5) override the recipe for every cell, exactly as with `cl-diag train`.

    Example: [bold]cl-diag sweep trainers/simclr.toml --grid batch-size=16,32,64 --grid vrn=0,30 --grid seed=1,2,3 --equal-steps 200 --out sweeps/bs[/]
    """  # noqa: E501 (typer's help shows a command docstring's lines as written)
    from cl_diag.orchestration.sweep import SweepConfig

    config = SweepConfig(
        recipe=recipe,
        grid=list(grid),
        out=out,
        overrides=_train_overrides(list(ctx.args)),
        analysis=_analysis_fields(probe),
        parallel=parallel,
        equal_steps=equal_steps,
        probe=probe,
        plan=plan,
    )
    console = Console()
    try:
        outcome = _run(config, console, quiet)
    except KeyboardInterrupt:
        from cl_diag.cli import report_interrupt

        report_interrupt(
            f"run the same command again to finish the sweep in {out}: complete cells are "
            "skipped and an interrupted one resumes from its last.pt."
        )
        raise
    if outcome.skipped:
        console.print(
            f"skipped {len(outcome.skipped)} complete cell(s): {', '.join(outcome.skipped)}",
            highlight=False,
        )
    console.print(f"report: {outcome.comparison}", highlight=False)


def _run(config: SweepConfig, console: Console, quiet: bool) -> SweepResult:
    from cl_diag.cli.progress import run_cells
    from cl_diag.orchestration.sweep import sweep as run_sweep

    return run_cells(lambda **display: run_sweep(config, **display), console, quiet)
