"""``cl-diag reproduce``: re-run a comparison (or one analysis) and check it was reproduced.

The command line over :mod:`cl_diag.orchestration.reproduce`, which does the re-running."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cl_diag.cli import app

if TYPE_CHECKING:
    from cl_diag.report.reproduction import Reproduction

#: fingerprint fields printed even when both sides agree on them
_KEY_FIELDS = ("cpu.model", "cpu.aten_capability", "threads.intra_op", "device")
_STYLE = {"exact": "green", "within noise": "cyan", "differs": "bold red"}


def _status(status: str) -> Text:
    return Text(status, style=_STYLE.get(status, ""))


def _print(rep: Reproduction, console: Console) -> None:
    from cl_diag.environment import flatten_fingerprint
    from cl_diag.report.reproduction import (
        FINDING_COLUMNS,
        STATUSES,
        finding_rows,
        outcome_text,
        run_summary,
    )

    console.print(Text(outcome_text(rep)), highlight=False)
    for note in rep.notes:
        console.print(Text("note: ", style="bold yellow") + Text(note), highlight=False)
    runs = Table(title="Runs: statistics by status", title_justify="left")
    for column in ("run", *STATUSES, "farthest (|Δ| / tolerance)"):
        runs.add_column(column, overflow="fold")
    for row in run_summary(rep):
        runs.add_row(*row)
    console.print(runs)
    findings = finding_rows(rep)
    if findings:
        table = Table(title="Findings", title_justify="left")
        for column in FINDING_COLUMNS[:-1]:
            table.add_column(column, overflow="fold")
        table.add_column(FINDING_COLUMNS[-1])
        for row in findings:
            table.add_row(*row[:-1], _status(row[-1]))
        console.print(table)
    columns = [(f"original: {t}", e) for t, e in rep.original_environments] + [
        (f"re-run: {t}", e) for t, e in rep.reproduction_environments
    ]
    if columns:
        flats = [flatten_fingerprint(None if e is None else e.to_dict()) for _, e in columns]
        keys = list(dict.fromkeys(k for flat in flats for k in flat))
        shown = [
            k for k in keys if k in _KEY_FIELDS or len({repr(flat.get(k)) for flat in flats}) > 1
        ]
        table = Table(
            title="Fingerprints (the fields that differ, and the CPU, threads and device)",
            title_justify="left",
        )
        table.add_column("field")
        for title, _ in columns:
            table.add_column(title, overflow="fold")
        for key in shown:
            table.add_row(
                key, *("—" if flat.get(key) is None else str(flat[key]) for flat in flats)
            )
        console.print(table)


@app.command(no_args_is_help=True)
def reproduce(
    target: Path = typer.Argument(
        ...,
        help="A comparison folder, the sweep folder holding one, or one analysis folder that "
        "cl-diag wrote.",
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="Folder for the re-run and reproduction.md/.html/.json "
        "(default runs/reproduce/<name>).",
    ),
    runs: int | None = typer.Option(
        None,
        "--runs",
        help="Re-run only K runs, one of each configuration first: a cheap spot check (the "
        "findings and seed means need every run and are then not compared).",
    ),
    checkpoint: Path | None = typer.Option(
        None,
        "--checkpoint",
        help="One analysis only: analyse this checkpoint again (the one the analysis measured) "
        "instead of training it again.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Re-run what made a comparison or an analysis, from the commands it recorded, and check each number, finding and verdict against the original: exact, within replicate noise, or differs.

    Exit status 0 when everything is exact or within noise, 1 when something differs beyond noise.

    Example: [bold]cl-diag reproduce reports/digits-batch-study --out runs/check[/]
    """  # noqa: E501 (typer's help shows a command docstring's lines as written)
    from cl_diag.cli.progress import run_cells
    from cl_diag.orchestration.reproduce import ReproduceConfig
    from cl_diag.orchestration.reproduce import reproduce as run_reproduce

    config = ReproduceConfig(target=target, out=out, runs=runs, checkpoint=checkpoint)
    # the tables are wide: a log or a pipe gets 160 columns, not rich's 80
    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        outcome = run_cells(
            lambda **display: run_reproduce(config, **display), console, quiet, what="reproduce"
        )
    except KeyboardInterrupt:
        from cl_diag.cli import report_interrupt

        report_interrupt(
            "run the same command again to continue: runs whose training completed are not "
            "trained again, and one cut short resumes from its last.pt."
        )
        raise
    _print(outcome.reproduction, console)
    Console(soft_wrap=True).print(
        Text(f"report: {outcome.out / 'reproduction.html'}"), highlight=False
    )
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
