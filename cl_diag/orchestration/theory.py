"""``cl-diag theory``: the sources' predictions and advice for a setting, before any training
(:mod:`cl_diag.measurement.advice`), and its phase diagrams (:mod:`cl_diag.report.phase`).

The setting comes from options, or from a file that records one, the options given going over
it: a result.json (or the analysis folder holding it: its config, n_ref and the loss layer's
d), a cl-diag checkpoint (its config and n_train) or a training recipe (over ``cl-diag train``'s
defaults; n is the data set's training split). :func:`train_advice_line` is the one line
``cl-diag train`` prints at its start.

One concept at three layers: the command line in :mod:`cl_diag.cli.theory`, this module, and
the closed forms in :mod:`cl_diag.measurement.theory` (through :mod:`cl_diag.measurement.advice`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cl_diag.errors import UserError
from cl_diag.measurement.advice import Sizes, TheoryAdvice, advise
from cl_diag.orchestration.theory_config import TheoryConfig
from cl_diag.runconfig import RunConfig, parse_run_config

__all__ = ["TheoryOutcome", "theory", "train_advice_line"]


@dataclass
class TheoryOutcome:
    """The advice and the files written (the phase diagrams, SVG and PNG)."""

    advice: TheoryAdvice
    files: list[Path] = field(default_factory=list)

    def to_json(self) -> str:
        from cl_diag.io.output import dumps_json

        data = self.advice.to_dict()
        data["files"] = [str(p) for p in self.files]
        return dumps_json(data).rstrip("\n")  # an infinite Eq. 10 left side is null


#: the loss's hyper-parameters a setting holds (a run's config and TheoryConfig name them alike)
_HYPERPARAMETERS = ("temperature", "bias", "alpha", "within_view")


@dataclass
class _Setting:
    loss: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    sizes: Sizes = field(default_factory=Sizes)
    vrn: float = 0.0


def _from_config(config: RunConfig, n: int | None, d: int | None) -> _Setting:
    settings = {
        key: getattr(config, key) for key in _HYPERPARAMETERS if getattr(config, key) is not None
    }
    m = config.batch_size
    classes = per_class = None
    if (
        config.balanced_batch
        and config.classes_per_batch
        and m
        and m % config.classes_per_batch == 0
    ):
        classes, per_class = config.classes_per_batch, m // config.classes_per_batch
    weight = config.vrn.weight if config.vrn.on and config.vrn.weight is not None else 0.0
    return _Setting(
        loss=config.loss,
        settings=settings,
        sizes=Sizes(n=n, m=m, d=d, classes=classes, per_class=per_class),
        vrn=float(weight),
    )


def _from_result(path: Path) -> _Setting:
    from cl_diag.result import load

    result = load(path)
    if not result.config:
        raise UserError(
            f"{path} is the analysis of an embeddings file: it records no training config. "
            "Give the loss and sizes as options (cl-diag theory --loss ... --n ...)."
        )
    layer = next((k for k in ("projector", "embedding") if k in result.layers), None)
    d = result.layers[layer].d if layer is not None else None
    return _from_config(RunConfig.of(result), result.n_ref, d)


def _from_checkpoint(path: Path) -> _Setting:
    from cl_diag.models.checkpoints import read_checkpoint_file

    file = read_checkpoint_file(path)
    payload = file.payload if isinstance(file.payload, dict) else {}
    config = payload.get("config") if file.kind == "cl-diag" else None
    if not isinstance(config, dict):
        raise UserError(
            f"{path} is a {file.kind} file, which records no cl-diag training config. Give the "
            "loss and sizes as options (cl-diag theory --loss ... --n ... --batch-size ...)."
        )
    n = payload.get("n_train")
    return _from_config(
        parse_run_config(config, n_train=n), n if isinstance(n, int) else None, _dim(config)
    )


def _dim(config: Mapping[str, Any]) -> int | None:
    """The dimension the loss sees: the projector's output, or a toy run's free vectors'."""
    key = "dim" if config.get("dataset") == "toy" else "projector_dim"
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _from_recipe(value: str) -> _Setting:
    from cl_diag.recipes import read_recipe
    from cl_diag.trainconfig import TrainConfig
    from cl_diag.training.data import train_size

    # read and checked as `cl-diag train` reads it (its keys, types, bundled names)
    options = {**TrainConfig.defaults(), **read_recipe(value, TrainConfig)}
    n = None
    if options.get("dataset") in ("digits", "cifar10", "cifar100", "toy"):
        n = train_size(str(options["dataset"]), num_samples=options.get("num_samples"))
    return _from_config(parse_run_config(options, n_train=n), n, _dim(options))


def _read_source(source: str) -> _Setting:
    path = Path(source)
    if path.is_dir() or path.suffix.lower() == ".json":
        return _from_result(path)
    if path.suffix.lower() in (".pt", ".pth", ".ckpt"):
        return _from_checkpoint(path)
    return _from_recipe(source)


def _setting(config: TheoryConfig) -> _Setting:
    found = _read_source(config.source) if config.source is not None else _Setting()
    loss = config.loss or found.loss
    if loss is None:
        raise UserError(
            "No loss: give --loss NAME (e.g. --loss supcl) or a result.json, checkpoint or "
            "recipe that records one."
        )
    settings = dict(found.settings) if loss == found.loss else {}
    for key in _HYPERPARAMETERS:
        if getattr(config, key) is not None:
            settings[key] = getattr(config, key)
    given = {
        "n": config.n,
        "m": config.batch_size,
        "d": config.d,
        "classes": config.classes,
        "per_class": config.per_class,
        "views": config.views,
    }
    sizes = replace(found.sizes, **{k: v for k, v in given.items() if v is not None})
    vrn = config.vrn if config.vrn is not None else found.vrn
    return _Setting(loss=loss, settings=settings, sizes=sizes, vrn=vrn)


def _diagrams(advice: TheoryAdvice, out: Path) -> list[Path]:
    """The phase diagrams that apply to ``advice``'s setting, SVG and PNG, into ``out``."""
    from cl_diag.io.atomic import atomic_write_bytes
    from cl_diag.report import phase

    s, hp = advice.sizes, advice.settings
    made: list[tuple[str, Any]] = []
    if advice.loss == "supcl" and s.classes and s.per_class:
        made.append(
            (
                "phase_supcl",
                lambda fmt: phase.ssem_phase(
                    float(hp["temperature"]),
                    float(hp["alpha"]),
                    s.classes,
                    s.per_class,
                    s.views,
                    fmt=fmt,
                ),
            )
        )
    pairs = s.m or s.n
    if advice.loss == "sigmoid" and pairs and pairs >= 3:
        made.append(
            (
                "phase_sigmoid",
                lambda fmt: phase.sigmoid_phase(
                    float(hp["temperature"]), float(hp["bias"]), pairs, fmt=fmt
                ),
            )
        )
    if s.n and s.m and 2 <= s.m < s.n and advice.loss in ("infonce", "simclr", "dcl", "dhel"):
        made.append(("band_batch_size", lambda fmt: phase.band_phase(s.n, s.m, fmt=fmt)))
    if not made:
        return []
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in made:
        for fmt in ("svg", "png"):
            path = out / f"{name}.{fmt}"
            atomic_write_bytes(path, draw(fmt))
            written.append(path)
    return written


def theory(config: TheoryConfig) -> TheoryOutcome:
    """The advice for ``config``'s setting and, with ``out``, its phase diagrams written.
    A mistake (no loss, an unknown one, an impossible size, tau <= 0) is a UserError."""
    if config.out is not None and config.out.exists() and not config.out.is_dir():
        raise UserError(f"--out {config.out} is a file; give a folder for the phase diagrams.")
    setting = _setting(config)
    assert setting.loss is not None
    try:
        advice = advise(setting.loss, setting.settings, setting.sizes, vrn=setting.vrn)
    except ValueError as exc:
        raise UserError(f"{exc}. Fix the option and run cl-diag theory again.") from None
    files = _diagrams(advice, config.out) if config.out is not None else []
    return TheoryOutcome(advice=advice, files=files)


def train_advice_line(options: Mapping[str, Any], n_train: int) -> str | None:
    """The first advice line of the sources for a run about to train with ``options`` (a
    :class:`~cl_diag.trainconfig.TrainConfig`'s), with its source: what ``cl-diag train``
    prints at its start; None where no source gives advice."""
    setting = _from_config(parse_run_config(dict(options), n_train=n_train), n_train, _dim(options))
    if setting.loss is None:
        return None
    try:
        advice = advise(setting.loss, setting.settings, setting.sizes, vrn=setting.vrn)
    except ValueError:
        return None  # the training's own checks speak to it
    for item in advice.items:
        if item.advice:
            return f"theory ({item.source}): {item.advice}"
    return None
