"""``train(options) -> TrainResult``: resolve a training config, build data and model, run the loop.

Two config types, one way between them:

* :class:`TrainConfig` has exactly one field per option of ``cl-diag train`` (same names, same
  defaults); ``None``/``"auto"`` mean "the documented default". Its defaults are the embedded
  recipe: digits, SimCLR, the small CNN, CPU, a few minutes on two cores.
* :class:`ResolvedTrainConfig` is what a run actually uses: every option filled in and checked,
  plus the values derived from them (training-set size, VRN delta, peak lr, total and warm-up
  steps, device, autocast precision, workers). It is frozen and built by one function,
  :func:`resolve_config`, which ``train`` and ``sweep`` both call: each option is parsed by
  the CLI (or the sweep's grid) and range-checked here, once.

Where the options come from is one path too: :func:`train_options` turns merged option values
(default < recipe < command line, see :mod:`cl_diag.recipes`) into a ``TrainConfig``, or, with
``--resume``, into the saved run's options with the explicitly given ones applied.

Every user mistake is caught before anything is written: unknown names, hyper-parameters the
loss does not take, batch sizes the data cannot fill, a ``--resume`` whose checkpoint
contradicts the options, an output folder that cannot be written or already holds a run.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cl_diag.errors import UserError
from cl_diag.io.atomic import storage_error
from cl_diag.io.leftovers import log, remove_leftovers, temp_files

if TYPE_CHECKING:  # the loop is imported lazily: resolving a config needs no torch model code
    from cl_diag.training.loop import FitProgress

__all__ = [
    "LOSS_HPARAM_FIELDS",
    "MAX_WORKERS",
    "OPTIMIZERS",
    "RESUME_FREE_FIELDS",
    "SESSION_FIELDS",
    "TRAINING_LOSSES",
    "ResolvedTrainConfig",
    "TrainConfig",
    "TrainResult",
    "check_resume",
    "resolve_config",
    "train",
    "train_options",
]

OPTIMIZERS = ("sgd", "adam", "adamw")
LR_SCALINGS = ("auto", "linear", "none")
SCHEDULES = ("cosine", "constant")
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: most DataLoader worker processes (of train and analyze)
MAX_WORKERS = 64


def default_workers(device_type: str) -> int:
    """DataLoader workers when none are given: up to 8 on CUDA (they feed the GPU), none on a
    CPU (the loading would take the cores the model computes on)."""
    return min(8, os.cpu_count() or 1) if device_type == "cuda" else 0


#: TrainConfig fields that carry loss-library hyper-parameters (None: the loss's default).
LOSS_HPARAM_FIELDS = (
    "temperature",
    "bias",
    "within_view",
    "margin",
    "mining",
    "beta",
    "tau_plus",
    "alpha",
)
#: Fields a resumed run may change: where and how it runs, not what it computes.
RESUME_FREE_FIELDS = frozenset(
    {
        "resume",
        "out",
        "overwrite",
        "quiet",
        "workers",
        "device",
        "precision",
        "compile",
        "data_root",
        "val_root",
        "download",
        "save_every",
        "log_every",
        # how the bits are made, not what is computed: a resumed run may turn it on or off
        "deterministic",
    }
)


#: Options that say how one invocation behaves, not what the run computes: left out of the
#: training command a result records (``commands.train``), so that a run resumed after an
#: interrupt records the command of the same run as one that was not.
SESSION_FIELDS = frozenset({"resume", "overwrite", "quiet"})


#: Every loss of the library except vrn, which is a regulariser (``--vrn``).
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


@dataclass(frozen=True)
class TrainConfig:
    """One field per ``cl-diag train`` option; ``None``/``"auto"`` mean "the documented default"."""

    # data
    dataset: str = "digits"
    data_root: str | None = None
    val_root: str | None = None
    download: bool = False
    num_samples: int | None = None
    dim: int = 3
    num_classes: int | None = None
    image_size: int | None = None
    # model
    arch: str = "auto"
    projector_hidden: int | None = None
    projector_dim: int = 128
    # loss
    loss: str = "simclr"
    temperature: float | None = None
    bias: float | None = None
    within_view: bool | None = None
    margin: float | None = None
    mining: str | None = None
    alpha: float | None = None
    beta: float | None = None
    tau_plus: float | None = None
    views: int = 2
    queue: int = 0
    key_encoder: str = "momentum"
    key_momentum: float = 0.99
    vrn: float = 0.0
    vrn_delta: float | None = None
    vrn_power: float = 2.0
    # optimisation
    epochs: int = 40
    steps: int | None = None
    batch_size: int = 128
    balanced_batch: bool = False
    classes_per_batch: int | None = None
    optimizer: str = "sgd"
    lr: float = 1.0
    lr_scaling: str = "auto"
    momentum: float = 0.9
    weight_decay: float = 1e-4
    warmup_epochs: float = 3.0
    warmup_steps: int | None = None
    schedule: str = "cosine"
    seed: int = 0
    # running
    device: str = "auto"
    precision: str = "auto"
    compile: bool = False
    workers: int | None = None
    sync_bn: bool = False
    deterministic: bool = False
    # records
    out: str | None = None
    save_every: int = 0
    log_every: int = 0
    resume: str | None = None
    overwrite: bool = False
    quiet: bool = False

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in fields(TrainConfig)]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """``{option: default}``: the bottom layer a recipe and the command line go over."""
        return {f.name: f.default for f in fields(TrainConfig)}

    def options(self) -> dict[str, Any]:
        """The option fields only, as a dict (what a checkpoint records as its ``config``)."""
        return {name: getattr(self, name) for name in TrainConfig.option_names()}

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, **overrides: Any) -> TrainConfig:
        """The config to continue the run saved in ``path``, with ``overrides`` applied.

        ``out`` defaults to the checkpoint's folder (not the saved ``out``, which may be
        relative to another working directory); ``workers``, ``quiet`` and ``overwrite``
        to their defaults (they describe the machine and the session, not the run)."""
        from cl_diag.training.checkpoint import load_checkpoint

        saved = load_checkpoint(path, for_resume=True)["config"]
        known = set(TrainConfig.option_names())
        base = {k: v for k, v in saved.items() if k in known}
        _check_saved_types(base, path)
        base.update(out=None, resume=str(path), workers=None, quiet=False, overwrite=False)
        base.update(overrides)
        return TrainConfig(**base)


def _check_saved_types(saved: Mapping[str, Any], path: str | os.PathLike) -> None:
    """UserError naming the first option of a checkpoint's ``config`` whose value is not of
    the option's type (a damaged or crafted file), before any of them is compared or used."""
    from cl_diag.recipes import option_types

    kinds = option_types(TrainConfig)
    for key, value in saved.items():
        kind = kinds[key]
        if value is None:
            ok = TrainConfig.defaults()[key] is None
        elif kind is bool:
            ok = isinstance(value, bool)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            ok = ok and math.isfinite(value)
        else:
            ok = isinstance(value, kind)
        if not ok:
            raise UserError(
                f"{path} is a damaged cl-diag checkpoint: 'config.{key}' is {value!r}, not a "
                f"value of {_opt(key)}. Give the last.pt that cl-diag train wrote (an intact "
                "copy), or train the run again."
            )


@dataclass(frozen=True, kw_only=True)
class ResolvedTrainConfig(TrainConfig):
    """Every option of a run filled in and checked, and every value derived from them.

    The option fields hold what the checkpoint records (``arch``, ``projector_hidden``,
    ``lr_scaling``, ``num_samples``, the loss's hyper-parameters, ``vrn_delta``, ``workers`` and
    ``out`` resolved; ``device`` and ``precision`` as given, so that a resumed run picks its
    machine again). The fields below are derived; build one with :func:`resolve_config`.
    """

    n_train: int  # training instances (after --num-samples)
    world: int  # processes (torchrun's WORLD_SIZE; 1 otherwise)
    device_type: str  # "cpu" or "cuda"
    autocast: str  # "fp32", "bf16" or "fp16": --precision with auto resolved for device_type
    peak_lr: float  # lr after warm-up: --lr, times batch/256 under linear scaling
    steps_per_epoch: int  # full batches per epoch (the last partial batch is dropped)
    total_steps: int  # --steps, or --epochs x steps_per_epoch
    run_epochs: int  # epochs the run spans (the last one may stop early under --steps)
    # the resolved warm-up: --warmup-steps, or --warmup-epochs x steps_per_epoch rounded (the
    # option's field, holding the value the loop uses; the option as given is below)
    warmup_steps: int
    warmup_steps_given: int | None = None  # --warmup-steps as given (None: from the epochs)
    # --balanced-batch: n = batch_size / classes_per_batch instances of each class per batch
    instances_per_class: int | None = None

    def record(self) -> dict[str, Any]:
        """The dict stored as a checkpoint's ``config``: the option fields only, each as
        resolved except ``warmup_steps``, recorded as given (None unless set), so that runs
        warming up over the same epochs at different batch sizes record the same options."""
        return {**self.options(), "warmup_steps": self.warmup_steps_given}


@dataclass
class TrainResult:
    out_dir: Path | None
    checkpoint: Path | None
    metrics_csv: Path | None
    config: dict[str, Any]
    n_train: int
    epochs: int
    steps: int
    steps_this_run: int
    train_seconds: float
    checkpoint_seconds: float
    history: list[dict[str, float]] = field(default_factory=list)
    complete: bool = True

    @property
    def final_loss(self) -> float:
        return self.history[-1]["loss"] if self.history else float("nan")

    @property
    def steps_per_second(self) -> float:
        return self.steps_this_run / self.train_seconds if self.train_seconds else float("nan")

    def summary(self) -> str:
        """What the run did, in the words ``cl-diag train`` prints at its end."""
        if self.steps_this_run == 0:
            where = self.checkpoint or self.config.get("resume")
            return f"{where}: the run is already complete ({self.steps} steps); nothing to do."
        last = self.history[-1]
        return (
            f"trained {self.steps} steps ({self.epochs} epochs) on {self.n_train} "
            f"{self.config['dataset']} instances: "
            f"loss {last['loss']:.4f}, vrn {last['vrn']:.4g}, {last['images_per_s']:.0f} img/s\n"
            f"checkpoint: {self.checkpoint}\nmetrics:    {self.metrics_csv}"
        )


# --------------------------------------------------------------------------- options


def train_options(values: Mapping[str, Any], given: Collection[str]) -> TrainConfig:
    """The options of a run from merged option ``values`` (every option; extra keys ignored).

    Without ``resume``: ``values`` as they are. With ``values["resume"]``: the saved run's
    options, with only the ``given`` ones (set explicitly by the command line, a recipe or a
    sweep cell) applied on top, so that defaults never pass for a change of the run.
    """
    names = TrainConfig.option_names()
    if values.get("resume"):
        overrides = {k: values[k] for k in given if k in names and k != "resume"}
        return TrainConfig.from_checkpoint(values["resume"], **overrides)
    return TrainConfig(**{k: values[k] for k in names if k in values})


# --------------------------------------------------------------------------- checks


def _choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise UserError(
            f"--{name.replace('_', '-')} {value!r} is not one of: {', '.join(map(str, choices))}."
        )


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise UserError(message)


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_options(c: TrainConfig) -> TrainConfig:
    """Check names and ranges and fill the defaults that need no data; raise UserError."""
    from cl_diag.losses import LOSSES, MULTI_VIEW_LOSSES, QUEUE_LOSSES, LossOptionError
    from cl_diag.measurement.pairs import MAX_SEED
    from cl_diag.models import (
        ARCHS,
        default_arch,
        default_projector_hidden,
        get_arch,
        size_problem,
        toy_size_problem,
    )
    from cl_diag.training.data import DATASETS
    from cl_diag.training.queue import KEY_ENCODERS

    _choice("dataset", c.dataset, DATASETS)
    if c.loss == "vrn":
        raise UserError(
            "vrn is a regulariser, not a training loss: use --loss simclr (or another) with "
            "--vrn LAMBDA."
        )
    _choice("loss", c.loss, TRAINING_LOSSES)
    if ":" in str(c.arch):  # a family (timm:NAME): any name the family resolves
        try:
            spec = get_arch(c.arch)
        except ValueError as exc:
            raise UserError(f"--arch {c.arch}: {exc}") from None
        _require(spec.trainable, f"--arch {c.arch} cannot be trained by cl-diag.")
        if spec.input_size is not None:
            # a ViT's position embeddings are laid out for one image side
            _require(
                c.image_size in (None, spec.input_size),
                f"--arch {c.arch} takes {spec.input_size}x{spec.input_size} images (its fixed "
                f"input size); drop --image-size {c.image_size} or give {spec.input_size}.",
            )
            c = replace(c, image_size=spec.input_size)
    else:
        _choice("arch", c.arch, ("auto", *ARCHS))
    for name, choices in (
        ("optimizer", OPTIMIZERS),
        ("lr_scaling", LR_SCALINGS),
        ("schedule", SCHEDULES),
        ("device", DEVICES),
        ("precision", PRECISIONS),
    ):
        _choice(name, getattr(c, name), choices)

    arch = default_arch(c.dataset) if c.arch == "auto" else c.arch
    if c.dataset == "toy" and arch != "embedding":
        raise UserError(
            f"--dataset toy learns free vectors and takes no encoder; drop --arch {arch} "
            "(or use --arch embedding)."
        )
    if c.dataset != "toy" and arch == "embedding":
        raise UserError(
            "--arch embedding is the toy dataset's free vectors; use it only with --dataset toy."
        )

    # Loss hyper-parameters: only those the chosen loss takes, each checked by the library.
    loss = LOSSES[c.loss]
    accepted = loss.hyperparameter_names
    given = {k: getattr(c, k) for k in LOSS_HPARAM_FIELDS if getattr(c, k) is not None}
    stray = [k for k in given if k not in accepted]
    if stray:
        takes = ", ".join(_opt(k) for k in accepted) if accepted else "no hyper-parameters"
        raise UserError(
            f"{', '.join(_opt(k) for k in stray)} "
            f"{'is not a hyper-parameter' if len(stray) == 1 else 'are not hyper-parameters'} "
            f"of the {c.loss} loss (it takes: {takes}); "
            f"drop {'it' if len(stray) == 1 else 'them'} or choose another --loss."
        )
    try:
        resolved_hp = loss.resolve(**given)
    except (
        LossOptionError
    ) as exc:  # e.g. "simclr: temperature must be a finite number > 0, got -1.0"
        raise UserError(f"{exc} (option {_opt(exc.option)}).") from None

    _require(c.views >= 2, f"--views {c.views} must be at least 2 (two views make a positive).")
    if c.views > 2:
        _require(
            c.dataset != "toy",
            f"--views {c.views}: the toy dataset has two free vectors per instance; drop --views.",
        )
        _require(
            loss.multi_view,
            f"--views {c.views}: the {c.loss} loss takes two views; more views work with "
            f"--loss {', '.join(n for n in MULTI_VIEW_LOSSES if n != 'vrn')} (and --vrn).",
        )
    _require(c.queue >= 0, f"--queue {c.queue} must be >= 0 (0: no queue).")
    _choice("key_encoder", c.key_encoder, KEY_ENCODERS)
    _require(
        math.isfinite(c.key_momentum) and 0 <= c.key_momentum < 1,
        f"--key-momentum {c.key_momentum} must lie in [0, 1) (MoCo uses 0.99 or 0.999).",
    )
    if c.queue:
        _require(
            loss.takes_queue,
            f"--queue {c.queue}: the {c.loss} loss has no cross-view negatives a queue could add "
            f"to; use --loss {', '.join(n for n in QUEUE_LOSSES if n != 'vrn')} (or drop --queue).",
        )
        _require(
            c.views == 2,
            f"--queue with --views {c.views}: queue negatives are defined for two views; drop "
            "one of them.",
        )
    _require(
        math.isfinite(c.vrn) and c.vrn >= 0,
        f"--vrn {c.vrn} must be a finite weight >= 0 (0 turns VRN off; the paper uses 30).",
    )
    # >= 1 as the loss library requires (checked here so that a run cannot fail at its first step)
    _require(
        math.isfinite(c.vrn_power) and c.vrn_power >= 1,
        f"--vrn-power {c.vrn_power} must be >= 1 (the paper uses 2).",
    )
    if c.vrn_delta is not None:
        _require(
            -1 <= c.vrn_delta <= 1,
            f"--vrn-delta {c.vrn_delta} must be a cosine similarity in [-1, 1].",
        )
    _require(c.epochs >= 1, f"--epochs {c.epochs} must be at least 1.")
    _require(
        0 <= c.seed <= MAX_SEED,
        f"--seed {c.seed} must be 0 or more and below 2^63 (what numpy and torch generators take).",
    )
    _require(
        c.steps is None or c.steps >= 1,
        f"--steps {c.steps} must be at least 1 (or omit it to train --epochs).",
    )
    _require(
        c.batch_size >= 2, f"--batch-size {c.batch_size} leaves no negative pairs; use at least 2."
    )
    _require(math.isfinite(c.lr) and c.lr > 0, f"--lr {c.lr} must be > 0.")
    _require(0 <= c.momentum < 1, f"--momentum {c.momentum} must be in [0, 1).")
    _require(c.weight_decay >= 0, f"--weight-decay {c.weight_decay} must be >= 0.")
    _require(c.warmup_epochs >= 0, f"--warmup-epochs {c.warmup_epochs} must be >= 0.")
    _require(
        c.warmup_steps is None or c.warmup_steps >= 0,
        f"--warmup-steps {c.warmup_steps} must be >= 0 (or omit it to warm up --warmup-epochs).",
    )
    _require(c.save_every >= 0, f"--save-every {c.save_every} must be >= 0 (0: only last.pt).")
    _require(c.log_every >= 0, f"--log-every {c.log_every} must be >= 0 (0: once per epoch).")
    _require(
        c.workers is None or 0 <= c.workers <= MAX_WORKERS,
        f"--workers {c.workers} must be in [0, {MAX_WORKERS}].",
    )
    for name in ("projector_dim", "projector_hidden", "image_size", "dim"):
        problem = size_problem(name, getattr(c, name))
        _require(problem is None, f"{_opt(name)} {problem}.")
    if c.dataset == "toy":
        problem = toy_size_problem(c.num_samples, c.dim)
        _require(problem is None, f"--num-samples and --dim: {problem}; use fewer or smaller.")
    if c.num_classes is not None:
        _require(
            c.dataset == "toy",
            f"--num-classes applies to --dataset toy only; {c.dataset}'s classes come from its "
            "labels. Drop --num-classes.",
        )
        _require(c.num_classes >= 1, f"--num-classes {c.num_classes} must be >= 1.")
    if c.classes_per_batch is not None:
        _require(
            c.balanced_batch,
            f"--classes-per-batch {c.classes_per_batch} sets the classes of a balanced batch; "
            "add --balanced-batch (or drop --classes-per-batch).",
        )
        _require(
            c.classes_per_batch >= 2,
            f"--classes-per-batch {c.classes_per_batch} must be at least 2 (a batch needs "
            "negatives of another class).",
        )
    if c.num_samples is not None:
        _require(
            c.num_samples >= 2,
            f"--num-samples {c.num_samples} must be at least 2 (a single instance has no "
            "negatives).",
        )
        problem = size_problem("num_samples", c.num_samples)
        _require(problem is None, f"--num-samples {problem}.")
    if c.dataset == "toy":
        _require(
            c.precision in ("auto", "fp32"),
            "--dataset toy trains free vectors in fp32; drop --precision.",
        )

    if c.lr_scaling == "auto":
        # lr = base x batch/256 is the SGD rule of the paper's image recipes; the toy
        # experiment's "lr 0.5" is the step size itself, and Adam is not scaled.
        lr_scaling = "linear" if (c.optimizer == "sgd" and c.dataset != "toy") else "none"
    else:
        lr_scaling = c.lr_scaling
    hidden = None if arch == "embedding" else (c.projector_hidden or default_projector_hidden(arch))
    out = c.out
    if out is None:
        out = str(Path(c.resume).expanduser().parent) if c.resume else _default_out(c)
    num_samples = c.num_samples if (c.num_samples is not None or c.dataset != "toy") else 4
    if c.num_classes is not None and num_samples is not None:  # toy: num_samples is set
        _require(
            c.num_classes <= num_samples,
            f"--num-classes {c.num_classes} exceeds the {num_samples} toy instances "
            "(--num-samples); use at most that many classes.",
        )
    return replace(
        c,
        arch=arch,
        lr_scaling=lr_scaling,
        projector_hidden=hidden,
        out=out,
        num_samples=num_samples,
        **resolved_hp,
    )


def _device_type(device: str) -> str:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(
            "--device cuda was given but torch sees no CUDA device; use --device cpu (or auto)."
        )
    return "cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu"


def resolve_config(
    options: TrainConfig, *, n_train: int | None = None, world: int | None = None
) -> ResolvedTrainConfig:
    """Check every option once and derive every value a run uses; raise UserError on a mistake.

    ``n_train`` is the number of training instances (default: counted from the dataset without
    loading its images, :func:`cl_diag.training.data.train_size`); ``world`` the number of
    processes (default: torchrun's ``WORLD_SIZE``, else 1). Nothing is written.
    """
    import torch

    from cl_diag.measurement.theory import delta
    from cl_diag.training.data import train_size
    from cl_diag.training.loop import amp_dtype

    c = _check_options(options)
    if n_train is None:
        n_train = train_size(c.dataset, num_samples=c.num_samples, data_root=c.data_root)
    if world is None:
        world = int(os.environ.get("WORLD_SIZE", "1"))
    _require(
        c.batch_size <= n_train,
        f"--batch-size {c.batch_size} is larger than the {n_train} training instances of "
        f"{c.dataset}; use at most {n_train}.",
    )
    _require(
        c.batch_size % world == 0,
        f"--batch-size {c.batch_size} (the global batch) must be divisible by the {world} "
        "processes.",
    )
    per_class = None
    if c.balanced_batch:
        c, per_class = _balanced(c)
    device_type = _device_type(c.device)
    if c.sync_bn and world > 1:
        _require(
            device_type == "cuda",
            "--sync-bn needs CUDA (torch's SyncBatchNorm has no CPU kernel); drop it on CPU.",
        )
    workers = c.workers if c.workers is not None else default_workers(device_type)
    dtype = amp_dtype(c.precision, torch.device(device_type))
    autocast = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]

    steps_per_epoch = n_train // c.batch_size
    total_steps = c.steps if c.steps else c.epochs * steps_per_epoch
    assert c.out is not None  # _check_options resolves --out
    return ResolvedTrainConfig(
        **{
            **{k: v for k, v in c.options().items() if k != "warmup_steps"},
            "vrn_delta": c.vrn_delta if c.vrn_delta is not None else delta(n_train),
            "workers": workers,
            "out": str(Path(c.out).expanduser()),
        },
        n_train=n_train,
        world=world,
        device_type=device_type,
        autocast=autocast,
        peak_lr=c.lr * (c.batch_size / 256 if c.lr_scaling == "linear" else 1.0),
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
        run_epochs=math.ceil(total_steps / steps_per_epoch),
        warmup_steps=(
            c.warmup_steps
            if c.warmup_steps is not None
            else round(c.warmup_epochs * steps_per_epoch)
        ),
        warmup_steps_given=c.warmup_steps,
        instances_per_class=per_class,
    )


def _balanced(c: TrainConfig) -> tuple[TrainConfig, int]:
    """``--balanced-batch``: m = ``--classes-per-batch`` (default: every class of the training
    set) classes x n = batch / m instances per batch; UserError when the batch is not m x n
    with n >= 2 or a class has fewer than n instances. Returns the config with m filled in."""
    from cl_diag.training.data import class_counts

    counts = class_counts(
        c.dataset, num_samples=c.num_samples, data_root=c.data_root, num_classes=c.num_classes
    )
    if len(counts) < 2 or max(counts) < 2:
        hint = (
            " (without --num-classes every toy instance is its own class; add --num-classes)"
            if c.dataset == "toy" and c.num_classes is None
            else ""
        )
        raise UserError(
            f"--balanced-batch needs at least 2 classes with 2 or more instances each; the "
            f"{c.dataset} training set has {len(counts)} class(es) of at most {max(counts)} "
            f"instance(s){hint}."
        )
    m = c.classes_per_batch if c.classes_per_batch is not None else len(counts)
    _require(
        m <= len(counts),
        f"--classes-per-batch {m} exceeds the {len(counts)} classes of {c.dataset}; use at most "
        f"{len(counts)}.",
    )
    given = "--classes-per-batch" if c.classes_per_batch is not None else "classes (all of them)"
    _require(
        c.batch_size % m == 0,
        f"--balanced-batch fills every batch with {m} {given} x n instances, but --batch-size "
        f"{c.batch_size} is not divisible by {m}; use a multiple of {m} (e.g. "
        f"{max(2, c.batch_size // m) * m}) or set --classes-per-batch to a divisor of "
        f"{c.batch_size}.",
    )
    n = c.batch_size // m
    _require(
        n >= 2,
        f"--balanced-batch with --batch-size {c.batch_size} and {m} classes per batch leaves "
        f"{n} instance per class: the supervised positives need at least 2. Use --batch-size "
        f"{2 * m} or more, or fewer --classes-per-batch.",
    )
    smallest = min(counts)
    _require(
        smallest >= n,
        f"--balanced-batch takes {n} instances of each class per batch ({c.batch_size} / {m}), "
        f"but the smallest class of {c.dataset} has {smallest}; lower --batch-size or raise "
        "--classes-per-batch.",
    )
    return replace(c, classes_per_batch=m), n


def _default_out(c: TrainConfig) -> str:
    name = f"{c.dataset}-{c.loss}" + (f"-vrn{c.vrn:g}" if c.vrn else "")
    return str(Path("runs") / name)


def check_resume(c: ResolvedTrainConfig) -> dict[str, Any] | None:
    """With ``--resume``: the checkpoint, once its config agrees with ``c``; else None."""
    from cl_diag.training.checkpoint import load_checkpoint

    if not c.resume:
        return None
    checkpoint = load_checkpoint(c.resume, for_resume=True)
    saved = checkpoint["config"]
    _check_saved_types(
        {k: v for k, v in saved.items() if k in TrainConfig.option_names()}, c.resume
    )
    diffs = []
    recorded = c.record()  # compared as the checkpoint records them
    for f in fields(TrainConfig):
        if f.name in RESUME_FREE_FIELDS or f.name not in saved:
            continue
        mine, theirs = recorded[f.name], saved[f.name]
        if mine != theirs:
            diffs.append(f"{_opt(f.name)} {mine!r} (the checkpoint has {theirs!r})")
    if diffs:
        raise UserError(
            f"--resume {c.resume} continues a run, but these options contradict its config: "
            f"{'; '.join(diffs)}. Drop them to continue that run, or start a new run with another "
            "--out."
        )
    return checkpoint


#: the files a run writes in its folder (besides the atomic writer's temporary files)
_EPOCH_FILE = re.compile(r"^epoch_\d{4,}\.pt$")
_RUN_TEMP_FILES = temp_files(r"last\.pt|metrics\.csv|epoch_\d{4,}\.pt")


def _prepare_out(out: Path, *, resume_dir: Path | None, overwrite: bool) -> list[Path]:
    """Check that ``out`` may take this run and create it; return the folders created (deepest
    first), so that a run that fails before writing anything can remove them again."""
    last = out / "last.pt"
    if (
        last.exists()
        and not overwrite
        and (resume_dir is None or resume_dir.resolve() != out.resolve())
    ):
        raise UserError(
            f"{out} already holds a run ({last}); continue it with --resume {last}, choose another "
            f"--out, or pass --overwrite to replace it."
        )
    created = []
    missing = out
    while not missing.exists() and missing != missing.parent:
        created.append(missing)
        missing = missing.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        full = storage_error(exc, out)
        if full is not None:
            raise full from None
        raise UserError(
            f"cannot write to --out {out} ({exc.strerror or exc}); choose a folder you can write "
            "to."
        ) from None
    return created


def _clean_run_folder(out: Path, *, replacing: bool) -> None:
    """Remove what earlier runs in ``out`` left that this run would otherwise sit beside: the
    temporary files of a writer that was killed, and under ``--overwrite`` the replaced run's
    ``epoch_NNNN.pt`` snapshots (its last.pt and metrics.csv are replaced at the first epoch
    end). Every removal is announced (see cl_diag.io.leftovers)."""
    remove_leftovers(out, _RUN_TEMP_FILES, what="temporary file")
    if not replacing or not (out / "last.pt").exists():
        return
    removed = []
    for path in sorted(out.iterdir()):
        if _EPOCH_FILE.match(path.name) and path.is_file() and not path.is_symlink():
            try:
                path.unlink()
            except OSError:
                continue
            removed.append(path.name)
    if removed:
        shown = removed[0] if len(removed) == 1 else f"{removed[0]} ... {removed[-1]}"
        log.warning(
            "removed %d epoch checkpoint(s) of the run --overwrite replaces from %s: %s",
            len(removed),
            out,
            shown,
        )


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:  # deepest first; a folder that holds anything stays
        try:
            folder.rmdir()
        except OSError:
            return


# --------------------------------------------------------------------------- train


def train(options: TrainConfig, *, progress: FitProgress | None = None) -> TrainResult:
    """Train as ``options`` say; see the module docstring and ``cl-diag train --help``.

    ``progress`` receives the loop's progress on the main process (the CLI passes a bar or
    plain lines); None shows nothing.
    """
    from cl_diag.models import build_model
    from cl_diag.training.data import training_data
    from cl_diag.training.loop import close_distributed, distributed_env, fit

    c = resolve_config(options)
    checkpoint = check_resume(c)
    data = training_data(
        c.dataset,
        seed=c.seed,
        data_root=c.data_root,
        val_root=c.val_root,
        download=c.download,
        num_samples=c.num_samples,
        image_size=c.image_size,
        num_classes=c.num_classes,
        views=c.views,
    )
    if data.n_train != c.n_train:  # train_size and training_data disagree: a bug, not a user error
        raise RuntimeError(f"{c.dataset}: {data.n_train} instances loaded, {c.n_train} counted")

    env = distributed_env(c.device_type)
    assert c.out is not None  # resolve_config resolved --out
    out = Path(c.out)
    created: list[Path] = []
    try:
        if env.is_main:
            created = _prepare_out(
                out,
                resume_dir=Path(c.resume).expanduser().parent if c.resume else None,
                overwrite=c.overwrite,
            )
            _clean_run_folder(out, replacing=c.overwrite and not c.resume)
        model = build_model(c, seed=c.seed)
        shown = progress if env.is_main else None
        result = fit(c, model, data, out, env=env, resume=checkpoint, progress=shown)
    finally:
        # a run stopped before its first epoch end leaves no empty folder behind
        _remove_empty(created)
        close_distributed(env)
    return TrainResult(
        out_dir=out if env.is_main else None,
        checkpoint=result.checkpoint,
        metrics_csv=(out / "metrics.csv") if env.is_main else None,
        config=c.record(),
        n_train=data.n_train,
        epochs=result.epochs,
        steps=result.steps,
        steps_this_run=result.steps_this_run,
        train_seconds=result.train_seconds,
        checkpoint_seconds=result.checkpoint_seconds,
        history=result.history,
        complete=result.complete,
    )
