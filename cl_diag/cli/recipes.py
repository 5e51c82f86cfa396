"""``cl-diag recipes``: the bundled training recipes and probe suites, by name.

The command line's view of :mod:`cl_diag.recipes` (one concept at two layers: listing here;
reading, checking and merging recipes there)."""

from __future__ import annotations

from cl_diag.cli import app


@app.command(name="recipes")
def recipes_command() -> None:
    """List the bundled training recipes (for train and sweep) and probe suites (for analyze --probe).

    Each is reachable by name from any folder, also from an installed wheel.

    Examples:

      cl-diag train --recipe simclr-vrn

      cl-diag analyze runs/x/last.pt --probe quick
    """  # noqa: E501 (typer's help shows a command docstring's lines as written)
    # here, not at the top: a command's help imports nothing it does not print
    from rich.console import Console
    from rich.table import Table

    from cl_diag.recipes import BUNDLED, bundled, summary

    console = Console()
    for kind, (_, command, folder) in BUNDLED.items():
        table = Table(
            title=f"{kind}s (cl-diag {command}; {folder} in the checkout)", title_justify="left"
        )
        table.add_column("name", no_wrap=True)
        settings = ("loss", "vrn") if command == "train" else ()
        for key in settings:
            table.add_column(key, no_wrap=True)
        table.add_column("what it is")
        for name, path in bundled(kind).items():
            about, values = summary(path)
            table.add_row(name, *(str(values.get(key, "")) for key in settings), about)
        console.print(table)
