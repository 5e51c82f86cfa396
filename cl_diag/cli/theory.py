"""``cl-diag theory``: what the sources predict for a loss, its hyper-parameters and the sizes,
before any training, with advice and phase diagrams.

One concept at three layers: the command line here, over :mod:`cl_diag.orchestration.theory`
(reading the setting, writing the diagrams) and :mod:`cl_diag.measurement.advice` (the
predictions, from the closed forms of :mod:`cl_diag.measurement.theory`)."""

from __future__ import annotations

from pathlib import Path

import typer

from cl_diag.cli import app

_SETTING = "Setting (over what SOURCE records)"
_SIZES = "Sizes"


@app.command(name="theory")
def theory_command(
    source: str | None = typer.Argument(
        None,
        help="A result.json (or analysis folder), a cl-diag checkpoint or a training recipe "
        "whose setting to read; the options below go over it.",
        show_default=False,
    ),
    loss: str | None = typer.Option(
        None, help="The loss (e.g. supcl, sigmoid, simclr).", rich_help_panel=_SETTING
    ),
    temperature: float | None = typer.Option(
        None,
        "--temperature",
        "--tau",
        "--t",
        help="τ (t for the sigmoid loss).",
        rich_help_panel=_SETTING,
    ),
    bias: float | None = typer.Option(
        None, "--bias", "--b", help="The sigmoid loss's b (= −b_SigLIP).", rich_help_panel=_SETTING
    ),
    alpha: float | None = typer.Option(
        None, help="supcl's self-supervised share α in [0, 1].", rich_help_panel=_SETTING
    ),
    within_view: bool | None = typer.Option(
        None,
        "--within-view/--cross-view-only",
        help="The sigmoid loss with within-view negatives, or cross-view ones only.",
        rich_help_panel=_SETTING,
        show_default=False,
    ),
    vrn: float | None = typer.Option(
        None, help="VRN's weight λ (0: off).", rich_help_panel=_SETTING
    ),
    n: int | None = typer.Option(
        None, "--n", help="n, the training instances (the full batch).", rich_help_panel=_SIZES
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", "--m", help="m, the mini-batch size.", rich_help_panel=_SIZES
    ),
    d: int | None = typer.Option(
        None, "--d", help="d, the dimension the loss sees.", rich_help_panel=_SIZES
    ),
    classes: int | None = typer.Option(
        None, help="supcl: classes per balanced batch (the SSEM's m).", rich_help_panel=_SIZES
    ),
    per_class: int | None = typer.Option(
        None,
        help="supcl: instances of each class per batch (the SSEM's n).",
        rich_help_panel=_SIZES,
    ),
    views: int | None = typer.Option(
        None, help="supcl: views per instance (default 2).", rich_help_panel=_SIZES
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write the phase diagrams (SVG and PNG) into this folder."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print every number as JSON instead."),
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
    from cl_diag.orchestration.theory import TheoryConfig, theory

    outcome = theory(
        TheoryConfig(
            source=source,
            loss=loss,
            temperature=temperature,
            bias=bias,
            alpha=alpha,
            within_view=within_view,
            vrn=vrn,
            n=n,
            batch_size=batch_size,
            d=d,
            classes=classes,
            per_class=per_class,
            views=views,
            out=out,
        )
    )
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
