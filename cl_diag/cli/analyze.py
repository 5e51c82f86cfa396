"""``cl-diag analyze``: pair-similarity diagnostics of two views' embeddings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from cl_diag.cli import app
from cl_diag.orchestration.analyze import AnalyzeConfig, analyze as run_analyze


def default_out(source: Path) -> Path:
    return source.parent / f"{source.stem}-analysis"


@app.command(no_args_is_help=True)
def analyze(
    source: Path = typer.Argument(..., help="Embeddings file (.npz or .pt with z1, z2[, labels])."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder [default: <source>-analysis]."),
    n_ref: Optional[int] = typer.Option(
        None, help="Training-set size the threshold -1/(n_ref-1) refers to [default: number of rows]."
    ),
    pairs: str = typer.Option("exact", help="'exact' (all pairs, streamed) or 'sampled' (--num-pairs per type)."),
    num_pairs: int = typer.Option(5000, help="Pairs drawn per type in sampled mode (the paper uses 5,000)."),
    seed: int = typer.Option(0, help="Seed for sampled mode."),
    block_size: Optional[int] = typer.Option(None, help="Rows per streamed block [default: from a memory budget]."),
    hist_bins: int = typer.Option(100, help="Bins of the stored histogram on [-1, 1]."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the report path."),
) -> None:
    """Measure positive, cross-view and within-view negative similarities; write result.json and reports.

    Example: [bold]cl-diag analyze pairs.npz --out out/ --n-ref 50000[/]
    """
    config = AnalyzeConfig(
        input=source,
        out=out if out is not None else default_out(source),
        n_ref=n_ref,
        pairs=pairs,
        num_pairs=num_pairs,
        seed=seed,
        block_size=block_size,
        hist_bins=hist_bins,
    )
    console = Console()
    show_status = not quiet and sys.stdout.isatty()
    if show_status:
        with console.status(f"analysing {source} ({pairs} pairs)"):
            outcome = run_analyze(config)
    else:
        outcome = run_analyze(config)
    if not quiet:
        _print_summary(console, outcome.result)
    console.print(f"report: {outcome.out / 'report.html'}", highlight=False)


def _print_summary(console: Console, result: dict) -> None:
    from rich.table import Table

    for name, layer in result["layers"].items():
        table = Table(title=f"{name}: n={layer['n']}, d={layer['d']}, threshold={result['threshold']:.6g}")
        for column in ("pair type", "count", "mean", "var", "min", "max", "excessive ratio"):
            table.add_column(column, justify="right" if column != "pair type" else "left")
        for pair_type, stats in layer["pairs"].items():
            ratio = stats.get("excessive_ratio")
            table.add_row(
                pair_type,
                str(stats["count"]),
                f"{stats['mean']:.4f}",
                f"{stats['var']:.4f}",
                f"{stats['min']:.4f}",
                f"{stats['max']:.4f}",
                "" if ratio is None else f"{ratio:.4f}",
            )
        console.print(table)
