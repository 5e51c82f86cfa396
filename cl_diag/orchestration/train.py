"""``train(options) -> TrainResult``: resolve a training config, build data and model, run the
loop (:mod:`cl_diag.cli.train` is its command line).

:func:`train_options` turns merged option values (default < recipe < command line; with
``--resume``, the saved run's options with those given applied) into a :class:`TrainConfig`,
and :func:`resolve_config`, which ``train`` and ``sweep`` both call, into the
:class:`ResolvedTrainConfig` a run uses. Every user mistake is caught before anything is
written: unknown names, hyper-parameters the loss does not take, batch sizes the data cannot
fill, a ``--resume`` that contradicts the options, an output folder that cannot be written or
already holds a run.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cl_diag.errors import UserError
from cl_diag.io.atomic import storage_error
from cl_diag.io.leftovers import log, remove_leftovers, temp_files
from cl_diag.io.loggers import RowLogger, open_logger, require_logger
from cl_diag.options import (
    CLI,
    MULTI_VIEW_LOSSES,
    QUEUE_LOSSES,
    Rule,
    Spelling,
    check_products,
    check_values,
    in_config,
)
from cl_diag.runconfig import TEST_SPLIT, lambda_grid_text, parse_lambda_grid
from cl_diag.trainconfig import (
    LOSS_HPARAM_FIELDS,
    RESUME_FREE_FIELDS,
    TRAIN,
    ResolvedTrainConfig,
    TrainConfig,
)

if TYPE_CHECKING:  # the loop is imported lazily: resolving a config needs no torch model code
    from cl_diag.training.loop import FitProgress

__all__ = [
    "TRAIN_RULES",
    "ResolvedTrainConfig",
    "TrainConfig",
    "TrainResult",
    "check_resume",
    "check_train_options",
    "config_from_checkpoint",
    "resolve_config",
    "train",
    "train_options",
]


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
    #: the training-curve figure of metrics.csv (None: not written, e.g. not the main process)
    curves: Path | None = None

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
            + (f"\ncurves:     {self.curves}" if self.curves is not None else "")
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
        return config_from_checkpoint(values["resume"], **overrides)
    return TrainConfig(**{k: values[k] for k in names if k in values})


def config_from_checkpoint(path: str | os.PathLike, **overrides: Any) -> TrainConfig:
    """The config to continue the run saved in ``path``, with ``overrides`` applied.

    ``out`` defaults to the checkpoint's folder (not the saved ``out``, which may be
    relative to another working directory); ``workers``, ``quiet`` and ``overwrite``
    to their defaults (they describe the machine and the session, not the run)."""
    from cl_diag.training.checkpoint import load_checkpoint

    saved = load_checkpoint(path, for_resume=True)["config"]
    known = set(TrainConfig.option_names())
    base = _check_saved_types({k: v for k, v in saved.items() if k in known}, path)
    base.update(out=None, resume=str(path), workers=None, quiet=False, overwrite=False)
    base.update(overrides)
    return TrainConfig(**base)


def _check_saved_types(saved: Mapping[str, Any], path: str | os.PathLike) -> dict[str, Any]:
    """A checkpoint's stored options checked against their declarations (:data:`TRAIN`),
    normalised; UserError naming the first one at fault (a damaged or crafted file) before
    any of them is compared or used."""
    return check_values(saved, TRAIN, spelling=in_config(path), products=False)


# --------------------------------------------------------------------------- checks


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise UserError(message)


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def _loss_names(names: tuple[str, ...]) -> str:
    return ", ".join(n for n in names if n != "vrn")


#: The relations of --arch (a name the registry knows, checked first) with --dataset.
ARCH_RULES: tuple[Rule, ...] = (
    Rule(
        lambda c: c.dataset == "toy" and c.arch not in ("auto", "embedding"),
        "--dataset toy learns free vectors and takes no encoder; drop --arch {arch} "
        "(or use --arch embedding).",
    ),
    Rule(
        lambda c: c.dataset != "toy" and c.arch == "embedding",
        "--arch embedding is the toy dataset's free vectors; use it only with --dataset toy.",
    ),
)
#: The relations between train's options, declared: when a combination is refused and what
#: the message says (formatted with the config's fields). The options' own types and bounds
#: are declared in :data:`cl_diag.trainconfig.TRAIN`.
TRAIN_RULES: tuple[Rule, ...] = (
    Rule(
        lambda c: c.num_classes is not None and c.dataset != "toy",
        "--num-classes applies to --dataset toy only; {dataset}'s classes come from its "
        "labels. Drop --num-classes.",
    ),
    Rule(
        lambda c: c.val_root is not None and c.dataset != "imagefolder",
        "--val-root is the test split of --dataset imagefolder; {dataset} has its own test "
        "split. Drop --val-root.",
    ),
    Rule(
        lambda c: c.online_knn > 0 and c.dataset == "toy",
        "--online-knn {online_knn}: the toy dataset's free vectors have no images to encode "
        "and no test split; drop --online-knn.",
    ),
    Rule(
        lambda c: c.online_knn > 0 and c.dataset == "imagefolder" and c.val_root is None,
        "--online-knn {online_knn} scores the test split: give it as --val-root (an image "
        "folder with one subfolder per class), or drop --online-knn.",
    ),
    Rule(
        lambda c: c.classes_per_batch is not None and not c.balanced_batch,
        "--classes-per-batch {classes_per_batch} sets the classes of a balanced batch; add "
        "--balanced-batch (or drop --classes-per-batch).",
    ),
    Rule(
        lambda c: c.views > 2 and c.dataset == "toy",
        "--views {views}: the toy dataset has two free vectors per instance; drop --views.",
    ),
    Rule(
        lambda c: c.views > 2 and c.loss not in MULTI_VIEW_LOSSES,
        "--views {views}: the {loss} loss takes two views; more views work with --loss "
        f"{_loss_names(MULTI_VIEW_LOSSES)} (and --vrn).",
    ),
    Rule(
        lambda c: c.queue > 0 and c.loss not in QUEUE_LOSSES,
        "--queue {queue}: the {loss} loss has no cross-view negatives a queue could add to; "
        f"use --loss {_loss_names(QUEUE_LOSSES)} (or drop --queue).",
    ),
    Rule(
        lambda c: c.queue > 0 and c.views != 2,
        "--queue with --views {views}: queue negatives are defined for two views; drop one "
        "of them.",
    ),
    Rule(
        lambda c: c.dataset == "toy" and c.precision not in ("auto", "fp32"),
        "--dataset toy trains free vectors in fp32; drop --precision.",
    ),
    Rule(
        lambda c: (c.vrn_tuning_grid is None) != (c.vrn_tuning_split is None),
        "--vrn-tuning-grid and --vrn-tuning-split record together how --vrn was chosen: the "
        "grid tried and the split it was chosen on; give both (or neither).",
    ),
    Rule(
        lambda c: c.vrn_tuning_criterion is not None and c.vrn_tuning_grid is None,
        "--vrn-tuning-criterion {vrn_tuning_criterion!r} records how --vrn was chosen from a "
        "grid; add --vrn-tuning-grid and --vrn-tuning-split (or drop it).",
    ),
    Rule(
        lambda c: c.vrn_tuning_grid is not None and c.vrn <= 0,
        "--vrn-tuning-grid records how the VRN weight was chosen, but --vrn is {vrn:g} (off); "
        "give the chosen --vrn, or drop the --vrn-tuning-* options for a run without VRN.",
    ),
    Rule(
        lambda c: (
            c.vrn_tuning_split is not None and c.vrn_tuning_split.strip().lower() == TEST_SPLIT
        ),
        "--vrn-tuning-split test: a weight chosen on the test split is not tuned (its "
        "accuracy is reported there); choose it on a validation split carved from the "
        "training set (cl-diag analyze --validation-fraction) and record that split.",
    ),
)


def _check_tuning_grid(c: TrainConfig) -> TrainConfig:
    """``--vrn-tuning-grid`` parsed and written in its one form (``lambda_grid_text``), and
    holding ``--vrn``; UserError naming the fix."""
    if c.vrn_tuning_grid is None:
        return c
    try:
        grid = parse_lambda_grid(c.vrn_tuning_grid)
    except ValueError as exc:
        raise UserError(
            f"--vrn-tuning-grid {c.vrn_tuning_grid!r}: {exc}; give the weights tried, "
            "comma-separated, e.g. 0.1,0.3,1,3,10,30,100."
        ) from None
    if not any(math.isclose(g, c.vrn, rel_tol=1e-9) for g in grid):
        raise UserError(
            f"--vrn {c.vrn:g} is not in --vrn-tuning-grid {c.vrn_tuning_grid!r}: the grid "
            "records the weights --vrn was chosen from; give the chosen one."
        )
    return replace(c, vrn_tuning_grid=lambda_grid_text(grid))


def check_train_options(c: TrainConfig, spelling: Spelling = CLI) -> TrainConfig:
    """``c`` with every option checked against its declaration (:data:`cl_diag.trainconfig.TRAIN`:
    types and bounds) and normalised, and the relations between options
    (:data:`TRAIN_RULES`); UserError naming the option as ``spelling`` spells it. Imports
    nothing heavy: the command line runs it before torch loads."""
    c = TrainConfig(**check_values(c.options(), TRAIN, spelling=spelling, products=False))
    for rule in TRAIN_RULES:
        rule.check(c)
    c = _check_tuning_grid(c)
    require_logger(c.logger)  # an extra that is not installed: said before anything loads
    return c


def _check_options(c: TrainConfig, spelling: Spelling = CLI) -> TrainConfig:
    """:func:`check_train_options`, then the architecture, the loss's hyper-parameters (the
    loss's own declarations) and the products of the sizes once their defaults are filled
    in; fill the defaults that need no data. UserError on a mistake, naming the option as
    ``spelling`` spells it."""
    c = check_train_options(c, spelling)  # first: a typo is refused before torch loads

    from cl_diag.losses import LOSSES, LossOptionError
    from cl_diag.models import (
        ARCHS,
        BackboneOptions,
        backbone_size_problem,
        default_arch,
        default_projector_hidden,
        get_arch,
    )
    from cl_diag.training.augment import default_image_size

    if ":" in c.arch:  # a family (timm:NAME): any name the family resolves
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
    elif c.arch not in ("auto", *ARCHS):
        raise UserError(f"--arch {c.arch!r} is not one of: {', '.join(('auto', *ARCHS))}.")
    for rule in ARCH_RULES:
        rule.check(c)

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
    except LossOptionError as exc:  # e.g. "simclr: temperature must be a finite number > 0"
        raise UserError(f"{exc} (option {_opt(exc.option)}).") from None

    if c.lr_scaling == "auto":
        # lr = base x batch/256 is the SGD rule of the paper's image recipes; the toy
        # experiment's "lr 0.5" is the step size itself, and Adam is not scaled.
        lr_scaling = "linear" if (c.optimizer == "sgd" and c.dataset != "toy") else "none"
    else:
        lr_scaling = c.lr_scaling
    arch = default_arch(c.dataset) if c.arch == "auto" else c.arch
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
    c = replace(
        c,
        arch=arch,
        lr_scaling=lr_scaling,
        projector_hidden=hidden,
        out=out,
        num_samples=num_samples,
        **resolved_hp,
    )
    # the products of the sizes, with their defaults: what one step and the model allocate
    sizes = c.options()
    if c.dataset == "toy":
        sizes.update(image_size=None)  # free vectors: no images
    else:
        sizes.update(num_samples=None, image_size=c.image_size or default_image_size(c.dataset))
    side = sizes["image_size"]
    labels = (
        {} if c.image_size is not None else {"image_size": f"the {c.dataset} image side {side}"}
    )
    check_products(sizes, TRAIN, spelling=spelling, labels=labels)
    if c.dataset != "toy":
        channels = 1 if c.dataset == "digits" else 3
        problem = backbone_size_problem(arch, BackboneOptions(in_channels=channels))
        _require(problem is None, f"--arch {problem}.")
    return c


def resolve_config(
    options: TrainConfig, *, n_train: int | None = None, world: int | None = None
) -> ResolvedTrainConfig:
    """Check every option once and derive every value a run uses; raise UserError on a mistake.

    ``n_train`` is the number of training instances (default: counted from the dataset without
    loading its images, :func:`cl_diag.training.data.train_size`); ``world`` the number of
    processes (default: torchrun's ``WORLD_SIZE``, else 1). Nothing is written.
    """
    c = _check_options(options)

    import torch

    from cl_diag.measurement.theory import delta
    from cl_diag.runtime import amp_dtype, resolve_device, resolve_workers
    from cl_diag.training.data import train_size

    if c.val_root is not None:  # read only when the run is analysed: checked now, not then
        _check_folder(c.val_root, "--val-root", "the ImageFolder root of the test split")
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
    device_type = resolve_device(c.device).type
    if c.sync_bn and world > 1:
        _require(
            device_type == "cuda",
            "--sync-bn needs CUDA (torch's SyncBatchNorm has no CPU kernel); drop it on CPU.",
        )
    workers = resolve_workers(c.workers, device_type)
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


def _check_folder(path: str, option: str, what: str) -> None:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        state = "does not exist" if not folder.exists() else "is not a folder"
        raise UserError(f"{option} {path} {state}; give {what}.")


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
    # Where the run stands must lie within the run its config describes (a crafted or damaged
    # file could say epoch 1000 of a 40-epoch run, or step 10^15, and be trained on or called
    # complete).
    epoch, step = int(checkpoint["epoch"]), int(checkpoint["step"])
    for key, value, most in (("epoch", epoch, c.run_epochs), ("step", step, c.total_steps)):
        if value > most:
            raise UserError(
                f"{c.resume} is a damaged cl-diag checkpoint: its {key} {value} lies "
                f"beyond the {most} {key}s of the run its config describes. Give the last.pt "
                "that cl-diag train wrote (an intact copy), or train the run again."
            )
    if step > epoch * c.steps_per_epoch:
        raise UserError(
            f"{c.resume} is a damaged cl-diag checkpoint: step {step} cannot be "
            f"reached in {epoch} epochs of {c.steps_per_epoch} steps. Give the last.pt that "
            "cl-diag train wrote (an intact copy), or train the run again."
        )
    return checkpoint


#: the files a run writes in its folder (besides the atomic writer's temporary files)
_EPOCH_FILE = re.compile(r"^epoch_\d{4,}\.pt$")
_RUN_TEMP_FILES = temp_files(r"last\.pt|metrics\.csv|training_curves\.svg|epoch_\d{4,}\.pt")


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


#: the figure of a complete run's metrics.csv
CURVES = "training_curves.svg"


def _curves(out: Path, history: list[dict[str, float]], complete: bool) -> None:
    """Beside metrics.csv just written: the figure of its rows once the run is complete; while
    it is not, no figure (one left by a run that --overwrite replaces would disagree with it).
    Drawn once, not at every checkpoint: a figure costs about as much as 50 small steps."""
    from cl_diag.io.atomic import atomic_write_bytes
    from cl_diag.report.figures import training_curves

    svg = training_curves(history) if complete else None
    if svg is None:
        (out / CURVES).unlink(missing_ok=True)
    else:
        atomic_write_bytes(out / CURVES, svg)


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


@contextlib.contextmanager
def _one_writer(out: Path, is_main: bool, created: list[Path]) -> Iterator[None]:
    """The run folder held by this run alone (the main process holds it): a second ``cl-diag
    train`` into the same --out that got past the check for a run already there (both started
    before either wrote last.pt) is refused, and leaves the folders alone (``created`` is
    emptied: the other run is using them)."""
    from cl_diag.io.output import exclusive_folder  # late: the command line's help stays light

    if not is_main:
        yield
        return
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(exclusive_folder(out, what="cl-diag train"))
        except UserError:
            created.clear()
            raise
        yield


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:  # deepest first; a folder that holds anything stays
        try:
            folder.rmdir()
        except OSError:
            return


# --------------------------------------------------------------------------- train


def train(
    options: TrainConfig,
    *,
    progress: FitProgress | None = None,
    on_advice: Callable[[str], object] | None = None,
) -> TrainResult:
    """Train as ``options`` say; see the module docstring and ``cl-diag train --help``.

    ``progress`` receives the loop's progress on the main process (the CLI passes a bar or
    plain lines); None shows nothing. ``on_advice`` receives, on the main process of a new run,
    the sources' advice for its setting (:func:`cl_diag.orchestration.theory.train_advice_line`)
    when they give one: a line to show, never a reason to stop.
    """
    from cl_diag.models import build_model
    from cl_diag.runtime import Runtime
    from cl_diag.training.data import training_data
    from cl_diag.training.loop import fit

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

    env = Runtime.start(c.device_type)
    if on_advice is not None and env.is_main and not c.resume:
        from cl_diag.orchestration.theory import train_advice_line

        line = train_advice_line(c.record(), c.n_train)
        if line is not None:
            on_advice(line)
    assert c.out is not None  # resolve_config resolved --out
    out = Path(c.out)
    created: list[Path] = []
    logger: RowLogger | None = None
    try:
        try:
            if env.is_main:
                created = _prepare_out(
                    out,
                    resume_dir=Path(c.resume).expanduser().parent if c.resume else None,
                    overwrite=c.overwrite,
                )
            with _one_writer(out, env.is_main, created):
                if env.is_main:
                    _clean_run_folder(out, replacing=c.overwrite and not c.resume)
                model = build_model(c, seed=c.seed)
                if env.is_main:  # --logger: the rows also go there as they are made
                    start = int(checkpoint["step"]) if checkpoint is not None else 0
                    logger = open_logger(
                        c.logger, out, start_step=start, name=out.name, config=c.record()
                    )
                shown = progress if env.is_main else None
                result = fit(
                    c,
                    model,
                    data,
                    out,
                    env=env,
                    resume=checkpoint,
                    progress=shown,
                    logger=logger,
                    on_metrics=(lambda rows, complete: _curves(out, rows, complete))
                    if env.is_main
                    else None,
                )
        finally:
            if logger is not None:
                logger.close()
            # a run stopped before its first epoch end leaves no empty folder behind
            _remove_empty(created)
    except BaseException:
        env.close(wait=False)  # the other ranks may never reach a barrier
        raise
    else:
        env.close(wait=True)
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
        curves=(out / CURVES) if env.is_main and (out / CURVES).exists() else None,
    )
