"""``cl-diag train``: train a contrastive model with any loss of the library, with or without
VRN.

The command line of :mod:`cl_diag.orchestration.train` (one concept at two layers: options,
recipes and printing here; the resolved config and the run there)."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console

from cl_diag.cli import app
from cl_diag.cli.declared import declared_options
from cl_diag.errors import UserError
from cl_diag.orchestration.train import TrainConfig, check_train_options, train_options
from cl_diag.trainconfig import TRAIN


@app.command(name="train")
@declared_options(TrainConfig, TRAIN)
def train_command(
    ctx: typer.Context,
    recipe: str | None = typer.Argument(
        None,
        help="A TOML recipe whose keys are the options below (a path, e.g. "
        "trainers/simclr-vrn.toml, or a bundled name, e.g. simclr-vrn: see cl-diag recipes); "
        "options given here win.",
    ),
    recipe_name: str | None = typer.Option(
        None,
        "--recipe",
        help="The recipe as an option instead of the first argument (e.g. --recipe simclr-vrn).",
        rich_help_panel="Recipe",
    ),
    **declared: Any,  # one per TrainConfig field; read from ctx with the recipe's
) -> None:
    """Train a contrastive encoder with any loss, with or without VRN; write last.pt and metrics.csv.

    With no options: SimCLR on scikit-learn's digits with a small CNN, on CPU, in a few minutes.

    Examples:

      cl-diag train --loss dcl --vrn 30 --batch-size 32 --out runs/dcl-vrn-b32

      cl-diag train trainers/simclr-vrn.toml --batch-size 64

      cl-diag train --recipe simclr-vrn --batch-size 64

      cl-diag train --resume runs/dcl-vrn-b32/last.pt
    """  # noqa: E501 (typer's help shows a command docstring's lines as written)
    # here, not at the top: what runs a command is imported by that command alone, so that
    # help and argument errors stay instant (tests/test_cli_startup.py)
    from cl_diag.cli.progress import train_display
    from cl_diag.recipes import merge_recipe, read_recipe

    if recipe is not None and recipe_name is not None:
        raise UserError(f"Two recipes given ({recipe} and --recipe {recipe_name}); give one.")
    path = recipe if recipe is not None else recipe_name
    # A recipe's keys are TrainConfig's fields (= these options); the command line wins over it.
    values, given = merge_recipe(ctx, read_recipe(path, TrainConfig) if path is not None else {})
    config = train_options(values, given)
    check_train_options(config)  # a value out of bounds is refused before torch loads
    from cl_diag.orchestration.train import train as run_train

    try:
        console = Console(stderr=True)
        with train_display(Console(), quiet=config.quiet) as display:
            result = run_train(
                config,
                progress=display,
                on_advice=None
                if config.quiet
                else (lambda line: console.print(line, style="yellow", highlight=False)),
            )
    except KeyboardInterrupt:
        _interrupted(config)
        raise
    if result.out_dir is None:  # a non-zero rank under torchrun
        return
    typer.echo(result.summary())


def _interrupted(options: TrainConfig) -> None:
    from pathlib import Path

    from cl_diag.cli import report_interrupt

    folder = options.out or (str(Path(options.resume).parent) if options.resume else None)
    last = Path(folder) / "last.pt" if folder else None
    if last is not None and last.is_file():
        report_interrupt(
            f"{last} keeps the run as of its last completed epoch; continue it with "
            f"cl-diag train --resume {last}"
        )
    else:
        report_interrupt("the run stopped before its first epoch ended; nothing was kept.")
