"""The ``cl-diag`` command line: a Typer app with one module per command.

No maths lives here: each command parses its options (and recipe), calls one
orchestration function and prints with rich. A :class:`~cl_diag.errors.UserError`
raised anywhere below becomes a one-paragraph message on stderr and exit status 2.
"""

from __future__ import annotations

import sys

import typer

from cl_diag.errors import UserError

app = typer.Typer(
    name="cl-diag",
    help=(
        "Embedding diagnostics for contrastive learning: positive alignment, cross-view and "
        "within-view negative similarities, excessive separation below -1/(n-1), VRN, probes "
        "and reproducible reports."
    ),
    epilog=(
        "Examples:\n\n"
        "  cl-diag analyze pairs.npz --out out/\n\n"
        "  cl-diag train --loss dcl --vrn 30 --batch-size 32 --out runs/dcl-vrn-b32\n\n"
        "  cl-diag analyze runs/dcl-vrn-b32/last.pt --probe probes/quick.toml\n\n"
        "  cl-diag compare runs/*/analysis --out reports/mine\n\n"
        "  cl-diag sweep trainers/simclr.toml --grid batch-size=16,32,64 --grid vrn=0,30"
        " --out sweeps/bs\n\n"
        "  cl-diag synth pairs.npz --n 2000 --d 64\n\n"
        "  cl-diag recipes                        (the bundled recipes and probe suites)\n\n"
        "Run cl-diag COMMAND --help for every option of a command."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _register_commands() -> None:
    # Each module adds its command(s) to ``app`` on import.
    import importlib

    for name in ("analyze", "synth", "train", "compare", "sweep", "recipes"):
        try:
            importlib.import_module(f"cl_diag.cli.{name}")
        except ModuleNotFoundError as exc:  # a command not written yet
            if exc.name != f"cl_diag.cli.{name}":
                raise


_register_commands()


def report_user_error(err: UserError) -> None:
    from rich.console import Console
    from rich.text import Text

    # Text, not markup: messages quote user paths and ranges such as "[-1, 1]".
    message = Text("error: ", style="bold red") + Text(str(err))
    Console(stderr=True, soft_wrap=True).print(message, highlight=False)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, mapping user errors to exit status 2."""
    try:
        app(args=argv, prog_name="cl-diag", standalone_mode=True)
    except UserError as err:
        report_user_error(err)
        sys.exit(UserError.exit_code)
