"""``cl-diag theory``: what the sources predict for a loss, its hyper-parameters and the sizes,
before any training, with advice and phase diagrams.

One concept at three layers: the command line here, over :mod:`cl_diag.orchestration.theory`
(reading the setting, writing the diagrams) and :mod:`cl_diag.measurement.advice` (the
predictions, from the closed forms of :mod:`cl_diag.measurement.theory`)."""

from __future__ import annotations

from typing import Any

import typer

from cl_diag.cli import app
from cl_diag.cli.declared import declared_options
from cl_diag.orchestration.theory_config import THEORY, TheoryConfig


@app.command(name="theory")
@declared_options(TheoryConfig, THEORY)
def theory_command(
    as_json: bool = typer.Option(False, "--json", help="Print every number as JSON instead."),
    **declared: Any,  # one per TheoryConfig field
) -> None:
    """What the sources predict for a setting, before you train: each result that applies,
    the condition it rests on (and whether it holds at these sizes) and advice, with phase
    diagrams.

    Examples:

      cl-diag theory --loss supcl --alpha 0.2 --temperature 0.3 --classes 10 --per-class 10

      cl-diag theory --loss sigmoid --t 1 --b -1 --n 4 --d 4 --out phase/

      cl-diag theory trainers/simclr-vrn.toml --batch-size 32
    """
    from rich.console import Console

    from cl_diag.measurement.advice import CERTAINTY
    from cl_diag.orchestration.theory import theory

    outcome = theory(TheoryConfig(**declared))
    if as_json:
        print(outcome.to_json())
        return
    console = Console()
    advice = outcome.advice
    settings = ", ".join(f"{k} {v}" for k, v in advice.settings.items())
    sizes = ", ".join(f"{k} = {v}" for k, v in vars(advice.sizes).items() if v is not None)
    console.print(f"[bold]{advice.loss}[/] ({settings}); {sizes}", highlight=False)
    if advice.none:
        console.print(f"no prediction: {advice.none}.", highlight=False)
    for item in advice.items:
        holds = {True: "holds", False: "FAILS here", None: "not known (give the size)"}[item.holds]
        console.print(
            f"\n[bold]{item.result}[/] — {item.source}; {CERTAINTY[item.certainty]}",
            highlight=False,
        )
        console.print(f"  predicts: {item.prediction}", highlight=False)
        console.print(f"  rests on: {item.condition} — {holds}", highlight=False)
        if item.advice:
            console.print(f"  [bold]advice:[/] {item.advice}", highlight=False)
    for path in outcome.files:
        console.print(f"wrote {path}", highlight=False)
