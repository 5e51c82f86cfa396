"""``cl-diag compare``: analysed runs side by side (reads result.json files only).

The command line of :mod:`cl_diag.orchestration.compare` (one concept at two layers: options and
printing here; the comparison there)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from cl_diag.cli import app


@app.command(no_args_is_help=True)
def compare(
    runs: list[Path] = typer.Argument(
        ..., help="result.json files, or folders holding one (what `cl-diag analyze --out` wrote)."
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder for report.md, report.html, comparison.csv and figures."
    ),
    baseline: Path | None = typer.Option(
        None,
        "--baseline",
        help="The run the others are differenced against (added if not among RUNS).",
    ),
    overwrite: bool = typer.Option(
        False,
        help="Replace files in --out that cl-diag did not write (or that changed since): "
        "without it such files stop the command.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the report path."),
) -> None:
    """Compare analysed runs: tables per layer, the batch-size and temperature views, CSV.

    Runs are labelled by what differs between their training configs (e.g. "simclr b32 +VRN30").

    Example: [bold]cl-diag compare runs/*/analysis --out reports/mine --baseline runs/simclr-b128/analysis[/]
    """  # noqa: E501 (typer's help shows a command docstring's lines as written)
    # pandas and matplotlib: imported only when a comparison is made
    from cl_diag.orchestration.compare import CompareConfig
    from cl_diag.orchestration.compare import compare as run_compare

    outcome = run_compare(
        CompareConfig(inputs=list(runs), out=out, baseline=baseline, overwrite=overwrite)
    )
    # soft_wrap: a long path must stay on one line (scripts read it)
    console = Console(soft_wrap=True)
    if not quiet:
        for name, label in outcome.labels.items():
            console.print(
                Text(f"{label}  ", style="bold") + Text(name, style="dim"), highlight=False
            )
        errors = Console(stderr=True, soft_wrap=True)
        for warning in outcome.warnings:
            errors.print(Text("warning: ", style="bold yellow") + Text(warning), highlight=False)
    console.print(Text(f"report: {outcome.report_html}"), highlight=False)
