"""A command's options made from the config dataclass that declares them (one declaration per
option: :func:`cl_diag.options.option`), so that the command line, the API's checks and a
checkpoint's stored config read one field.

:func:`declared_options` gives a command function the parameters of every field of a config:
the command is written with its own parameters (a recipe argument, say) and ``**options``;
Typer sees one ``--option`` per field, with the field's default, spellings, help and panel.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any, TypeVar

import typer

from cl_diag.options import OptionTable, declaration

__all__ = ["declared_options"]

F = TypeVar("F", bound=Callable[..., Any])


def declared_options(config: type, table: OptionTable) -> Callable[[F], F]:
    """Decorate a command ``f(..., **options)``: its ``**options`` become one parameter per
    field of ``config`` (declared in ``table``), in declaration order, after ``f``'s own: a
    positional argument where the declaration names one, else an option, in the form on the
    command line the declaration gives (``cli``: type and default) or the field's."""

    def decorate(command: F) -> F:
        signature = inspect.signature(command)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        hints = typing.get_type_hints(command)
        config_hints = typing.get_type_hints(config)
        params = list(own)
        for f in fields(config):
            declared, spec = table[f.name], declaration(f)
            annotation, default = spec["cli"] or (config_hints[f.name], f.default)
            if spec["argument"]:
                info = typer.Argument(
                    ... if default is MISSING else default,
                    help=declared.help,
                    metavar=spec["argument"],
                    show_default=False,
                )
            else:
                info = typer.Option(
                    default,
                    *declared.flags,
                    help=declared.help,
                    rich_help_panel=declared.panel or None,
                )
            params.append(
                inspect.Parameter(
                    f.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation
                )
            )
            hints[f.name] = annotation
        command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = hints
        return command

    return decorate
