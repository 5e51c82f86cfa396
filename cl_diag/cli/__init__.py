"""The ``cl-diag`` command line: a Typer app with one module per command.

No maths lives here: each command parses its options (and recipe), calls one
orchestration function and prints with rich. A :class:`~cl_diag.errors.UserError`
raised anywhere below becomes a one-paragraph message on stderr and exit status 2.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

from cl_diag.errors import InputWarning, UserError
from cl_diag.io.atomic import user_os_error


class _Commands(TyperGroup):
    """The app's group of commands, whose own ``--help`` is off unless given.

    typer (0.2x, its own click) coerces every parameter's value through a pydantic
    ``TypeAdapter`` unless it is already a bool, and the group's ``--help`` is None when not
    given, so every ``cl-diag COMMAND ...``, ``--help`` and argument errors included, imported
    pydantic (about 0.09 s) for it. False is what an absent flag means, so the help printed
    and every command line parse as before (issue 25: an instant command line)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option


app = typer.Typer(
    name="cl-diag",
    cls=_Commands,
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

    for name in ("analyze", "synth", "train", "compare", "sweep", "reproduce", "recipes", "theory"):
        try:
            importlib.import_module(f"cl_diag.cli.{name}")
        except ModuleNotFoundError as exc:  # a command not written yet
            if exc.name != f"cl_diag.cli.{name}":
                raise


_register_commands()


#: seconds a rank > 0 of a torchrun job waits for rank 0 to report the mistake they share
RANK_GRACE = 15.0


def _rank() -> int:
    """This process's rank in a torchrun job (0 outside one)."""
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    return int(rank) if rank.isdigit() and world.isdigit() and int(world) > 1 else 0


def report_user_error(err: UserError) -> None:
    """The one paragraph ``error: ...`` on stderr. Under torchrun every rank meets the same
    mistake and exits with status 2, and rank 0 alone says so: a rank > 0 first waits
    :data:`RANK_GRACE` seconds, in which torchrun stops it once rank 0 has failed; only a
    mistake rank 0 did not meet (a file missing on one node) is reported by the rank itself."""
    from rich.console import Console
    from rich.text import Text

    prefix = ""
    if _rank() > 0:
        try:
            time.sleep(RANK_GRACE)
        except KeyboardInterrupt:  # torchrun stopping the job: rank 0 has reported it
            return
        prefix = f"[rank {_rank()}] "

    # Text, not markup: messages quote user paths and ranges such as "[-1, 1]".
    message = Text(f"{prefix}error: ", style="bold red") + Text(str(err))
    Console(stderr=True, soft_wrap=True).print(message, highlight=False)


def report_interrupt(what: str) -> None:
    """Say what an interrupt (Ctrl-C or SIGINT, SIGTERM) left and how to go on; the exit status
    is 130 (143 for SIGTERM)."""
    from rich.console import Console
    from rich.text import Text

    _interrupt_reported.append(what)
    if _rank() > 0:  # a torchrun job: rank 0 says it (a rank > 0 may be stopped by torchrun)
        return
    message = Text("interrupted: ", style="bold yellow") + Text(what)
    Console(stderr=True, soft_wrap=True).print(message, highlight=False)


_interrupt_reported: list[str] = []


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


@contextmanager
def shown_warnings() -> Iterator[None]:
    """Inside, each :class:`~cl_diag.errors.InputWarning` the library raises is one line
    ``warning: ...`` on stderr (every time, rank 0 of a torchrun job only); other warnings
    are shown as Python shows them."""
    from rich.console import Console
    from rich.text import Text

    with warnings.catch_warnings():
        warnings.simplefilter("always", InputWarning)
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if not issubclass(category, InputWarning):
                shown(message, category, filename, lineno, file, line)
            elif _rank() == 0:
                text = Text("warning: ", style="bold yellow") + Text(str(message))
                Console(stderr=True, soft_wrap=True).print(text, highlight=False)

        warnings.showwarning = show
        yield


#: a ``key=value`` override as Hydra, solo-learn and Lightning users type it
_OVERRIDE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)=(.*)$")
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def _overrides_as_options(args: list[str]) -> list[str]:
    """``cl-diag train simclr-vrn batch-size=64 amp=false``: a ``key=value`` word where the
    command takes an argument, whose key is one of the command's options, is that option
    (``--batch-size 64``, ``--no-amp``). A word whose key is no option (a file such as
    ``simclr-ep=199.ckpt``) or that names an existing file stays as it is."""
    if len(args) < 2 or not any(_OVERRIDE.match(a) for a in args[1:]):
        return args
    import typer.main

    command = getattr(typer.main.get_command(app), "commands", {}).get(args[0])
    if command is None:
        return args
    options = {param.name: param for param in command.params if param.param_type_name == "option"}
    takes_value = {
        flag
        for param in options.values()
        if not getattr(param, "is_flag", False)
        for flag in param.opts
    }
    out = [args[0]]
    previous = None
    for arg in args[1:]:
        match = _OVERRIDE.match(arg)
        key, value = match.groups() if match else ("", "")
        param = options.get(key.replace("-", "_")) if match else None
        if param is None or previous in takes_value or os.path.exists(arg):
            out.append(arg)
        elif not getattr(param, "is_flag", False):
            out += [param.opts[0], value]
        elif value.strip().lower() in _TRUE:
            out.append(param.opts[0])
        elif value.strip().lower() in _FALSE and param.secondary_opts:
            out.append(param.secondary_opts[0])
        else:
            raise UserError(f"{arg}: {param.opts[0]} is a switch; write {key}=true or {key}=false.")
        previous = arg
    return out


def _refuse_unreadable_values(args: list[str]) -> None:
    """Values the command line would misread, refused with an ``error:`` line before the
    command parses them: an empty path (pathlib reads ``""`` as ``"."``, the current folder)
    and a number that is no whole number where one is taken (``--seed 1e308``, ``--hist-bins
    inf``: click's usage box would not say why)."""
    if len(args) < 2:
        return
    import typing

    import typer.main

    command = getattr(typer.main.get_command(app), "commands", {}).get(args[0])
    if command is None:
        return
    try:
        hints = typing.get_type_hints(command.callback)
    except Exception:  # a command whose annotations cannot be resolved: click decides
        return
    by_flag = {
        flag: param
        for param in command.params
        if param.param_type_name == "option" and not getattr(param, "is_flag", False)
        for flag in param.opts
    }
    arguments = iter(p for p in command.params if p.param_type_name == "argument")
    index = 1
    while index < len(args) and args[index] != "--":
        arg = args[index]
        if arg.startswith("--") and "=" in arg:
            flag, value = arg.split("=", 1)
            if flag in by_flag:
                _check_value(value, by_flag[flag].name, hints, flag)
        elif arg in by_flag and index + 1 < len(args):  # named by its long flag (-o: --out)
            long = next((o for o in by_flag[arg].opts if o.startswith("--")), arg)
            _check_value(args[index + 1], by_flag[arg].name, hints, long)
            index += 1
        elif not arg.startswith("-") or arg == "-":
            param = next(arguments, None)
            if param is not None:
                shown = f"the {param.metavar or param.name} argument"
                _check_value(arg, param.name, hints, shown)
        index += 1


def _check_value(value: str, name: str, hints: dict[str, Any], shown: str) -> None:
    import math
    import typing
    from pathlib import PurePath

    from cl_diag.options import shown as shortened
    from cl_diag.orchestration.analysis_config import ANALYZE
    from cl_diag.trainconfig import TRAIN

    kinds = set(typing.get_args(hints.get(name))) or {hints.get(name)}
    paths = {o.name for table in (TRAIN, ANALYZE) for o in table.options if o.kind is PurePath}
    if name in paths or any(isinstance(k, type) and issubclass(k, PurePath) for k in kinds):
        if not value.strip():
            out = name == "out"
            what = f"the folder to write to, e.g. {shown} out/" if out else "a path"
            raise UserError(f"{shown} is empty. Give {what}.")
    elif int in kinds:
        try:
            int(value)
        except ValueError:
            try:
                number = float(value)
            except ValueError:
                return  # not a number at all: click's own message says so
            text = shortened(value)[1:-1]
            problem = (
                "is not a whole number written in digits"
                if math.isfinite(number)
                else "is not a finite number"
            )
            raise UserError(
                f"{shown} {text} {problem}: give a whole number such as {shown} 100."
            ) from None


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, mapping user errors to exit status 2, a full
    disk to the same message-and-2, and an interrupt (Ctrl-C or SIGINT, and SIGTERM, which
    is handled as one: see :mod:`cl_diag.io.signals`) to one line and exit status 130 (143
    for SIGTERM)."""
    from cl_diag.io.signals import TERMINATE_STATUS, exit_status, interrupts, received

    _show_notes()
    _interrupt_reported.clear()
    args = list(sys.argv[1:] if argv is None else argv)
    with interrupts():
        try:
            args = _overrides_as_options(args)
            _refuse_unreadable_values(args)
            app(args=args, prog_name="cl-diag", standalone_mode=True)
        except SystemExit as exit_:
            # typer ends an interrupted command with exit status 130 (its KeyboardInterrupt);
            # say so if the command did not, and give SIGTERM its own status
            if exit_.code == 130:
                if not _interrupt_reported:
                    report_interrupt("cl-diag stopped; nothing was changed.")
                if received() == signal.SIGTERM:
                    sys.exit(TERMINATE_STATUS)
            raise
        except KeyboardInterrupt as exc:  # outside a command (e.g. while parsing)
            report_interrupt("cl-diag stopped; nothing was changed.")
            sys.exit(exit_status(exc))
        except UserError as err:
            report_user_error(err)
            sys.exit(UserError.exit_code)
        except OSError as exc:  # a full disk, a name too long for the file system
            mistake = user_os_error(exc)
            if mistake is None:
                raise
            report_user_error(mistake)
            sys.exit(UserError.exit_code)
