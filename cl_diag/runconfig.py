"""What a run was trained with, typed and parsed once: :class:`RunConfig`.

A checkpoint records its training config as a JSON object (``cl-diag train``'s options;
solo-learn's and DINO's arguments translated into the same vocabulary), and result.json keeps
it as it was. Every reader -- the theory panel, the reports and their findings, ``compare`` --
takes the :class:`RunConfig` :func:`parse_run_config` makes of it, so each key has one meaning:

* ``loss``: the loss's name (``loss``, or ``loss.name`` nested);
* ``vrn`` (:class:`Vrn`, Def. 5.7): a number is the weight λ (0 = off); a nested
  ``{"enabled": ..., "lambda": ...}`` is off when not enabled, else its ``lambda``; ``true``
  without a weight is *on, weight not recorded*, never a weight a reader made up;
* ``vrn_tuning`` (or ``vrn.tuning``, :class:`VrnTuning`): how λ was chosen,
  ``{"grid": [...], "selected": 3, "split": "validation", "criterion": "linear top-1"}``;
  ``cl-diag train`` writes it flat (:data:`TRAIN_TUNING_KEYS`), read here nested;
* ``batch_size``: the global training batch m;
* the loss's hyper-parameters (``temperature``, ``bias``, ``alpha``, ...) as recorded.

:attr:`RunConfig.options` is the config flattened to dotted keys under these names, without
``out``: what run labels, replicate groups and option studies compare.

Example::

    >>> cfg = parse_run_config({"loss": "simclr", "batch_size": 64, "vrn": {"enabled": True}})
    >>> cfg.loss, cfg.batch_size, cfg.vrn.on, cfg.vrn.weight
    ('simclr', 64, True, None)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cl_diag.result import Result

__all__ = [
    "IGNORED_OPTIONS",
    "OPTION_ALIASES",
    "TRAIN_TUNING_KEYS",
    "RunConfig",
    "Vrn",
    "VrnTuning",
    "flatten",
    "lambda_grid_text",
    "parse_lambda_grid",
    "parse_run_config",
]

#: recorded keys that say where a run was written, not what it trained (analyze already drops
#: the other run-environment options, orchestration.train.RESUME_FREE_FIELDS, from the configs
#: it records)
IGNORED_OPTIONS = frozenset({"out"})

#: canonical option -> the flattened keys that spell it, first match wins: the names cl-diag
#: writes (TrainConfig, and models.foreign.solo_training_config for solo-learn) and the nested
#: spellings ``loss.name`` and ``vrn.lambda`` (``vrn.enabled`` is read with the latter)
OPTION_ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "loss": ("loss", "loss.name"),
        "batch_size": ("batch_size",),
        "temperature": ("temperature",),
        "vrn": ("vrn", "vrn.lambda"),
        "seed": ("seed",),
    }
)

#: the flattened key of VRN's power p in (s - δ)^p, by writer: cl-diag, solo-learn's fork
_VRN_POWER_KEYS = ("vrn_power", "vrn_p")


def flatten(mapping: object, prefix: str = "") -> dict[str, object]:
    """Nested dicts to dotted keys, in insertion order (a recorded config, a settings block);
    an empty dict stays one value."""
    out: dict[str, object] = {}
    if not isinstance(mapping, dict):
        return {prefix: mapping} if prefix else {}
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten(value, name))
        else:
            out[name] = value
    return out


#: the λ grid of the authors' rebuttal (Lee et al., ICML 2025, OpenReview): what "tuned" refers to
REBUTTAL_LAMBDA_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
#: the fewest λ values a tuning must have tried for its choice to count as tuned
MIN_TUNING_GRID = 3
#: the split a λ may never be chosen on: the one its accuracy claim is tested on
TEST_SPLIT = "test"
#: ``cl-diag train``'s options that record a tuning (flat) -> the field of ``vrn_tuning`` each
#: one is; the selected λ is the run's own ``vrn``
TRAIN_TUNING_KEYS: Mapping[str, str] = MappingProxyType(
    {"vrn_tuning_grid": "grid", "vrn_tuning_split": "split", "vrn_tuning_criterion": "criterion"}
)


def parse_lambda_grid(text: str) -> tuple[float, ...]:
    """A λ grid written as text, ``"0.1,0.3,1"``, as its numbers in the order given;
    ValueError naming the first entry that is not a finite number ≥ 0, or a repeat."""
    values: list[float] = []
    for part in text.split(","):
        word = part.strip()
        try:
            value = float(word)
        except ValueError:
            raise ValueError(f"{word!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{word!r} is not a finite number ≥ 0")
        if value in values:
            raise ValueError(f"{word!r} is given twice")
        values.append(value)
    return tuple(values)


def lambda_grid_text(values: Iterable[float]) -> str:
    """The text of a λ grid as ``cl-diag train --vrn-tuning-grid`` records it: the values
    in the order given, each in Python's shortest form (``1`` for 1.0)."""
    return ",".join(f"{v:g}" if float(v).is_integer() else repr(float(v)) for v in values)


@dataclass(frozen=True)
class VrnTuning:
    """How a run's VRN weight λ was chosen (issue 21): the ``grid`` of λ values tried, the
    ``selected`` one, the ``split`` it was chosen on (a validation split carved from the
    training set; never the test split its accuracy is reported on) and the ``criterion``
    (e.g. "linear top-1"). Recorded in the training config as ``vrn_tuning`` (or nested as
    ``vrn.tuning``); a field is None (grid empty) when not recorded.

    A run counts as *tuned* (:meth:`tuned_for`) when the record chose this run's λ, on a
    split other than the test split, from at least :data:`MIN_TUNING_GRID` values: the
    rebuttal's protocol, whose grid is :data:`REBUTTAL_LAMBDA_GRID`."""

    grid: tuple[float, ...] = ()
    selected: float | None = None
    split: str | None = None
    criterion: str | None = None

    def tuned_for(self, weight: float | None) -> str | None:
        """None when this record makes λ = ``weight`` a tuned choice, else why not."""
        if weight is None:
            return "λ is not recorded"
        if len(set(self.grid)) < MIN_TUNING_GRID:
            return f"the tuning record tried {len(set(self.grid))} λ values (fewer than 3)"
        if self.selected is None or not math.isclose(self.selected, weight, rel_tol=1e-9):
            return f"the tuning record selected λ = {self.selected}, not this run's λ = {weight:g}"
        if self.split is None:
            return "the tuning record does not say on which split λ was chosen"
        if self.split.strip().lower() == TEST_SPLIT:
            return "λ was chosen on the test split"
        return None


@dataclass(frozen=True)
class Vrn:
    """The VRN regulariser of a run (Lee et al., ICML 2025, Def. 5.7):
    λ · mean over cross-view negatives of (s − δ)^p added to the loss.

    ``weight`` is λ: 0 when VRN is off (or the config does not mention it), None when the
    config says VRN is on but records no weight. ``power`` is p and ``delta`` δ, as recorded
    (None when not)."""

    weight: float | None = 0.0
    power: float | None = None
    delta: float | None = None
    #: how λ was chosen (None: the config records no tuning)
    tuning: VrnTuning | None = None

    @property
    def untuned_reason(self) -> str | None:
        """None when λ was tuned (:meth:`VrnTuning.tuned_for`), else why it does not count as
        tuned."""
        if not self.on:
            return "VRN is off"
        if self.tuning is None:
            return "the config records no tuning of λ (a fixed λ)"
        return self.tuning.tuned_for(self.weight)

    @property
    def on(self) -> bool:
        return self.weight is None or self.weight > 0


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """A run's training config, typed (see the module docstring for each key's meaning).

    A field is None when the config does not record it (or records a value of another type,
    e.g. a damaged or foreign file); ``n_train`` is the number of training instances, which
    the checkpoint records beside its config (``source.n_train`` of a result)."""

    loss: str | None = None
    # the loss's hyper-parameters (cl_diag.losses: each loss's ``hyperparameter_names``)
    temperature: float | None = None
    bias: float | None = None
    alpha: float | None = None
    beta: float | None = None
    tau_plus: float | None = None
    margin: float | None = None
    mining: str | None = None
    within_view: bool | None = None
    batch_size: int | None = None
    vrn: Vrn = field(default_factory=Vrn)
    seed: int | None = None
    #: --balanced-batch: every batch holds ``classes_per_batch`` classes x batch / m instances
    balanced_batch: bool = False
    classes_per_batch: int | None = None
    views: int | None = None
    queue: int | None = None
    image_size: int | None = None
    dataset: str | None = None
    #: --num-classes: the classes a toy run gave its instances (None: each its own class)
    num_classes: int | None = None
    n_train: int | None = None
    #: every recorded option, flattened, under the canonical names (module docstring)
    options: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    #: the fields that hold a loss hyper-parameter
    HYPERPARAMETERS = (
        "temperature",
        "bias",
        "alpha",
        "beta",
        "tau_plus",
        "margin",
        "mining",
        "within_view",
    )

    @classmethod
    def of(cls, result: Result) -> RunConfig:
        """The run config of an analysed run: its recorded ``config`` ({} for an embeddings
        file), the batch size of its theory panel when the config lacks one, and the
        ``n_train`` its checkpoint recorded."""
        theory = result.theory
        return parse_run_config(
            result.config,
            n_train=result.source.n_train,
            batch_size=theory.batch_size if theory is not None else None,
        )

    @property
    def recorded(self) -> bool:
        """Whether the run recorded a training config at all (an embeddings file does not)."""
        return bool(self.options)

    def option(self, name: str) -> object:
        """The value of the flattened option ``name`` (canonical spelling), None when absent:
        for code that compares runs option by option (labels, replicate groups, studies)."""
        return self.options.get(name)

    def hyperparameters(self, names: Iterable[str]) -> dict[str, Any]:
        """The recorded values of the loss hyper-parameters ``names`` (a loss's
        ``hyperparameter_names``), leaving out those the config does not give."""
        out = {}
        for name in names:
            value = getattr(self, name, None) if name in self.HYPERPARAMETERS else None
            if value is not None:
                out[name] = value
        return out

    def without(self, names: Iterable[str]) -> tuple[tuple[str, str], ...]:
        """The options but ``names`` (and their sub-options, ``name.*``) as sorted
        (name, repr(value)) pairs: equal for two runs exactly when their configs agree on
        every other option."""
        skip = set(names)
        prefixes = tuple(f"{name}." for name in skip)
        return tuple(
            sorted(
                (k, repr(v))
                for k, v in self.options.items()
                if k not in skip and not k.startswith(prefixes)
            )
        )


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    """A finite or infinite int/float as recorded (an int stays an int), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _vrn_option(options: dict[str, object]) -> object:
    """The value the option ``vrn`` takes (``vrn.enabled`` read and removed from the canonical
    ``options``): a number as recorded, 0.0 when disabled, True when on without a weight."""
    value = options.get("vrn")
    if "vrn.enabled" in options:
        enabled = options.pop("vrn.enabled")
        if enabled is False or ("vrn" not in options and not enabled):
            value = 0.0
        elif "vrn" not in options:
            value = True  # on, no weight recorded
    if value is False:
        value = 0.0
    return value


def _vrn(options: Mapping[str, object]) -> Vrn:
    """The VRN of the canonical ``options``: λ from the option ``vrn`` (True: on, weight not
    recorded; not a number: off), p and δ as recorded."""
    value = options.get("vrn")
    number = _number(value)
    weight: float | None
    if value is True:
        weight = None
    elif number is None or math.isnan(number):
        weight = 0.0  # not recorded, or not a number: no VRN a reader could act on
    else:
        weight = float(number)
    power = next((options[k] for k in _VRN_POWER_KEYS if k in options), None)
    return Vrn(
        weight=weight,
        power=_number(power),
        delta=_number(options.get("vrn_delta")),
        tuning=_vrn_tuning(options),
    )


#: the flattened prefixes of the VRN tuning record, by spelling (top level, nested in vrn)
_VRN_TUNING_PREFIXES = ("vrn_tuning.", "vrn.tuning.")


def _vrn_tuning(options: Mapping[str, object]) -> VrnTuning | None:
    """The tuning record of the canonical ``options`` (None when there is none); values of the
    wrong type read as not recorded."""
    for prefix in _VRN_TUNING_PREFIXES:
        keys = {k[len(prefix) :]: v for k, v in options.items() if k.startswith(prefix)}
        if not keys:
            continue
        grid = keys.get("grid")
        values = (
            tuple(float(g) for g in grid if _number(g) is not None)
            if isinstance(grid, (list, tuple))
            else ()
        )
        selected = _number(keys.get("selected"))
        return VrnTuning(
            grid=values,
            selected=None if selected is None else float(selected),
            split=_text(keys.get("split")),
            criterion=_text(keys.get("criterion")),
        )
    return None


def _nest_train_tuning(flat: dict[str, object], vrn_value: object) -> None:
    """``cl-diag train``'s flat tuning options in ``flat`` (:data:`TRAIN_TUNING_KEYS`) moved to
    the nested names ``vrn_tuning.*``, with the run's λ as ``selected`` (when a grid was
    recorded; an unset option, None, records nothing). A grid text that does not parse is
    kept as text: it reads as no grid."""
    given = {k: flat.pop(k) for k in TRAIN_TUNING_KEYS if k in flat}
    if given.get("vrn_tuning_grid") is None:
        return
    grid: object = given["vrn_tuning_grid"]
    if isinstance(grid, str):
        with contextlib.suppress(ValueError):  # not a grid: kept as text, read as no grid
            grid = list(parse_lambda_grid(grid))
    flat["vrn_tuning.grid"] = grid
    flat["vrn_tuning.selected"] = vrn_value
    for key, name in TRAIN_TUNING_KEYS.items():
        if name != "grid" and given.get(key) is not None:
            flat[f"vrn_tuning.{name}"] = given[key]


def parse_run_config(
    record: Mapping[str, Any] | None,
    *,
    n_train: int | None = None,
    batch_size: int | None = None,
) -> RunConfig:
    """The one parse of a recorded training config (``None`` or ``{}``: nothing recorded).

    ``batch_size`` is used when the config records none (a result's theory panel keeps the
    batch size of a config that was given to it apart); ``n_train`` is the training-set size
    recorded beside the config."""
    flat = {k: v for k, v in flatten(dict(record or {})).items() if k not in IGNORED_OPTIONS}
    canonical: dict[str, object] = {}
    for name, aliases in OPTION_ALIASES.items():
        for alias in aliases:
            if alias in flat:
                canonical[name] = flat.pop(alias)
                break
    if "vrn.enabled" in flat:
        canonical["vrn.enabled"] = flat.pop("vrn.enabled")
    vrn_value = _vrn_option(canonical)
    if "vrn" in canonical or vrn_value is not None:
        canonical["vrn"] = vrn_value
    _nest_train_tuning(flat, vrn_value)
    if canonical.get("batch_size") is None and batch_size is not None:
        canonical["batch_size"] = batch_size
    options = {**canonical, **{k: flat[k] for k in sorted(flat)}}
    vrn = _vrn(options)

    def get(name: str) -> object:
        return options.get(name)

    return RunConfig(
        loss=_text(get("loss")),
        temperature=_number(get("temperature")),
        bias=_number(get("bias")),
        alpha=_number(get("alpha")),
        beta=_number(get("beta")),
        tau_plus=_number(get("tau_plus")),
        margin=_number(get("margin")),
        mining=_text(get("mining")),
        within_view=_flag(get("within_view")),
        batch_size=_integer(get("batch_size")),
        vrn=vrn,
        seed=_integer(get("seed")),
        balanced_batch=get("balanced_batch") is True,
        classes_per_batch=_integer(get("classes_per_batch")),
        views=_integer(get("views")),
        queue=_integer(get("queue")),
        image_size=_integer(get("image_size")),
        dataset=_text(get("dataset")),
        num_classes=_integer(get("num_classes")),
        n_train=_integer(n_train),
        options=MappingProxyType(options),
    )
