"""The ``cl-diag`` command line: a Typer app with one module per command.

No maths lives here: each command parses its options (and recipe), calls one
orchestration function and prints with rich. A :class:`~cl_diag.errors.UserError`
raised anywhere below becomes a one-paragraph message on stderr and exit status 2.
"""

from __future__ import annotations

import logging
import sys

import typer

from cl_diag.errors import UserError
from cl_diag.io.atomic import storage_error

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

    for name in ("analyze", "synth", "train", "compare", "sweep", "reproduce", "recipes"):
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


def report_interrupt(what: str) -> None:
    """Say what an interrupt (Ctrl-C, SIGINT) left and how to go on; the exit status is 130."""
    from rich.console import Console
    from rich.text import Text

    message = Text("interrupted: ", style="bold yellow") + Text(what)
    Console(stderr=True, soft_wrap=True).print(message, highlight=False)


class _NoteHandler(logging.Handler):
    """Shows what the library announces (e.g. a leftover it removed) as ``note: ...`` lines."""

    def emit(self, record: logging.LogRecord) -> None:
        from rich.console import Console
        from rich.text import Text

        note = Text("note: ", style="bold yellow") + Text(record.getMessage())
        Console(stderr=True, soft_wrap=True).print(note, highlight=False)


def _show_notes() -> None:
    log = logging.getLogger("cl_diag")
    if not any(isinstance(h, _NoteHandler) for h in log.handlers):
        log.addHandler(_NoteHandler(logging.INFO))
        log.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, mapping user errors to exit status 2, a full
    disk to the same message-and-2, and an interrupt (Ctrl-C) to a note and exit status 130."""
    _show_notes()
    try:
        app(args=argv, prog_name="cl-diag", standalone_mode=True)
    except UserError as err:
        report_user_error(err)
        sys.exit(UserError.exit_code)
    except OSError as exc:
        full = storage_error(exc, exc.filename or "a file")
        if full is None:
            raise
        report_user_error(full)
        sys.exit(UserError.exit_code)
