"""``cl-diag synth``: write a synthetic embeddings file to try ``analyze`` on."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from cl_diag.cli import app


@app.command(no_args_is_help=True)
def synth(
    out: Path = typer.Argument(..., help="Output .npz file."),
    n: int = typer.Option(2000, "--n", help="Number of instances (rows of each view)."),
    d: int = typer.Option(64, "--d", help="Embedding dimension."),
    classes: int = typer.Option(10, help="Number of classes; labels are stored as 'labels'."),
    spread: float = typer.Option(
        0.6, help="Within-class spread of the latent points (relative to class distance)."
    ),
    view_noise: float = typer.Option(
        0.3, help="Noise that separates the two views of an instance."
    ),
    seed: int = typer.Option(0, help="Random seed; the same seed writes the same file."),
    overwrite: bool = typer.Option(False, help="Replace OUT if it exists."),
) -> None:
    """Write two views of synthetic clustered embeddings (z1, z2, labels) to a .npz file.

    Example: [bold]cl-diag synth pairs.npz --n 2000 --d 64 && cl-diag analyze pairs.npz --out out/[/]
    """  # noqa: E501 (typer's help shows a command docstring's lines as written)
    from cl_diag.io.synthetic import check_npz_target, make_synthetic_pairs, save_npz_atomically

    check_npz_target(out, overwrite=overwrite)  # before the work, not after
    arrays = make_synthetic_pairs(
        n=n, d=d, classes=classes, spread=spread, view_noise=view_noise, seed=seed
    )
    save_npz_atomically(out, arrays, overwrite=overwrite)
    Console().print(f"wrote {out}: z1, z2 of shape ({n}, {d}), {classes} classes", highlight=False)
