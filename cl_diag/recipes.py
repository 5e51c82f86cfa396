"""TOML recipes for any Typer command: keys are the command's option names (``cl-diag recipes``,
:mod:`cl_diag.cli.recipes`, lists the bundled ones).

A recipe is a flat TOML table of one command's options, with dashes or underscores::

    # trainers/dcl-vrn.toml
    loss = "dcl"
    vrn = 30
    batch-size = 32

An option given on the command line wins over the recipe, which wins over the default; which
options were given is asked of click (``ctx.get_parameter_source``), so an option passed at its
default still counts. The options come from a click command or, without click, from a config
dataclass (how the sweep reads train recipes); either way the merge is :func:`merge_layers`.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from cl_diag.errors import UserError
from cl_diag.io.tomlfile import tomllib

__all__ = [
    "BUNDLED",
    "COMMAND_LINE_ONLY",
    "apply_recipe",
    "bundled",
    "explicit_options",
    "locate",
    "merge_layers",
    "merge_recipe",
    "option_types",
    "read_recipe",
]

#: The bundled kinds of TOML file: kind -> (data package, the command that reads it, the folder of
#: the checkout it comes from). The checkout's trainers/ and probes/ are the one copy; an installed
#: cl-diag carries them as the data packages cl_diag.trainers and cl_diag.probes.
BUNDLED = {
    "recipe": ("cl_diag.trainers", "train", "trainers/"),
    "probe suite": ("cl_diag.probes", "analyze", "probes/"),
}


def bundled(kind: str) -> dict[str, Path]:
    """``{name: path}`` of the bundled files of ``kind`` (``"recipe"`` or ``"probe suite"``)."""
    package = BUNDLED[kind][0]
    return {
        entry.name[: -len(".toml")]: Path(str(entry))
        for entry in sorted(resources.files(package).iterdir(), key=lambda e: e.name.split(".")[0])
        if entry.name.endswith(".toml")
    }


def summary(path: Path) -> tuple[str, dict[str, Any]]:
    """What a bundled file is for (the first line of its leading comment) and its settings."""
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0] if text else ""
    about = first.lstrip("#").strip().rstrip(":") if first.startswith("#") else ""
    return about, tomllib.loads(text)


def locate(value: str | Path, kind: str) -> Path:
    """The file a recipe or probe-suite argument names: a path if one exists, else a bundled name.

    ``trainers/simclr-vrn.toml``, ``simclr-vrn`` and ``simclr-vrn.toml`` all name the same recipe
    (the last two also from an installed wheel, outside the checkout).
    """
    path = Path(value).expanduser()
    if path.is_file():
        return path
    names = bundled(kind)
    name = path.name[: -len(".toml")] if path.name.endswith(".toml") else path.name
    if name in names and (
        str(value) == path.name or path.parent.as_posix() == BUNDLED[kind][2].rstrip("/")
    ):
        return names[name]
    folder = BUNDLED[kind][2]
    raise UserError(
        f"{kind} {value} is neither a file nor a bundled {kind}. Give the path of a .toml {kind} "
        f"or one of the bundled names: {', '.join(names)} (see {folder}); `cl-diag recipes` lists "
        "them."
    )


#: Options a recipe or probe suite may not set: where the outputs go and what they may replace
#: are the user's decision on the command line, never a shared file's.
COMMAND_LINE_ONLY = frozenset({"out", "overwrite", "resume"})

# Parameter sources that mean "the user said so" (click's ParameterSource names).
_EXPLICIT_SOURCES = ("COMMANDLINE", "ENVIRONMENT", "PROMPT")


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def option_types(command: Any) -> dict[str, Any]:
    """``{option name: Python type}`` of a Typer/click command's options (not arguments).

    ``command`` is a click command (``ctx.command``, or one taken from
    ``typer.main.get_command(app)``); types come from the callback's annotations, with
    ``Optional[X]`` read as ``X`` (``Any`` when unannotated). A dataclass *type* works too: its
    fields are the options (how the sweep reads train recipes without click).
    """
    if isinstance(command, type) and dataclasses.is_dataclass(command):
        hints = typing.get_type_hints(command)
        return {f.name: _strip_optional(hints[f.name]) for f in dataclasses.fields(command)}
    callback = getattr(command, "callback", None)
    try:
        hints = typing.get_type_hints(callback) if callback is not None else {}
    except Exception:
        hints = {}
    signature = inspect.signature(callback) if callback is not None else None
    out: dict[str, Any] = {}
    for param in command.params:
        if getattr(param, "param_type_name", None) != "option" or not param.name:
            continue
        if signature is not None and param.name not in signature.parameters:
            continue  # typer's own (e.g. --install-completion)
        out[param.name] = _strip_optional(hints.get(param.name, Any))
    return out


def _check_type(key: str, value: Any, tp: Any, source: str) -> Any:
    shown = "--" + key.replace("_", "-")

    def bad(kind: str) -> UserError:
        return UserError(f"{source}: {key} = {value!r} must be {kind} (the type of {shown}).")

    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if isinstance(tp, type) and issubclass(tp, Path):
        if not isinstance(value, str):
            raise bad("a path string")
        return tp(value)
    if typing.get_origin(tp) in (list, tuple):
        if not isinstance(value, list):
            raise bad("a list")
        return value
    return value


def read_recipe(path: str | Path, command: Any) -> dict[str, Any]:
    """Parse and validate a recipe for ``command``; keys come back with underscores.

    Raises :class:`UserError` for a missing or malformed file, a nested table, a key that is
    not an option of the command (listing the valid keys), or a value of the wrong type.
    """
    # analyze reads its options from a probe suite (--probe), train and sweep from a recipe
    kind = "probe suite" if getattr(command, "name", None) == "analyze" else "recipe"
    p = locate(path, kind)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{kind} {p} is not valid TOML: {exc}.") from None
    kinds = option_types(command)
    # an option spelt otherwise on the command line (--rename fills renames) is keyed so too
    spelt = {
        flag.removeprefix("--").replace("-", "_"): param.name
        for param in getattr(command, "params", ())
        for flag in param.opts
        if flag.startswith("--") and param.name in kinds
    }
    key_of = {name: key for key, name in spelt.items()}
    valid = ", ".join(
        sorted(key_of.get(k, k).replace("_", "-") for k in kinds if k not in COMMAND_LINE_ONLY)
    )
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = spelt.get(key.replace("-", "_"), key.replace("-", "_"))
        if isinstance(value, dict):
            raise UserError(
                f"{kind} {p}: [{key}] is a table; a {kind} is a flat list of options. Valid keys: "
                f"{valid}."
            )
        if name in COMMAND_LINE_ONLY and name in kinds:
            raise UserError(
                f"{kind} {p}: {key!r} decides where the command writes (or what it replaces); "
                f"a {kind} never does. Give --{name} on the command line and remove {key!r} "
                f"from {p}."
            )
        if name not in kinds:
            raise UserError(
                f"{kind} {p}: {key!r} is not an option of this command. Valid keys: {valid}."
            )
        if name in out:
            raise UserError(
                f"{kind} {p}: {key!r} is given twice (as {name} and {name.replace('_', '-')})."
            )
        out[name] = _check_type(name, value, kinds[name], f"{kind} {p}")
    return out


def explicit_options(ctx: Any) -> set[str]:
    """Names of the options the user gave on the command line (not left at their default)."""
    names = set()
    for name in ctx.params:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name in _EXPLICIT_SOURCES:
            names.add(name)
    return names


def merge_layers(
    defaults: Mapping[str, Any], *layers: Mapping[str, Any]
) -> tuple[dict[str, Any], set[str]]:
    """``defaults`` overlaid with each layer in turn: a later layer wins over an earlier one.

    Returns ``(values, given)``: the merged values and the names some layer set (a layer
    holds only what was set explicitly: a recipe's keys, the options given on the command
    line, a sweep cell's grid values).
    """
    values: dict[str, Any] = dict(defaults)
    given: set[str] = set()
    for layer in layers:
        values.update(layer)
        given.update(layer)
    return values, given


def merge_recipe(ctx: Any, recipe: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """``ctx.params`` with ``recipe`` values filled in where the command line was silent.

    Returns ``(values, given)``: the merged option values and the names set explicitly by
    the command line or by the recipe.
    """
    cli = {name: ctx.params[name] for name in explicit_options(ctx)}
    return merge_layers(ctx.params, recipe, cli)


def apply_recipe(ctx: Any, path: str | Path | None) -> tuple[dict[str, Any], set[str]]:
    """Read the recipe at ``path`` (None: no recipe) for ``ctx.command`` and merge it."""
    recipe = read_recipe(path, ctx.command) if path is not None else {}
    return merge_recipe(ctx, recipe)
