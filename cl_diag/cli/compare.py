"""``cl-diag compare``: analysed runs side by side (reads result.json files only).

The command line of :mod:`cl_diag.orchestration.compare` (one concept at two layers: options and
printing here; the comparison there)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from cl_diag.cli import app


def _labels(pairs: list[str]) -> dict[str, str]:
    """``--label DIR=NAME`` options as DIR -> NAME (a bad one named with its fix, exit 2). A
    sweep's folders hold "=" ("batch-size=16_seed=1"): DIR is the longest part before an "="
    that exists, else everything before the last "=" (so NAME holds no "=")."""
    from cl_diag.errors import UserError

    out: dict[str, str] = {}
    for pair in pairs:
        cuts = [i for i, c in enumerate(pair) if c == "="]
        existing = [i for i in cuts if i > 0 and Path(pair[:i]).exists()]
        cut = existing[-1] if existing else (cuts[-1] if cuts else -1)
        where, sep, name = (pair[:cut], "=", pair[cut + 1 :]) if cut >= 0 else (pair, "", "")
        if not sep or not where:
            raise UserError(
                f"--label {pair!r} is not DIR=NAME. Write e.g. --label runs/a/analysis=baseline."
            )
        if where in out:
            raise UserError(f"--label names {where} twice. Give each run one label.")
        out[where] = name
    return out


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
    label: list[str] = typer.Option(
        [],
        "--label",
        help="Name a run in the report: DIR=NAME, DIR one of RUNS as given (repeatable). "
        "Runs not named are labelled by the options that differ between their training configs, "
        "or by their folder when they have none.",
    ),
    overwrite: bool = typer.Option(
        False,
        help="Replace files in --out that cl-diag did not write (or that changed since): "
        "without it such files stop the command.",
    ),
    plan: Path | None = typer.Option(
        None,
        "--plan",
        help="The study's plan (plans/*.toml): the report records its SHA-256, lists its primary "
        "claims first and says where the runs differ from its design.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the report path."),
) -> None:
    """Compare analysed runs: tables per layer, the batch-size and temperature views, CSV.

    Runs are labelled by what differs between their training configs (e.g. "simclr b32 +VRN30"),
    runs without one by their folder; --label DIR=NAME names a run yourself.

    Example: [bold]cl-diag compare runs/*/analysis --out reports/mine --baseline runs/simclr-b128/analysis[/]
    """  # noqa: E501 (typer's help shows a command docstring's lines as written)
    # pandas and matplotlib: imported only when a comparison is made
    from cl_diag.orchestration.compare import CompareConfig
    from cl_diag.orchestration.compare import compare as run_compare

    outcome = run_compare(
        CompareConfig(
            inputs=list(runs),
            out=out,
            baseline=baseline,
            plan=plan,
            overwrite=overwrite,
            labels=_labels(label),
        )
    )
    # soft_wrap: a long path must stay on one line (scripts read it)
    console = Console(soft_wrap=True)
    if not quiet:
        for name, shown in outcome.labels.items():
            console.print(
                Text(f"{shown}  ", style="bold") + Text(name, style="dim"), highlight=False
            )
        errors = Console(stderr=True, soft_wrap=True)
        for warning in outcome.warnings:
            errors.print(Text("warning: ", style="bold yellow") + Text(warning), highlight=False)
    console.print(Text(f"report: {outcome.report_html}"), highlight=False)
