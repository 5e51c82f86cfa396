"""Every option of cl-diag declared once: its type, its bounds, the fix a message names, and
the products of options that bound what a run allocates.

In the spirit of scikit-learn's declared parameter constraints, one :class:`Option` per
option says what a value must be (a config's fields declare theirs with :func:`option`), and
:func:`check_values` turns a bad value into an :class:`OptionError` (a
:class:`~cl_diag.errors.UserError`) naming the option *as the user wrote it*: ``CLI``
(``--batch-size 0 must be in [2, 1048576] (...)``), ``PYTHON`` (``batch_size=0 ...``) or
:func:`in_config` (``runs/a/last.pt is a damaged cl-diag checkpoint: config.batch_size =
-4 ...``). So the same declarations check the command line, the Python API and every stored
config. A :class:`Product` bounds the product of several options (a 65536-wide hidden layer
times a 65536-wide output is 16 GiB) and names the option to lower. Choices that depend on
what is installed (``timm:NAME``) or on another option (a loss's hyper-parameters) are
checked where that knowledge lives.

This module imports nothing heavy: the command line checks its options before torch loads.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import operator
import os
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from cl_diag.errors import UserError

__all__ = [
    "CLI",
    "DATASETS",
    "DEFAULT_KEYS",
    "DEVICES",
    "KEY_ENCODERS",
    "LABELS_KEY",
    "LOGGERS",
    "MAX_PARAMETERS",
    "MAX_SEED",
    "MAX_WORKERS",
    "MONITOR",
    "MULTI_VIEW_LOSSES",
    "PAIR_MODES",
    "PROBES",
    "PYTHON",
    "QUEUE_LOSSES",
    "REPRODUCE",
    "SWEEP",
    "SYNTH",
    "TRAINING_LOSSES",
    "Option",
    "OptionError",
    "OptionTable",
    "Product",
    "Rule",
    "Spelling",
    "check_products",
    "check_values",
    "declaration",
    "in_config",
    "option",
    "shown",
    "split_keys",
]

# --------------------------------------------------------------------------- vocabularies

#: Datasets ``cl-diag train`` knows (``toy``: the rebuttal's free vectors, no images).
DATASETS = ("digits", "cifar10", "cifar100", "imagefolder", "toy")
#: Every loss of the library ``cl-diag train`` offers (vrn is a regulariser: ``--vrn``).
TRAINING_LOSSES = (
    "infonce",
    "simclr",
    "dcl",
    "dhel",
    "sigmoid",
    "spectral",
    "triplet",
    "contrastive",
    "supcon",
    "supcl",
    "hcl",
)
#: The losses with a multi-positive form over V > 2 views (``Loss.multi_view``: ``--views``).
MULTI_VIEW_LOSSES = ("simclr", "infonce", "supcon", "supcl", "vrn")
#: The losses that take queue negatives (``Loss.takes_queue``: ``--queue``): cross-view
#: negatives in the denominator.
QUEUE_LOSSES = ("infonce", "simclr", "dcl", "hcl", "vrn")
OPTIMIZERS = ("sgd", "adam", "adamw")
LR_SCALINGS = ("auto", "linear", "none")
SCHEDULES = ("cosine", "constant")
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: With ``--queue``: a momentum copy of the encoder (MoCo v2) or the encoder itself, detached.
KEY_ENCODERS = ("momentum", "same")
#: Where ``cl-diag train`` also sends its metrics rows (cl_diag.io.loggers; csv: metrics.csv only)
LOGGERS = ("csv", "tensorboard", "wandb")
#: How ``analyze`` visits the pairs: all of them, streamed; ``--num-pairs`` drawn per type; or
#: the exact mean and variance of all of them in closed form, the rest from sampled pairs.
PAIR_MODES = ("exact", "sampled", "moments")
#: The probes ``analyze --probes`` can name.
PROBES = ("linear", "knn", "retrieval", "clustering")

# --------------------------------------------------------------------------- bounds

#: Seeds numpy and torch generators take: [0, 2^63).
MAX_SEED = 2**63 - 1
#: Most DataLoader worker processes (of train and analyze).
MAX_WORKERS = 64
#: Most parameters of a backbone (2^30 float32 numbers, 4 GiB), counted from its
#: architecture before any weight is allocated (a timm model built on the meta device).
MAX_PARAMETERS = 1 << 30
#: Most epochs (and warm-up epochs) of a run; beyond it a typo, not a schedule.
MAX_EPOCHS = 1_000_000
#: Most optimiser steps (and warm-up or logging steps) of a run.
MAX_STEPS = 10**12
#: Most augmented views per instance (multi-crop uses about ten).
MAX_VIEWS = 64
#: Most instances per batch (train's global batch) or per encoding batch (analyze).
MAX_BATCH = 1 << 20
#: Most training instances of a run (``--num-samples``), images sampled or probed by analyze.
MAX_INSTANCES = 1 << 26
#: Most rows of one streamed similarity tile: a tile of b x b takes about 16 b^2 bytes.
MAX_BLOCK_SIZE = 8192
#: Most histogram bins of the pair statistics: keeps s * B/2 exact in float64 (24 + 21 bits).
MAX_HIST_BINS = 1 << 20
#: Most pairs sampled mode draws per type (exact mode visits every pair instead).
MAX_NUM_PAIRS = 10**9
#: Widest projector layer (hidden or output), toy dimension, queue length.
MAX_WIDTH = 1 << 16
MAX_QUEUE = 1 << 24
#: Longest name of an architecture (``timm:`` names are under a hundred characters).
MAX_NAME = 256
#: Largest image side (crop size).
MAX_IMAGE_SIZE = 1024

# --------------------------------------------------------------------------- spelling


#: the longest value a message repeats whole
SHOWN = 80


def shown(value: Any) -> str:
    """``repr(value)``, or for a longer one its first and last characters and its length:
    ``'aaaa…zzzz' (100,000 characters)``, so that a message stays one readable line."""
    text = repr(value)
    if len(text) <= SHOWN:
        return text
    length = len(value) if isinstance(value, str) else len(text)
    return f"{text[: SHOWN // 2]}…{text[-SHOWN // 4 :]} ({length:,} characters)"


@dataclass(frozen=True)
class Spelling:
    """How a message names an option: ``--batch-size`` (the command line), ``batch_size``
    (Python), ``config.batch_size`` (a stored config, with ``prefix`` saying whose and
    ``suffix`` the fix)."""

    style: str  # "cli", "python" or "config"
    prefix: str = ""
    suffix: str = ""

    def name(self, option: str) -> str:
        if self.style == "cli":
            return "--" + option.replace("_", "-")
        if self.style == "config":
            return f"config.{option}"
        return option

    def given(self, option: str, value: Any) -> str:
        """``--queue 1000000000`` / ``queue=1000000000`` / ``config.queue = 1000000000``; a
        value longer than :data:`SHOWN` characters is shortened (:func:`shown`)."""
        if self.style == "cli":
            return f"{self.name(option)} {shown(value)}"
        if self.style == "config":
            return f"{self.name(option)} = {shown(value)}"
        return f"{option}={shown(value)}"

    def message(self, text: str) -> str:
        return f"{self.prefix}{text}{self.suffix}"


CLI = Spelling("cli")
PYTHON = Spelling("python")


def in_config(where: str | os.PathLike[str], *, checkpoint: bool = True) -> Spelling:
    """The spelling of a training config stored in ``where``: a checkpoint (``checkpoint``:
    the message calls it damaged and says to give an intact one) or an argument."""
    if checkpoint:
        return Spelling(
            "config",
            f"{where} is a damaged cl-diag checkpoint: ",
            " Give the last.pt that cl-diag train wrote (an intact copy), or train the run again.",
        )
    return Spelling("config", f"{where}: ")


class OptionError(UserError, ValueError):
    """An option's value breaks its declaration. ``option`` names it (a field name),
    ``problem`` says what is wrong without naming it (``must be at least 2 (...)``)."""

    def __init__(self, message: str, option: str, problem: str = ""):
        super().__init__(message, option, problem)
        self.message, self.option, self.problem = message, option, problem

    def __str__(self) -> str:
        return self.message


# --------------------------------------------------------------------------- declarations

_KIND_WORDS = {
    int: "a whole number",
    float: "a number",
    str: "a string",
    bool: "true or false",
    PurePath: "a path",
    tuple: "a list of names",
}


@dataclass(frozen=True)
class Option:
    """One option: ``kind`` (int, float, str, bool, or PurePath for a path), ``optional``
    (None allowed: "the documented default"), the closed range [``low``, ``high``] (open at
    an end whose ``*_open`` is set; floats must be finite), ``choices`` of a string option,
    and ``hint``: what the message adds after the bound (the meaning or the usual value;
    ``{name}`` in it names another option as the message names this one)."""

    name: str
    kind: type
    optional: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] | None = None
    hint: str = ""
    #: the longest string accepted (a name; None: any length)
    max_length: int | None = None
    #: what ``--help`` says, the help panel it is listed under, and its spellings on the
    #: command line when not ``--name`` (``("--quiet", "-q")``): a config's declaration
    #: (:func:`option`) fills them, and the command's parameters are made from them
    help: str = ""
    panel: str = ""
    flags: tuple[str, ...] = ()
    #: the groups the option belongs to (:meth:`OptionTable.tagged`): e.g. ``"resume-free"``
    tags: frozenset[str] = frozenset()

    def range_text(self) -> str:
        """``in [0, 1)``, ``at least 2``, ``< 1``; empty when unbounded."""
        low, high = _num(self.low), _num(self.high)
        if self.low is not None and self.high is not None:
            return (
                f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
            )
        if self.low is not None:
            return f"{'> ' if self.low_open else 'at least '}{low}"
        if self.high is not None:
            return f"{'< ' if self.high_open else 'at most '}{high}"
        return ""

    def normalise(self, value: Any, spelling: Spelling = CLI) -> Any:
        """``value`` as this option's type (a numpy integer as an int, an int as a float; a
        path as given), or :class:`OptionError` naming the option, the value and the
        bound it breaks."""
        if value is None:
            if self.optional:
                return None
            raise self._error(value, f"must be {_KIND_WORDS[self.kind]}", spelling, hint=False)
        value = self._typed(value, spelling)
        if self.choices is not None and value not in self.choices:
            raise self._error(value, f"is not one of: {', '.join(self.choices)}", spelling)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            low, high = self.low, self.high
            if (low is not None and (value < low or (self.low_open and value == low))) or (
                high is not None and (value > high or (self.high_open and value == high))
            ):
                raise self._error(value, f"must be {self.range_text()}", spelling)
        return value

    def _typed(self, value: Any, spelling: Spelling) -> Any:
        words = _KIND_WORDS[self.kind]
        if self.kind is bool:
            if isinstance(value, bool) or type(value).__name__ == "bool_":  # numpy's bool too
                return bool(value)
            raise self._error(value, f"must be {words}", spelling, hint=False)
        if self.kind is int:
            if isinstance(value, bool):
                raise self._error(value, f"must be {words}", spelling, hint=False)
            try:  # int, numpy and torch integers: whatever says it is an index
                return operator.index(value)
            except TypeError:
                raise self._error(value, f"must be {words}", spelling, hint=False) from None
        if self.kind is float:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise self._error(value, f"must be {words}", spelling, hint=False)
            number = float(value)
            if not math.isfinite(number):
                raise self._error(value, "must be a finite number", spelling, hint=False)
            return number
        if self.kind is PurePath:  # a str or a Path, kept as given (configs hold either)
            if isinstance(value, (str, os.PathLike)):
                return value
            raise self._error(value, f"must be {words}", spelling, hint=False)
        if self.kind is tuple:  # names (--layers, --rename ...): the command line reads text
            if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
                return tuple(value)
            raise self._error(value, f"must be {words}", spelling, hint=False)
        if not isinstance(value, str):
            raise self._error(value, f"must be {words}", spelling, hint=False)
        if self.max_length is not None and len(value) > self.max_length:
            raise self._error(
                value,
                f"is longer than the {self.max_length} characters accepted",
                spelling,
                hint=False,
            )
        return value

    def _error(
        self, value: Any, problem: str, spelling: Spelling, *, hint: bool = True
    ) -> OptionError:
        """The error of ``value``; ``hint`` (for a bound or a choice, not a wrong type: the
        hint speaks of the values) appends the option's hint."""
        if self.hint and hint:  # "{pairs}" in a hint: the option named as this one is
            problem += " (" + re.sub(r"\{(\w+)\}", lambda m: spelling.name(m[1]), self.hint) + ")"
        text = spelling.message(f"{spelling.given(self.name, value)} {problem}.")
        return OptionError(text, self.name, problem)


def _num(x: float | None) -> str:
    if x is None:
        return ""
    if float(x).is_integer():
        whole = int(x)
        if whole == MAX_SEED:
            return "2^63 - 1"
        return str(whole)
    return f"{x:g}"


@dataclass(frozen=True)
class Product:
    """``factor`` x the product of ``names``' values (a name may repeat: an image side
    squared) is at most ``limit`` float32 numbers. ``what`` says what they hold; ``lower`` is
    the option the message suggests lowering, with the largest value that fits the others."""

    names: tuple[str, ...]
    limit: int
    what: str
    lower: str
    factor: int = 1

    def size(self, values: Mapping[str, Any]) -> int | None:
        """The product, or None while a factor is unknown (None: filled in later)."""
        total = self.factor
        for name in self.names:
            value = values.get(name)
            if value is None or isinstance(value, bool) or not isinstance(value, numbers.Integral):
                return None
            total *= int(value)
        return total

    def check(
        self,
        values: Mapping[str, Any],
        spelling: Spelling = CLI,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """:class:`OptionError` when the product of ``values`` passes the limit. ``labels``
        name the factors that are no option here (an image side a checkpoint records)."""
        labels = labels or {}
        total = self.size(values)
        if total is None or total <= self.limit:
            return
        power = self.names.count(self.lower)
        value = int(values[self.lower])
        others = total // value**power
        fits = math.floor((self.limit / others) ** (1 / power)) if others <= self.limit else 0
        while fits > 0 and others * (fits + 1) ** power <= self.limit:  # float root rounding
            fits += 1
        while fits > 0 and others * fits**power > self.limit:
            fits -= 1
        terms = [f"{self.factor}"] if self.factor != 1 else []
        for name in dict.fromkeys(self.names):
            count = self.names.count(name)
            term = labels.get(name) or spelling.given(name, values[name])
            terms.append(term + (f"^{count}" if count > 1 else ""))
        fix = (
            f"lower {spelling.name(self.lower)} to {fits:,} or less"
            if fits >= 1
            else "lower the other factors"
        )
        problem = (
            f"= {total:,} float32 numbers for {self.what} ({_bytes(4 * total)}), more than "
            f"the {_bytes(4 * self.limit)} cl-diag allows; {fix}"
        )
        raise OptionError(spelling.message(f"{' x '.join(terms)} {problem}."), self.lower, problem)


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class OptionTable:
    """The options of one command (or API function) and the products that bound them."""

    name: str
    options: tuple[Option, ...]
    products: tuple[Product, ...] = ()

    def __post_init__(self) -> None:
        names = [o.name for o in self.options]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: an option is declared twice")

    def __getitem__(self, name: str) -> Option:
        for option in self.options:
            if option.name == name:
                return option
        raise KeyError(f"{self.name} has no option {name!r}")

    def __contains__(self, name: object) -> bool:
        return any(o.name == name for o in self.options)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.options)

    def tagged(self, tag: str) -> tuple[str, ...]:
        """The names of the options declared with ``tag``, in declaration order."""
        return tuple(o.name for o in self.options if tag in o.tags)

    @classmethod
    def of(cls, config: type, name: str, products: tuple[Product, ...] = ()) -> OptionTable:
        """The table of a config dataclass whose fields are declared with :func:`option`:
        each field's name, its annotation's type (``int | None``: optional) and its
        declaration; a field declared otherwise is a TypeError (an undeclared option)."""
        hints = typing.get_type_hints(config)
        options = []
        for f in dataclasses.fields(config):
            spec = f.metadata.get(_DECLARATION)
            if spec is None:
                raise TypeError(f"{config.__name__}.{f.name} is not declared with option()")
            kind, optional = _kind(hints[f.name], f"{config.__name__}.{f.name}")
            if spec.get("path"):
                kind = PurePath
            fields = {k: v for k, v in spec.items() if k in _OPTION_FIELDS}
            options.append(Option(f.name, kind, optional, **fields))
        return cls(name, tuple(options), products)

    def only(self, names: Iterable[str], name: str | None = None) -> OptionTable:
        """The table of a subset of these options (and the products among them)."""
        keep = set(names)
        return OptionTable(
            name or self.name,
            tuple(o for o in self.options if o.name in keep),
            tuple(p for p in self.products if set(p.names) <= keep),
        )


_DECLARATION = "cl_diag.option"
#: what a declaration holds that :class:`Option` keeps (the rest shapes the command line)
_OPTION_FIELDS = frozenset(f.name for f in dataclasses.fields(Option))


def _kind(annotation: Any, where: str) -> tuple[type, bool]:
    """An option field's annotation as (its type, whether None is allowed)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = len(args) < len(typing.get_args(annotation))
    kind = args[0] if optional and len(args) == 1 else annotation
    if typing.get_origin(kind) is tuple:
        kind = tuple
    elif isinstance(kind, type) and issubclass(kind, PurePath):
        kind = PurePath
    if kind not in _KIND_WORDS:
        raise TypeError(f"{where}: an option is an int, float, str or bool (or one | None)")
    return kind, optional


def option(
    default: Any,
    panel: str,
    help: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    choices: tuple[str, ...] | None = None,
    hint: str = "",
    max_length: int | None = None,
    path: bool = False,
    flags: tuple[str, ...] = (),
    tags: Iterable[str] = (),
    argument: str | None = None,
    cli: tuple[Any, Any] | None = None,
) -> Any:
    """A config dataclass's field declared as an option, in one place: its default
    (``dataclasses.MISSING``: none, the field is required), the ``--help`` panel and text,
    its bounds and choices (:class:`Option`; its type is the field's annotation, ``path``
    makes a str a path) and its ``tags``. On the command line it is a positional argument
    shown as ``argument`` (its metavar) when that is given, and ``cli`` = ``(type,
    default)`` gives its form there when it differs from the field's (``--layers all`` is
    text the command reads into a tuple). :meth:`OptionTable.of` reads the declarations;
    the command's parameters are made from them (cl_diag.cli.declared)."""
    spec = dict(
        low=low,
        high=high,
        low_open=low_open,
        high_open=high_open,
        choices=choices,
        hint=hint,
        max_length=max_length,
        help=help,
        panel=panel,
        flags=tuple(flags),
        tags=frozenset(tags),
        path=path,
        argument=argument,
        cli=cli,
    )
    return dataclasses.field(default=default, metadata={_DECLARATION: spec})


def declaration(field: dataclasses.Field) -> dict[str, Any]:
    """What :func:`option` declared for a config's field."""
    return field.metadata[_DECLARATION]


def check_values(
    values: Mapping[str, Any],
    table: OptionTable,
    *,
    spelling: Spelling = CLI,
    products: bool = True,
) -> dict[str, Any]:
    """Every value of ``values`` that ``table`` declares, normalised, then (``products``)
    the table's products of them; keys ``table`` does not declare are passed through."""
    out = dict(values)
    for key, value in values.items():
        if key in table:
            out[key] = table[key].normalise(value, spelling)
    if products:
        check_products(out, table, spelling=spelling)
    return out


def check_products(
    values: Mapping[str, Any],
    table: OptionTable,
    *,
    spelling: Spelling = CLI,
    labels: Mapping[str, str] | None = None,
) -> None:
    """Each :class:`Product` of ``table`` over ``values`` (skipped while a factor is None);
    ``labels``: how to name factors that are not options here (:meth:`Product.check`)."""
    for product in table.products:
        product.check(values, spelling, labels)


@dataclass(frozen=True)
class Rule:
    """A relation between options: ``refuse(config)`` is true for a refused combination;
    ``message`` (formatted with the config's fields, ``{views}``) says why and the fix."""

    refuse: Callable[[Any], bool]
    message: str

    def check(self, config: Any) -> None:
        if self.refuse(config):
            fields = config if isinstance(config, Mapping) else vars(config)
            raise UserError(self.message.format_map(fields))


def _opt(name: str, kind: type, **kw: Any) -> Option:
    return Option(name, kind, **kw)


def _maybe(name: str, kind: type, **kw: Any) -> Option:
    return Option(name, kind, optional=True, **kw)


_SEED = _opt("seed", int, low=0, high=MAX_SEED, hint="what numpy and torch generators take")

# --------------------------------------------------------------------------- synth, sweep

#: Most numbers (n x d) of one synthetic view: 2^27 float32, 512 MiB.
MAX_SYNTH_NUMBERS = 1 << 27

SYNTH = OptionTable(
    "synth",
    (
        _opt("n", int, low=2, high=MAX_SYNTH_NUMBERS, hint="instances: rows of each view"),
        _opt("d", int, low=1, high=MAX_SYNTH_NUMBERS),
        _opt("classes", int, low=1, high=MAX_SYNTH_NUMBERS),
        _opt("spread", float, low=0),
        _opt("view_noise", float, low=0),
        _SEED,
    ),
    (Product(("n", "d"), MAX_SYNTH_NUMBERS, "one synthetic view", "n"),),
)

SWEEP = OptionTable(
    "sweep",
    (
        _opt("parallel", int, low=1, high=MAX_WORKERS, hint="cells at once, one GPU each"),
        _maybe("equal_steps", int, low=1, high=MAX_STEPS, hint="optimiser steps of every cell"),
    ),
)

#: ``cl-diag reproduce``'s options; ``--runs`` is further bounded by the original's runs, which
#: only the original knows (cl_diag.orchestration.reproduce checks it against them)
REPRODUCE = OptionTable(
    "reproduce",
    (_maybe("runs", int, low=1, hint="runs to re-run, one of each configuration first"),),
)

#: ``cl_diag.Monitor``'s options (a training loop's monitor, from Python).
MONITOR = OptionTable(
    "Monitor",
    (
        _maybe(
            "n_ref",
            int,
            low=2,
            hint="the number of training instances of the threshold -1/(n_ref - 1)",
        ),
        _opt("log_every", int, low=0, high=MAX_STEPS, hint="steps per row; 0: rows on flush only"),
        _maybe("delta", float, low=-1, high=1, hint="a cosine similarity"),
        _opt("step", int, low=0, high=MAX_STEPS),
    ),
)

#: the arrays of an embeddings file read as its two views when ``--keys`` is not given
DEFAULT_KEYS = ("z1", "z2")
#: the array of an embeddings file read as its class labels (never a view)
LABELS_KEY = "labels"


def split_keys(
    value: Any, spelling: Spelling = CLI, *, labels: str = LABELS_KEY
) -> tuple[str, str] | None:
    """``--keys A,B`` (or ``keys=("A", "B")`` / ``keys="A,B"`` in Python) as the names of the
    two arrays of an embeddings file that are its views, view 1 first; None for None. Two
    different names, neither empty nor the labels' array: else an :class:`OptionError`."""
    if value is None:
        return None
    if isinstance(value, str):
        names = tuple(part.strip() for part in value.split(","))
        shown = value
    elif isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
        names = tuple(v.strip() for v in value)
        shown = ",".join(value)
    else:
        raise OptionError(
            spelling.message(
                f"{spelling.given('keys', value)} must name two arrays, e.g. "
                + (
                    "--keys image_embeds,text_embeds."
                    if spelling.style == "cli"
                    else "keys=('image_embeds', 'text_embeds')."
                )
            ),
            "keys",
        )
    problem = None
    if len(names) != 2 or not all(names):
        problem = f"names {len([n for n in names if n])} array(s); it takes exactly two"
    elif names[0] == names[1]:
        problem = "names one array twice; the two views are two different arrays"
    elif labels in names:
        problem = f"names '{labels}', the class labels' array, as a view"
    if problem is not None:
        example = (
            "--keys image_embeds,text_embeds"
            if spelling.style == "cli"
            else "keys=('image_embeds', 'text_embeds')"
        )
        raise OptionError(
            spelling.message(
                f"{spelling.given('keys', shown)} {problem}: give the two arrays that are the "
                f"views, view 1 first, e.g. {example}."
            ),
            "keys",
        )
    return names[0], names[1]
