"""The training loop: one function, :func:`fit`, that a reader can hold in their head.

Per step::

    lr      = lr_at(step)                           # linear warm-up, then cosine (or constant)
    z1, z2  = model(cat(view1, view2)).chunk(2)     # one forward pass, AMP on CUDA
    g       = gather_batch(z1, z2)                  # the global batch under DDP (else identity)
    loss    = LOSSES[loss](g.z1, g.z2) + lambda * LOSSES["vrn"](g.z1, g.z2, delta, power)
    backward, optimizer step
    monitor.update(g.z1, g.z2, loss terms)          # on the device: no wait for the host

With ``--views V`` views 3..V go to the losses as ``extra_views``; with ``--queue K`` the loss
and VRN also get the keys earlier steps queued (:mod:`cl_diag.training.queue`).

Every ``log_every`` steps and at each epoch end the loop syncs with the device once
(:meth:`cl_diag.measurement.monitor.Monitor.flush`): it reads the row, stops on a non-finite
loss (naming the step), and appends the row to ``metrics.csv``. ``last.pt`` is written
atomically at epoch ends once :data:`CHECKPOINT_STEPS` steps have passed since the last write
(and after the first epoch and at the end; ``epoch_NNNN.pt`` every ``save_every``), a rule in
steps, not seconds, so that which epochs write is the same on every machine.

Reproducibility: epoch ``e``'s batches are a permutation seeded with ``(seed, e)`` and each
sample's augmentation with ``(seed, e, index)``, so nothing depends on state carried across
epochs and a run killed mid-epoch resumes from the last epoch end to bit-identical weights on
CPU. Under DDP rank r takes the r-th slice of each *global* batch; losses run in fp32 and
:func:`cl_diag.losses.distributed.gather_batch` gives each rank the global batch with
gradients.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler

from cl_diag.environment import fingerprint
from cl_diag.errors import UserError
from cl_diag.io.loggers import RowLogger
from cl_diag.losses import LOSSES, RegularisedLoss, build_loss
from cl_diag.losses.distributed import gather_batch, gather_with_grad
from cl_diag.measurement.monitor import METRIC_COLUMNS, Monitor
from cl_diag.measurement.monitor import BatchPairMoments as BatchPairMoments  # tests import it here
from cl_diag.models import ContrastiveModel, FreeEmbeddings, is_convolutional
from cl_diag.models.checkpoints import FORMAT, FORMAT_VERSION
from cl_diag.runtime import Runtime, amp_dtype
from cl_diag.trainconfig import ResolvedTrainConfig
from cl_diag.training.checkpoint import (
    capture_rng_state,
    library_versions,
    restore_rng_state,
    save_checkpoint,
)
from cl_diag.training.data import TrainingData
from cl_diag.training.online_knn import COLUMN as KNN_COLUMN
from cl_diag.training.online_knn import OnlineKnn
from cl_diag.training.queue import KeyQueue, MomentumEncoder

__all__ = [
    "METRIC_COLUMNS",
    "BalancedBatchSampler",
    "BatchPairMoments",
    "EpochBatchSampler",
    "FitProgress",
    "FitResult",
    "deterministic_mode",
    "fit",
    "lr_at",
    "make_optimizer",
]


# Only supcon and supcl are supervised by design. The other label-reading losses (triplet,
# contrastive) get no labels, so positives stay "the other view of the same instance".
SUPERVISED_LOSSES = ("supcon", "supcl")


# --------------------------------------------------------------------------- batches


class EpochBatchSampler(Sampler):
    """Shuffled batches, a pure function of ``(seed, epoch)``; drops the last partial batch.

    Yields ``(epoch, index)`` keys (see :class:`~cl_diag.training.data.TwoViews`). With
    ``world`` ranks, each global batch of ``batch_size`` is cut into ``world`` contiguous
    slices and rank ``rank`` takes its slice, so gathering the ranks' slices in rank
    order rebuilds the single-process batch exactly.
    """

    def __init__(self, n: int, batch_size: int, seed: int, rank: int = 0, world: int = 1):
        if batch_size % world:
            raise ValueError(f"batch_size {batch_size} is not divisible by world size {world}")
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.rank, self.world = rank, world
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n // self.batch_size

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        g = torch.Generator().manual_seed(
            int(np.random.SeedSequence([self.seed, self.epoch]).generate_state(1)[0])
        )
        order = torch.randperm(self.n, generator=g).tolist()
        local = self.batch_size // self.world
        for b in range(len(self)):
            start = b * self.batch_size + self.rank * local
            yield [(self.epoch, i) for i in order[start : start + local]]


class BalancedBatchSampler(Sampler):
    """Batches of m classes x n instances (``cl-diag train --balanced-batch``), a pure function
    of ``(seed, epoch)`` that shares :class:`EpochBatchSampler`'s keys and DDP slicing.

    ``classes_per_batch`` is m and n = ``batch_size`` / m. Each batch takes the next m classes
    from a stream of permutations of the classes and the next n instances of each from its own
    stream (seeded with ``(seed, epoch, 1)``), so a batch never repeats a class or an instance and
    within an epoch every class and instance is drawn equally often, to within one; the batch is
    then shuffled, so a DDP slice is not one class. ValueError when the batch is not m x n, m
    exceeds the classes, or a class has fewer than n instances (checked before training too).
    """

    def __init__(
        self,
        labels: torch.Tensor,
        batch_size: int,
        classes_per_batch: int,
        seed: int,
        rank: int = 0,
        world: int = 1,
    ):
        if batch_size % world:
            raise ValueError(f"batch_size {batch_size} is not divisible by world size {world}")
        if classes_per_batch < 1 or batch_size % classes_per_batch:
            raise ValueError(
                f"batch_size {batch_size} is not a multiple of classes_per_batch "
                f"{classes_per_batch}"
            )
        labels = torch.as_tensor(labels, dtype=torch.int64).cpu()
        self.classes = [torch.nonzero(labels == c).flatten() for c in torch.unique(labels)]
        self.m, self.per_class = classes_per_batch, batch_size // classes_per_batch
        if self.m > len(self.classes):
            raise ValueError(f"{self.m} classes per batch, but the labels hold {len(self.classes)}")
        smallest = min(len(c) for c in self.classes)
        if smallest < self.per_class:
            raise ValueError(
                f"a class has {smallest} instances, fewer than the {self.per_class} per batch"
            )
        self.n, self.batch_size, self.seed = len(labels), batch_size, seed
        self.rank, self.world = rank, world
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n // self.batch_size

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        g = torch.Generator().manual_seed(
            int(np.random.SeedSequence([self.seed, self.epoch, 1]).generate_state(1)[0])
        )

        def stream(size: int, take: int) -> Iterator[list[int]]:
            # `take` distinct items of range(size) at a time, read off successive permutations.
            # When a permutation runs short, its rest comes first and the next permutation's
            # items it already holds wait for the following draw: the queue then holds the
            # rest (distinct) and a whole permutation, so `take` distinct items are always
            # there, and every item is drawn once per permutation.
            queue: deque[int] = deque()
            while True:
                if len(queue) < take:
                    queue.extend(torch.randperm(size, generator=g).tolist())
                picked: list[int] = []
                chosen: set[int] = set()
                waiting: list[int] = []
                while len(picked) < take:
                    item = queue.popleft()
                    if item in chosen:
                        waiting.append(item)
                    else:
                        picked.append(item)
                        chosen.add(item)
                queue.extendleft(reversed(waiting))
                yield picked

        class_picks = stream(len(self.classes), self.m)
        members = [stream(len(c), self.per_class) for c in self.classes]
        local = self.batch_size // self.world
        for _ in range(len(self)):
            batch = [int(self.classes[c][i]) for c in next(class_picks) for i in next(members[c])]
            batch = [batch[k] for k in torch.randperm(len(batch), generator=g).tolist()]
            mine = batch[self.rank * local : (self.rank + 1) * local]
            yield [(self.epoch, i) for i in mine]


def _seed_worker(worker_id: int) -> None:
    # torch seeds each worker from the loader's generator; derive numpy/python from it so
    # any library that draws from them in a worker is reproducible too.
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


# --------------------------------------------------------------------------- optimisation


def lr_at(
    step: int, *, peak: float, warmup_steps: int, total_steps: int, schedule: str = "cosine"
) -> float:
    """Learning rate of optimiser step ``step`` (0-based).

    Warm-up: ``peak * (step + 1) / warmup_steps`` for ``step < warmup_steps``; then
    ``cosine``: ``peak * (1 + cos(pi * t)) / 2`` with ``t = (step - warmup_steps) /
    (total_steps - warmup_steps)`` (decays to 0), or ``constant``: ``peak``.
    """
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    if schedule == "constant":
        return peak
    t = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return peak * 0.5 * (1.0 + math.cos(math.pi * min(1.0, t)))


def make_optimizer(
    name: str, params, *, lr: float, momentum: float, weight_decay: float
) -> torch.optim.Optimizer:
    """``sgd`` (momentum), ``adam`` (L2 weight decay) or ``adamw`` (decoupled)."""
    params = list(params)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}")


# --------------------------------------------------------------------------- progress


class FitProgress(Protocol):
    """What :func:`fit` reports as it runs (main process only). The CLI supplies one: a rich bar
    or plain lines. Every call carries numbers the host already has, so showing progress never
    makes a step wait for the device."""

    def start(self, *, total_steps: int, done_steps: int, epochs: int) -> None:
        """Before the first step: the run's length and the steps done before (a resume)."""

    def step(self, step: int, epoch: int) -> None:
        """After each optimiser step (1-based ``step`` and ``epoch``)."""

    def row(self, row: dict[str, float]) -> None:
        """Each metrics row (every ``log_every`` steps and at each epoch end), as in metrics.csv."""


#: what :func:`fit` calls each time it writes metrics.csv: the rows, and whether the run is complete
MetricsWritten = Callable[[list[dict[str, Any]], bool], object]


class _Silent:
    """No progress display (the library's default: only the CLI shows progress)."""

    def start(self, *, total_steps: int, done_steps: int, epochs: int) -> None:
        pass

    def step(self, step: int, epoch: int) -> None:
        pass

    def row(self, row: dict[str, float]) -> None:
        pass


# --------------------------------------------------------------------------- the loop


@dataclass
class FitResult:
    epochs: int  # completed epochs
    steps: int  # optimiser steps taken in total
    steps_this_run: int
    train_seconds: float  # time inside the epoch loops of this run (data + compute + stats)
    checkpoint_seconds: float
    history: list[dict[str, float]] = field(default_factory=list)
    checkpoint: Path | None = None
    complete: bool = True


def _loss_hparams(config: ResolvedTrainConfig) -> dict[str, Any]:
    names = LOSSES[config.loss].hyperparameter_names
    return {k: getattr(config, k) for k in names if getattr(config, k, None) is not None}


@dataclass
class _Parts:
    """What a run trains with: the model and the module to call, optimiser, AMP, batches."""

    model: ContrastiveModel
    net: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    autocast: torch.dtype | None
    channels_last: bool
    sampler: EpochBatchSampler | BalancedBatchSampler
    loader: DataLoader
    loader_gen: torch.Generator
    # --queue: the queued keys (made at the first push, or restored) and the momentum key encoder
    queue: KeyQueue | None = None
    key_encoder: MomentumEncoder | None = None


#: cuBLAS's deterministic workspace setting (docs: "Reproducibility", CUDA >= 10.2)
CUBLAS_DETERMINISTIC = ":4096:8"


@contextmanager
def deterministic_mode(enabled: bool) -> Iterator[None]:
    """``--deterministic``: while the run trains, torch's deterministic algorithms (an operation
    without one stops the run with torch's error), one intra-op thread (a parallel reduction
    sums in an order that depends on the thread count), cuDNN deterministic with its benchmark
    off, and ``CUBLAS_WORKSPACE_CONFIG`` at :data:`CUBLAS_DETERMINISTIC` unless set. Everything
    is restored afterwards. Disabled: nothing changes."""
    if not enabled:
        yield
        return
    cudnn = torch.backends.cudnn
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.get_num_threads(),
        cudnn.deterministic,
        cudnn.benchmark,
        os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    )
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    cudnn.deterministic, cudnn.benchmark = True, False
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        torch.set_num_threads(saved[2])
        cudnn.deterministic, cudnn.benchmark = saved[3], saved[4]
        if saved[5] is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = saved[5]


@contextmanager
def _restoring(what: str, config: ResolvedTrainConfig) -> Iterator[None]:
    """A resumed checkpoint whose ``what`` passed the schema check but does not fit this run
    (a crafted or damaged file): a UserError naming the part, not torch's traceback."""
    try:
        yield
    # OverflowError: a crafted count, e.g. a negative word of Python's random state
    except (ValueError, KeyError, TypeError, IndexError, OverflowError, RuntimeError) as exc:
        text = str(exc).strip().splitlines()
        raise UserError(
            f"--resume {config.resume}: its {what} does not fit the run it describes "
            f"({text[0] if text else type(exc).__name__}); the checkpoint is damaged. Give an "
            "intact last.pt, or train the run again."
        ) from None


def _hyperparameters(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """Each parameter group's settings but its parameters: what a restored state is checked
    against (:func:`_check_optimizer_state`)."""
    return [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]


def _fits(reference: object, value: object) -> bool:
    """Whether a restored group setting has the kind of the optimiser's own: a flag stays a
    flag, a number a finite non-negative number (every rate, momentum, decay and epsilon of
    SGD and AdamW is one), a pair a pair of such numbers; an unset (None) option may be a flag."""
    if isinstance(reference, bool):
        return isinstance(value, bool)
    if isinstance(reference, (int, float)):
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        )
    if isinstance(reference, (tuple, list)):
        return (
            isinstance(value, (tuple, list))
            and len(value) == len(reference)
            and all(_fits(r, v) for r, v in zip(reference, value, strict=True))
        )
    if reference is None:
        return value is None or isinstance(value, bool)
    return type(value) is type(reference)


def _check_optimizer_state(
    optimizer: torch.optim.Optimizer, reference: list[dict[str, Any]]
) -> None:
    """ValueError unless the restored state fits the optimiser that will run it:
    ``load_state_dict`` checks neither the groups' settings (a missing momentum, a NaN or None
    rate) nor the buffers, and each would fail only at the first step, inside the update, after
    the run folder was written. ``reference`` is the optimiser's own settings before the load
    (:func:`_hyperparameters`): every one must be restored with its kind; every per-parameter
    buffer (SGD's momentum, Adam's moments) must be a finite tensor of its parameter's shape
    (``step`` a finite, non-negative count)."""
    if len(optimizer.param_groups) != len(reference):
        raise ValueError(
            f"it has {len(optimizer.param_groups)} parameter groups, not {len(reference)}"
        )
    for i, (group, own) in enumerate(zip(optimizer.param_groups, reference, strict=True)):
        for key, expected in own.items():
            if key not in group:
                raise ValueError(f"its parameter group {i} lacks {key!r}")
            if not _fits(expected, group[key]):
                raise ValueError(
                    f"its parameter group {i} has {key} = {str(group[key])[:40]!r}, not a value "
                    f"of the kind {expected!r} is"
                )
        for param in group["params"]:
            for name, value in optimizer.state.get(param, {}).items():
                if value is None:
                    continue
                if not isinstance(value, torch.Tensor):
                    if name == "step" and _fits(0.0, value):
                        continue
                    raise ValueError(f"its {name} is not a tensor")
                if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                    raise ValueError(f"its {name} holds values that are not finite")
                if name == "step":
                    if value.numel() != 1 or float(value) < 0:
                        raise ValueError("its step is not one non-negative count")
                elif value.shape != param.shape or not value.is_floating_point():
                    raise ValueError(
                        f"its {name} for a parameter of shape {tuple(param.shape)} has shape "
                        f"{tuple(value.shape)} and type {value.dtype}"
                    )


def _build(
    config: ResolvedTrainConfig,
    model: ContrastiveModel,
    data: TrainingData,
    env: Runtime,
    resume: dict[str, Any] | None,
) -> _Parts:
    """Place ``model`` on its device (channels_last for CNNs on CUDA) with resumed weights, wrap
    it (SyncBatchNorm, DDP, torch.compile as configured), and make the optimiser, the AMP scaler
    and the batches; a resume restores the optimiser, scaler and loader-generator states."""
    device = env.device
    model.to(device)
    channels_last = device.type == "cuda" and is_convolutional(model.arch)
    if channels_last:
        model.to(memory_format=torch.channels_last)
    if resume is not None:  # before DDP/compile wrap the module; every rank loads the same file
        with _restoring("weights", config):
            model.backbone.load_state_dict(resume["backbone"])
            model.projector.load_state_dict(resume["projector"])
    if config.sync_bn and env.distributed:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    queue, key_encoder = None, None
    if config.queue:
        if config.key_encoder == "momentum":  # a copy of the (resumed) model: MoCo's start
            key_encoder = MomentumEncoder(model, config.key_momentum)
            key_encoder.train()  # BatchNorm on the key batch, as MoCo's key encoder
            if resume is not None and resume.get("key_encoder") is not None:
                key_encoder.load_checkpoint_state(resume["key_encoder"])
        if resume is not None and resume.get("queue") is not None:
            saved = resume["queue"]
            queue = KeyQueue(config.queue, int(saved["keys"].shape[2])).to(device)
            queue.load_state_dict(saved)
    net: nn.Module = model
    if env.distributed:
        ids = [device.index] if device.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    if config.compile:
        # torch.compile of a module returns a module (OptimizedModule); its stub says Callable
        net = cast(nn.Module, torch.compile(net))
    if device.type == "cuda" and not config.deterministic:
        torch.backends.cudnn.benchmark = True  # fixed input shapes; bit-exactness is a CPU promise

    optimizer = make_optimizer(
        config.optimizer,
        model.parameters(),
        lr=config.peak_lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
    )
    autocast = amp_dtype(config.autocast, device)
    scaler = torch.amp.GradScaler(device.type, enabled=autocast == torch.float16)
    sampler: EpochBatchSampler | BalancedBatchSampler
    if config.balanced_batch:  # m classes x n instances per batch
        assert config.classes_per_batch is not None  # resolve_config fills it in
        sampler = BalancedBatchSampler(
            data.labels,
            config.batch_size,
            config.classes_per_batch,
            config.seed,
            env.rank,
            env.world,
        )
    else:
        sampler = EpochBatchSampler(
            data.n_train, config.batch_size, config.seed, env.rank, env.world
        )
    loader_gen = torch.Generator().manual_seed(config.seed)
    loader = DataLoader(
        data.train_set,
        batch_sampler=sampler,
        num_workers=config.workers or 0,  # resolve_config resolves None
        pin_memory=device.type == "cuda",
        generator=loader_gen,
        worker_init_fn=_seed_worker,
        persistent_workers=bool(config.workers),
    )
    # Nothing in the loop draws from the global RNGs (data randomness is per sample, the initial
    # weights come from build_model's seed); the checkpoint still records and restores
    # them so that an extension that does draw stays reproducible across a resume.
    if resume is not None:
        with _restoring("optimizer state", config):
            own = _hyperparameters(optimizer)
            optimizer.load_state_dict(resume["optimizer"])
            _check_optimizer_state(optimizer, own)
        with _restoring("AMP scaler state", config):
            if resume.get("scaler"):
                scaler.load_state_dict(resume["scaler"])
        with _restoring("random generator states", config):
            restore_rng_state(resume["rng"], loader_gen)
    return _Parts(
        model,
        net,
        optimizer,
        scaler,
        autocast,
        channels_last,
        sampler,
        loader,
        loader_gen,
        queue,
        key_encoder,
    )


@torch.no_grad()
def _keys(parts: _Parts, x: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor):
    """The unit keys of this step's two views for the queue, of the global batch under DDP:
    the momentum encoder's (updated first from the current weights, as MoCo does) or, with
    ``--key-encoder same``, the step's own embeddings ``z1``, ``z2`` (global), detached."""
    if parts.key_encoder is None:
        k1, k2 = z1.detach(), z2.detach()
    else:
        parts.key_encoder.update(parts.model)
        amp = parts.autocast
        with torch.autocast(x.device.type, dtype=amp, enabled=amp is not None):
            k = parts.key_encoder(x)
        g = gather_batch(*k.float().chunk(2))
        k1, k2 = g.z1, g.z2
    return nn.functional.normalize(k1.float(), dim=1), nn.functional.normalize(k2.float(), dim=1)


#: an epoch end writes ``last.pt`` once this many steps have passed since the last write (a
#: kill loses at most this many steps, or one epoch); see the module docstring for the others
CHECKPOINT_STEPS = 50


def _save(
    config: ResolvedTrainConfig,
    data: TrainingData,
    parts: _Parts,
    out_dir: Path,
    epoch: int,
    step: int,
    monitor: Monitor,
    env: Runtime,
) -> None:
    """``last.pt`` (and ``epoch_NNNN.pt`` every ``save_every`` epochs) and ``metrics.csv``."""
    model = parts.model
    ck = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": config.record(),
        "dataset": data.dataset,
        "n_train": data.n_train,
        "split": data.split,
        "backbone": model.backbone.state_dict(),
        "projector": model.projector.state_dict(),
        "optimizer": parts.optimizer.state_dict(),
        "scheduler": {
            "kind": f"warmup-{config.schedule}",
            "step": step,
            "peak_lr": config.peak_lr,
            "warmup_steps": config.warmup_steps,
            "total_steps": config.total_steps,
        },
        "scaler": parts.scaler.state_dict() if parts.scaler.is_enabled() else None,
        "epoch": epoch,
        "step": step,
        "complete": step >= config.total_steps,
        "rng": capture_rng_state(parts.loader_gen),
        "metrics": monitor.history,
        "versions": library_versions(),
        # what its bits depend on besides the config (docs/reproducibility.md)
        "environment": fingerprint(device=env.device, workers=config.workers, processes=env.world),
    }
    if isinstance(model.backbone, FreeEmbeddings):
        z1, z2 = model.backbone.views()
        ck["embeddings"] = {"z1": z1, "z2": z2}
    if parts.queue is not None:  # --queue: what --resume needs to continue bit-exactly
        ck["queue"] = parts.queue.state_dict()
    if parts.key_encoder is not None:
        ck["key_encoder"] = parts.key_encoder.checkpoint_state()
    save_checkpoint(out_dir / "last.pt", ck)
    if config.save_every and (epoch % config.save_every == 0):
        save_checkpoint(out_dir / f"epoch_{epoch:04d}.pt", ck)
    monitor.to_csv(out_dir / "metrics.csv")


def fit(
    config: ResolvedTrainConfig,
    model: ContrastiveModel,
    data: TrainingData,
    out_dir: Path | None,
    *,
    env: Runtime,
    resume: dict[str, Any] | None = None,
    progress: FitProgress | None = None,
    logger: RowLogger | None = None,
    on_metrics: MetricsWritten | None = None,
) -> FitResult:
    """Train ``model`` on ``data`` as ``config`` says.

    ``config`` is the run's :class:`~cl_diag.trainconfig.ResolvedTrainConfig` (its options,
    ``peak_lr``, ``warmup_steps``, ``total_steps``, ``run_epochs``, ``autocast`` and
    ``record()``, the dict stored as the checkpoint's ``config``). ``out_dir`` receives
    ``last.pt`` and ``metrics.csv`` (rank 0 only; None writes nothing). ``resume`` is a loaded
    checkpoint to continue from; ``progress`` is told about steps and rows; ``logger``
    (``--logger``, :mod:`cl_diag.io.loggers`) is given each row as it is made;
    ``on_metrics`` is called each time metrics.csv is written, with its rows and whether the run
    is complete (the CLI draws the training-curve figure of a complete run there). With
    ``config.deterministic`` the run trains under :func:`deterministic_mode`.
    """
    with deterministic_mode(config.deterministic):
        return _fit(
            config,
            model,
            data,
            out_dir,
            env=env,
            resume=resume,
            progress=progress,
            logger=logger,
            on_metrics=on_metrics,
        )


def _fit(
    config: ResolvedTrainConfig,
    model: ContrastiveModel,
    data: TrainingData,
    out_dir: Path | None,
    *,
    env: Runtime,
    resume: dict[str, Any] | None,
    progress: FitProgress | None,
    logger: RowLogger | None,
    on_metrics: MetricsWritten | None,
) -> FitResult:
    device = env.device
    parts = _build(config, model, data, env, resume)
    optimizer, sampler = parts.optimizer, parts.sampler
    epoch, step, history = 0, 0, []
    if resume is not None:
        epoch, step = int(resume["epoch"]), int(resume["step"])
        history = list(resume.get("metrics", []))

    # Built once: the hyper-parameters are checked here, not on every step.
    loss_fn = build_loss(config.loss, **_loss_hparams(config)).to(device)
    vrn_fn = build_loss("vrn", delta=config.vrn_delta, power=float(config.vrn_power))
    lam = float(config.vrn)
    # loss + lam * VRN on one normalisation of the views (each term's value as computed alone)
    objective = RegularisedLoss(loss_fn, vrn_fn, lam) if lam else None
    # With p = 2 and no VRN in the loss, the logged VRN comes from the pair statistics
    # (var + (mean - delta)^2): no extra B x B product per step.
    # (With --views V > 2 VRN runs over every view pair, the statistics over views 1 and 2.)
    # (With --queue the VRN term also runs over the queue's similarities: computed, not read.)
    vrn_from_stats = not lam and config.vrn_power == 2.0 and config.views == 2 and not config.queue
    supervised = config.loss in SUPERVISED_LOSSES
    save_dir = Path(out_dir) if out_dir is not None and env.is_main else None
    writes = save_dir is not None
    last_path = None if out_dir is None else Path(out_dir) / "last.pt"
    # The monitor keeps the metrics rows: a row every log_every steps (0: none inside an
    # epoch) and at each epoch end. It is given the gathered global batch (gather=False), and
    # counts no excessive ratios, so metrics.csv keeps its columns and its per-step cost.
    monitor = Monitor(
        delta=config.vrn_delta,
        log_every=config.log_every,
        excessive=False,
        gather=False,
        step=step,
        history=history,
        logger=logger,
    )

    if resume is not None and save_dir is not None:
        # metrics.csv as last.pt knows it: a kill between writing last.pt and metrics.csv
        # leaves an older history beside it (nothing else rewrites it when no epoch is left)
        monitor.to_csv(save_dir / "metrics.csv")
        if on_metrics is not None:
            on_metrics(monitor.history, step >= config.total_steps)
    shown = progress if progress is not None else _Silent()
    # --online-knn: the splits are opened here, so that a missing test split stops the run
    # before its first step
    knn = (
        OnlineKnn(
            config.dataset,
            data_root=config.data_root,
            val_root=config.val_root,
            image_size=config.image_size,
            device=device,
            autocast=parts.autocast,
            channels_last=parts.channels_last,
        )
        if config.online_knn
        else None
    )

    def knn_due(epoch_done: int) -> bool:
        every = config.online_knn
        return bool(every) and (epoch_done % every == 0 or step >= config.total_steps)

    def knn_row() -> dict[str, float]:
        assert knn is not None
        return {KNN_COLUMN: knn(parts.model.backbone)}

    def take(row: dict[str, Any]) -> float:
        for at, values in monitor.row_steps:
            loss = values["loss"]
            if not math.isfinite(loss):
                kept = (
                    f"the last good checkpoint {last_path} is kept"
                    if last_path and last_path.exists()
                    else "no checkpoint was written yet"
                )
                raise UserError(
                    f"the loss became {loss} at step {at} (epoch {epoch + 1}); "
                    f"training stopped and {kept}. Lower --lr, raise --temperature, or use "
                    "--precision fp32."
                )
        shown.row(row)
        return row["seconds"]

    shown.start(total_steps=config.total_steps, done_steps=step, epochs=config.run_epochs)
    start_step, train_seconds, ckpt_seconds = step, 0.0, 0.0
    saved_step, first_epoch = step, True
    parts.net.train()
    while step < config.total_steps:
        sampler.set_epoch(epoch)
        monitor.restart_clock()  # the checkpoint written between epochs is not a step's time
        for batch in parts.loader:  # (index, view 1, ..., view V, label)
            images, labels = batch[1:-1], batch[-1]
            lr = lr_at(
                step,
                peak=config.peak_lr,
                warmup_steps=config.warmup_steps,
                total_steps=config.total_steps,
                schedule=config.schedule,
            )
            for group in optimizer.param_groups:
                group["lr"] = lr
            x = torch.cat(images).to(device, non_blocking=True)
            if parts.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            amp = parts.autocast
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                z = parts.net(x)
            z1, z2, *rest = z.float().chunk(len(images))
            g = gather_batch(z1, z2, labels.to(device, non_blocking=True) if supervised else None)
            # views 3..V (--views): gathered like the first two; none leaves the calls as they were
            more: dict[str, Any] = (
                {"extra_views": [gather_with_grad(r) for r in rest]} if rest else {}
            )
            # --queue: the keys queued by earlier steps are extra cross-view negatives (none yet
            # at the first step); this step's keys join the queue after the optimiser step
            negatives = parts.queue.negatives() if parts.queue is not None else None
            if negatives is not None:
                more["queue"] = negatives
            keys = _keys(parts, x, g.z1, g.z2) if config.queue else None
            if objective is not None:
                loss, main, vrn = objective(g.z1, g.z2, g.labels, **more)
                terms = {"loss": loss, "contrastive": main, "vrn": vrn}
            else:
                main = loss_fn(g.z1, g.z2, g.labels, **more)
                loss, terms = main, {"loss": main, "contrastive": main}
                if not vrn_from_stats:
                    with torch.no_grad():  # logged only
                        more_d = {k: [r.detach() for r in vs] for k, vs in more.items()}
                        terms["vrn"] = vrn_fn(g.z1.detach(), g.z2.detach(), **more_d)
            optimizer.zero_grad(set_to_none=True)
            parts.scaler.scale(loss).backward()
            parts.scaler.step(optimizer)
            parts.scaler.update()
            step += 1
            # statistics of the gathered global batch under DDP: every rank logs the same row
            monitor.update(g.z1, g.z2, lr=lr, queue=negatives, **terms)
            if keys is not None:  # after the statistics read the queue this step used
                if parts.queue is None:
                    parts.queue = KeyQueue(config.queue, keys[0].shape[1]).to(device)
                parts.queue.push(*keys)
            shown.step(step, epoch + 1)
            if (row := monitor.flush(epoch=epoch + 1)) is not None:
                train_seconds += take(row)
            if step >= config.total_steps:
                break
        extra = knn_row if knn_due(epoch + 1) else None
        if (row := monitor.flush(force=True, epoch=epoch + 1, extra=extra)) is not None:
            train_seconds += take(row)
        epoch += 1
        due = (
            first_epoch
            or step >= config.total_steps
            or (config.save_every and epoch % config.save_every == 0)
            or step - saved_step >= CHECKPOINT_STEPS
        )
        first_epoch = False
        if save_dir is not None and due:
            t1 = time.perf_counter()
            _save(config, data, parts, save_dir, epoch, step, monitor, env)
            if on_metrics is not None:
                on_metrics(monitor.history, step >= config.total_steps)
            saved_step = step
            ckpt_seconds += time.perf_counter() - t1
    return FitResult(
        epochs=epoch,
        steps=step,
        steps_this_run=step - start_step,
        train_seconds=train_seconds,
        checkpoint_seconds=ckpt_seconds,
        history=monitor.history,
        checkpoint=last_path if writes else None,
        complete=step >= config.total_steps,
    )
