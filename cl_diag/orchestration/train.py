"""``train(config) -> TrainResult``: check a training config, build data and model, run the loop.

:class:`TrainConfig` has exactly one field per option of ``cl-diag train`` (same names,
same defaults); its defaults are the embedded recipe: digits, SimCLR, the small CNN, CPU,
a few minutes on two cores. Every user mistake is caught before anything is written:
unknown names, hyper-parameters the loss does not take, batch sizes the data cannot
fill, a ``--resume`` whose checkpoint contradicts the options, an output folder that
cannot be written or already holds a run.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from cl_diag.errors import UserError

__all__ = [
    "TrainConfig",
    "TrainResult",
    "train",
    "resolve_config",
    "RESUME_FREE_FIELDS",
    "LOSS_HPARAM_FIELDS",
    "TRAINING_LOSSES",
    "OPTIMIZERS",
]

OPTIMIZERS = ("sgd", "adam", "adamw")
LR_SCALINGS = ("auto", "linear", "none")
SCHEDULES = ("cosine", "constant")
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: TrainConfig fields that carry loss-library hyper-parameters (None: the loss's default).
LOSS_HPARAM_FIELDS = ("temperature", "bias", "within_view", "margin", "mining")
#: Fields a resumed run may change: where and how it runs, not what it computes.
RESUME_FREE_FIELDS = frozenset(
    {"resume", "out", "overwrite", "quiet", "workers", "device", "precision", "compile", "data_root", "val_root", "download", "save_every"}
)


#: Every loss of the library except vrn, which is a regulariser (``--vrn``).
TRAINING_LOSSES = ("infonce", "simclr", "dcl", "dhel", "sigmoid", "spectral", "triplet", "contrastive", "supcon")


@dataclass
class TrainConfig:
    """One field per ``cl-diag train`` option; ``None``/``"auto"`` mean "the documented default"."""

    # data
    dataset: str = "digits"
    data_root: str | None = None
    val_root: str | None = None
    download: bool = False
    num_samples: int | None = None
    dim: int = 3
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
    vrn: float = 0.0
    vrn_delta: float | None = None
    vrn_power: float = 2.0
    # optimisation
    epochs: int = 40
    steps: int | None = None
    batch_size: int = 128
    optimizer: str = "sgd"
    lr: float = 1.0
    lr_scaling: str = "auto"
    momentum: float = 0.9
    weight_decay: float = 1e-4
    warmup_epochs: float = 3.0
    schedule: str = "cosine"
    seed: int = 0
    # running
    device: str = "auto"
    precision: str = "auto"
    compile: bool = False
    workers: int | None = None
    sync_bn: bool = False
    # records
    out: str | None = None
    save_every: int = 0
    resume: str | None = None
    overwrite: bool = False
    quiet: bool = False

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, **overrides: Any) -> "TrainConfig":
        """The config to continue the run saved in ``path``, with ``overrides`` applied.

        ``out`` defaults to the checkpoint's folder (not the saved ``out``, which may be
        relative to another working directory); ``workers``, ``quiet`` and ``overwrite``
        to their defaults (they describe the machine and the session, not the run)."""
        from cl_diag.training.checkpoint import load_checkpoint

        saved = load_checkpoint(path)["config"]
        known = {f.name for f in fields(cls)}
        base = {k: v for k, v in saved.items() if k in known}
        base.update(out=None, resume=str(path), workers=None, quiet=False, overwrite=False)
        base.update(overrides)
        return cls(**base)


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


# --------------------------------------------------------------------------- checks


def _choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise UserError(f"--{name.replace('_', '-')} {value!r} is not one of: {', '.join(map(str, choices))}.")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise UserError(message)


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def resolve_config(c: TrainConfig) -> TrainConfig:
    """Check names and ranges and fill the defaults that need no data; raise UserError."""
    from cl_diag.losses import LOSSES, LossOptionError
    from cl_diag.training.data import DATASETS
    from cl_diag.models import ARCHS, default_arch, default_projector_hidden

    _choice("dataset", c.dataset, DATASETS)
    if c.loss == "vrn":
        raise UserError("vrn is a regulariser, not a training loss: use --loss simclr (or another) with --vrn LAMBDA.")
    _choice("loss", c.loss, TRAINING_LOSSES)
    _choice("arch", c.arch, ("auto",) + ARCHS)
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
        raise UserError(f"--dataset toy learns free vectors and takes no encoder; drop --arch {arch} (or use --arch embedding).")
    if c.dataset != "toy" and arch == "embedding":
        raise UserError("--arch embedding is the toy dataset's free vectors; use it only with --dataset toy.")

    # Loss hyper-parameters: only those the chosen loss takes, each checked by the library.
    loss = LOSSES[c.loss]
    accepted = loss.hyperparameter_names
    given = {k: getattr(c, k) for k in LOSS_HPARAM_FIELDS if getattr(c, k) is not None}
    stray = [k for k in given if k not in accepted]
    if stray:
        takes = ", ".join(_opt(k) for k in accepted) if accepted else "no hyper-parameters"
        raise UserError(
            f"{', '.join(_opt(k) for k in stray)} {'is not a hyper-parameter' if len(stray) == 1 else 'are not hyper-parameters'} "
            f"of the {c.loss} loss (it takes: {takes}); drop {'it' if len(stray) == 1 else 'them'} or choose another --loss."
        )
    try:
        resolved_hp = loss.resolve(**given)
    except LossOptionError as exc:  # e.g. "simclr: temperature must be a finite number > 0, got -1.0"
        raise UserError(f"{exc} (option {_opt(exc.option)}).") from None

    _require(math.isfinite(c.vrn) and c.vrn >= 0, f"--vrn {c.vrn} must be a finite weight >= 0 (0 turns VRN off; the paper uses 30).")
    _require(math.isfinite(c.vrn_power) and c.vrn_power > 0, f"--vrn-power {c.vrn_power} must be > 0 (the paper uses 2).")
    if c.vrn_delta is not None:
        _require(-1 <= c.vrn_delta <= 1, f"--vrn-delta {c.vrn_delta} must be a cosine similarity in [-1, 1].")
    _require(c.epochs >= 1, f"--epochs {c.epochs} must be at least 1.")
    _require(c.seed >= 0, f"--seed {c.seed} must be 0 or more (numpy and torch seeds are non-negative).")
    _require(c.steps is None or c.steps >= 1, f"--steps {c.steps} must be at least 1 (or omit it to train --epochs).")
    _require(c.batch_size >= 2, f"--batch-size {c.batch_size} leaves no negative pairs; use at least 2.")
    _require(math.isfinite(c.lr) and c.lr > 0, f"--lr {c.lr} must be > 0.")
    _require(0 <= c.momentum < 1, f"--momentum {c.momentum} must be in [0, 1).")
    _require(c.weight_decay >= 0, f"--weight-decay {c.weight_decay} must be >= 0.")
    _require(c.warmup_epochs >= 0, f"--warmup-epochs {c.warmup_epochs} must be >= 0.")
    _require(c.save_every >= 0, f"--save-every {c.save_every} must be >= 0 (0: only last.pt).")
    _require(c.workers is None or c.workers >= 0, f"--workers {c.workers} must be >= 0.")
    _require(c.projector_dim >= 1, f"--projector-dim {c.projector_dim} must be >= 1.")
    _require(c.projector_hidden is None or c.projector_hidden >= 1, f"--projector-hidden {c.projector_hidden} must be >= 1.")
    _require(c.image_size is None or c.image_size >= 1, f"--image-size {c.image_size} must be >= 1.")
    _require(c.dim >= 1, f"--dim {c.dim} must be >= 1.")
    if c.num_samples is not None:
        _require(c.num_samples >= 2, f"--num-samples {c.num_samples} must be at least 2 (a single instance has no negatives).")
    if c.dataset == "toy":
        _require(c.precision in ("auto", "fp32"), "--dataset toy trains free vectors in fp32; drop --precision.")

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
    return replace(c, arch=arch, lr_scaling=lr_scaling, projector_hidden=hidden, out=out, num_samples=num_samples, **resolved_hp)


def _default_out(c: TrainConfig) -> str:
    name = f"{c.dataset}-{c.loss}" + (f"-vrn{c.vrn:g}" if c.vrn else "")
    return str(Path("runs") / name)


def _check_resume(c: TrainConfig, saved: dict[str, Any], path: str) -> None:
    diffs = []
    for f in fields(TrainConfig):
        if f.name in RESUME_FREE_FIELDS or f.name not in saved:
            continue
        mine, theirs = getattr(c, f.name), saved[f.name]
        if mine != theirs:
            diffs.append(f"{_opt(f.name)} {mine!r} (the checkpoint has {theirs!r})")
    if diffs:
        raise UserError(
            f"--resume {path} continues a run, but these options contradict its config: {'; '.join(diffs)}. "
            f"Drop them to continue that run, or start a new run with another --out."
        )


def _prepare_out(out: Path, *, resume_dir: Path | None, overwrite: bool) -> None:
    last = out / "last.pt"
    if last.exists() and not overwrite and (resume_dir is None or resume_dir.resolve() != out.resolve()):
        raise UserError(
            f"{out} already holds a run ({last}); continue it with --resume {last}, choose another --out, "
            f"or pass --overwrite to replace it."
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise UserError(f"cannot write to --out {out} ({exc.strerror or exc}); choose a folder you can write to.") from None


# --------------------------------------------------------------------------- train


def train(config: TrainConfig) -> TrainResult:
    """Train as ``config`` says; see the module docstring and ``cl-diag train --help``."""
    from cl_diag.training.checkpoint import load_checkpoint
    from cl_diag.training.data import training_data
    from cl_diag.training.loop import close_distributed, distributed_env, fit
    from cl_diag.models import build_model

    c = resolve_config(config)
    checkpoint = None
    if c.resume:
        checkpoint = load_checkpoint(c.resume)

    data = training_data(
        c.dataset,
        seed=c.seed,
        data_root=c.data_root,
        val_root=c.val_root,
        download=c.download,
        num_samples=c.num_samples,
        image_size=c.image_size,
    )
    _require(
        c.batch_size <= data.n_train,
        f"--batch-size {c.batch_size} is larger than the {data.n_train} training instances of {c.dataset}; "
        f"use at most {data.n_train}.",
    )
    delta = c.vrn_delta if c.vrn_delta is not None else -1.0 / (data.n_train - 1)
    c = replace(c, vrn_delta=delta)
    if checkpoint is not None:
        _check_resume(c, checkpoint["config"], c.resume)

    env = distributed_env(c.device)
    try:
        _require(
            c.batch_size % env.world == 0,
            f"--batch-size {c.batch_size} (the global batch) must be divisible by the {env.world} processes.",
        )
        if c.sync_bn and env.distributed:
            _require(env.device.type == "cuda", "--sync-bn needs CUDA (torch's SyncBatchNorm has no CPU kernel); drop it on CPU.")
        workers = c.workers
        if workers is None:
            workers = min(8, os.cpu_count() or 1) if env.device.type == "cuda" else 0
        c = replace(c, workers=workers)

        out = Path(c.out).expanduser()
        if env.is_main:
            _prepare_out(out, resume_dir=Path(c.resume).expanduser().parent if c.resume else None, overwrite=c.overwrite)

        peak = c.lr * (c.batch_size / 256 if c.lr_scaling == "linear" else 1.0)
        model = build_model(c, seed=c.seed)
        record = asdict(c)
        record["out"] = str(out)
        result = fit(c, model, data, out, env=env, resume=checkpoint, config_record=record, peak_lr=peak, delta=delta)
    finally:
        close_distributed(env)
    return TrainResult(
        out_dir=out if env.is_main else None,
        checkpoint=result.checkpoint,
        metrics_csv=(out / "metrics.csv") if env.is_main else None,
        config=record,
        n_train=data.n_train,
        epochs=result.epochs,
        steps=result.steps,
        steps_this_run=result.steps_this_run,
        train_seconds=result.train_seconds,
        checkpoint_seconds=result.checkpoint_seconds,
        history=result.history,
        complete=result.complete,
    )
