"""The training loop: one function, :func:`fit`, that a reader can hold in their head.

Per step::

    lr      = lr_at(step)                           # linear warm-up, then cosine (or constant)
    z1, z2  = model(cat(view1, view2)).chunk(2)     # one forward pass, AMP on CUDA
    g       = gather_batch(z1, z2)                  # the global batch under DDP (else identity)
    loss    = LOSSES[loss](g.z1, g.z2) + lambda * LOSSES["vrn"](g.z1, g.z2, delta, power)
    backward, optimizer step
    meter.add(loss terms, g.z1, g.z2)               # on the device: no wait for the host

Every ``log_every`` steps and at each epoch end (one metrics *row*) the loop syncs with the
device once: it reads the row's loss terms and in-batch pair statistics, stops if the loss
stopped being finite (naming the step), appends the row to the history (``metrics.csv``) and
hands it to the ``progress`` callback the caller supplied. At each epoch end ``last.pt`` is
written atomically (plus ``epoch_NNNN.pt`` every ``save_every`` epochs).

Reproducibility. The batches of epoch ``e`` are a permutation drawn from a generator
seeded with ``(seed, e)`` and each sample's augmentation is seeded from ``(seed, e,
index)`` (:class:`cl_diag.training.data.TwoViews`), so nothing about the data depends on
state carried across epochs. Checkpoints are written at epoch ends; a run killed in the
middle of an epoch resumes from the last epoch end and, on CPU, ends with bit-identical
weights. Under DDP rank r takes the r-th contiguous slice of each *global* batch, so the
gathered batch is exactly the single-process batch.

The loss library computes every loss in fp32 (also under autocast), and
:func:`cl_diag.losses.distributed.gather_batch` gives each rank the global batch with
gradients (see its docstring for why no rescaling by world size is needed).
"""

from __future__ import annotations

import csv
import io
import math
import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler

from cl_diag.errors import UserError
from cl_diag.io.atomic import atomic_write_bytes
from cl_diag.losses import LOSSES, build_loss
from cl_diag.losses.distributed import gather_batch
from cl_diag.models import ContrastiveModel, FreeEmbeddings, is_convolutional
from cl_diag.models.checkpoints import FORMAT, FORMAT_VERSION
from cl_diag.training.checkpoint import (
    capture_rng_state,
    library_versions,
    restore_rng_state,
    save_checkpoint,
)
from cl_diag.training.data import TrainingData

__all__ = [
    "METRIC_COLUMNS",
    "DistEnv",
    "EpochBatchSampler",
    "FitProgress",
    "FitResult",
    "PairStats",
    "amp_dtype",
    "close_distributed",
    "distributed_env",
    "fit",
    "lr_at",
    "make_optimizer",
]

METRIC_COLUMNS = (
    "epoch",
    "step",
    "loss",
    "contrastive",
    "vrn",
    "lr",
    "images_per_s",
    "seconds",
    "pos_mean",
    "pos_var",
    "cross_neg_mean",
    "cross_neg_var",
    "within_neg_mean",
    "within_neg_var",
)

# Only supcon is supervised by design. The other label-reading losses (triplet,
# contrastive) get no labels, so positives stay "the other view of the same instance".
SUPERVISED_LOSSES = ("supcon",)


# --------------------------------------------------------------------------- devices, DDP


@dataclass
class DistEnv:
    device: torch.device
    rank: int = 0
    world: int = 1

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def distributed_env(device_type: str) -> DistEnv:
    """The device, and (under ``torchrun``) an initialised process group.

    ``device_type`` is ``cpu`` or ``cuda``, as the orchestration resolved ``--device``.
    torchrun's ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` select DDP (env:// init; NCCL on CUDA,
    gloo on CPU).
    """
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"device_type must be 'cpu' or 'cuda', got {device_type!r}")
    use_cuda = device_type == "cuda"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistEnv(torch.device(device_type))
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo", init_method="env://")
    dev = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    return DistEnv(dev, dist.get_rank(), dist.get_world_size())


def close_distributed(env: DistEnv) -> None:
    if env.distributed:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def amp_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``--precision`` (None: full fp32).

    ``auto``: bf16 on CUDA devices that support it, fp16 (with a GradScaler) on older
    CUDA devices, fp32 on CPU.
    """
    if precision == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


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


# --------------------------------------------------------------------------- pair statistics


class PairStats:
    """Mean and variance (population) of positive, cross-view negative and within-view
    negative cosine similarities over all the batches given to :meth:`update`.

    Per batch of normalised ``u = z1/|z1|``, ``v = z2/|z2|``: positives ``u_i.v_i`` (B),
    cross-view negatives ``u_i.v_j, i != j`` (B(B-1)), within-view negatives ``u_i.u_j``
    and ``v_i.v_j, i < j`` (B(B-1)). Then mean = S1/n and var = S2/n - mean^2 from the counts
    and the float64 sums of s and s^2 per kind. Similarities lie in [-1, 1], so in float64 the
    cancellation in S2/n - mean^2 costs at most ~1e-16 * E[s^2] / var relative error:
    negligible for any variance above 1e-12.

    What a step adds, on the device (no step waits for the host), is four 2 x 2 float64
    matrices over the views (p_0, p_1) = (u, v): for each pair of views (k, l), the sums of
    s = p_k,i . p_l,j and of s^2 over all B^2 pairs (i, j), and over the B pairs i = j. Each
    kind is read off them once, in :meth:`result` (e.g. cross-view negatives = all (0, 1)
    pairs minus the positives). The all-pairs sums never need a B x B matrix when d is small:
    sum_ij u_i.v_j = (sum_i u_i).(sum_j v_j) and sum_ij (u_i.v_j)^2 = ||U V^T||_F^2 =
    <U^T U, V^T V>_F, from d x d matrices (2 B d^2 multiply-adds instead of 3 B^2 d).
    """

    KINDS = ("pos", "cross_neg", "within_neg")

    def __init__(self) -> None:
        self.count = {k: 0 for k in self.KINDS}
        # float64 (4, 2, 2): [all-pairs sum s, all-pairs sum s^2, i = j sum s, i = j sum s^2]
        self.sums: torch.Tensor | None = None

    @torch.no_grad()
    def update(self, z1: torch.Tensor, z2: torch.Tensor) -> None:
        p = nn.functional.normalize(torch.stack([z1, z2]).float(), dim=2)  # (2, B, d): u, v
        b, d = p.shape[1:]
        if 2 * d <= 3 * b:
            rows = torch.einsum("kbd,lbd->klb", p, p).double()  # (2, 2, B): p_k,i . p_l,i
            total = p.sum(1).double()
            grams = (p.transpose(1, 2) @ p).double().reshape(2, -1)  # U^T U and V^T V
            every, every_sq = total @ total.T, grams @ grams.T
        else:
            gram = (p.unsqueeze(1) @ p.unsqueeze(0).transpose(2, 3)).double()  # (2, 2, B, B)
            rows = gram.diagonal(dim1=2, dim2=3)
            every, every_sq = gram.sum((2, 3)), (gram * gram).sum((2, 3))
        batch = torch.stack([every, every_sq, rows.sum(2), (rows * rows).sum(2)])
        self.sums = batch if self.sums is None else self.sums + batch
        for k, n in zip(self.KINDS, (b, b * (b - 1), b * (b - 1)), strict=True):
            self.count[k] += n

    def _kind_sums(self) -> dict[str, tuple[float, float]]:
        """``{kind: (sum s, sum s^2)}`` from the accumulated moments (one host sync)."""
        assert self.sums is not None, "no batch was seen"
        every, every_sq, rows, rows_sq = self.sums.tolist()
        return {
            "pos": (rows[0][1], rows_sq[0][1]),
            "cross_neg": (every[0][1] - rows[0][1], every_sq[0][1] - rows_sq[0][1]),
            # pairs i < j: half of each view's off-diagonal (a symmetric matrix)
            "within_neg": (
                (every[0][0] - rows[0][0] + every[1][1] - rows[1][1]) / 2,
                (every_sq[0][0] - rows_sq[0][0] + every_sq[1][1] - rows_sq[1][1]) / 2,
            ),
        }

    def result(self, vrn_delta: float | None = None) -> dict[str, float]:
        """``{kind_mean, kind_var}`` (one host sync); with ``vrn_delta`` also ``vrn``.

        ``vrn`` is the VRN term with p = 2 (Lee et al., ICML 2025, Def. 5.7) over the cross-view
        negatives seen: mean (s - delta)^2 = var + (mean - delta)^2. Over batches of one size
        it equals the mean of the per-batch VRN values, so the trainer logs it without computing
        the loss.
        """
        sums = self._kind_sums() if self.sums is not None else {}
        out = {}
        for k in self.KINDS:
            n = self.count[k]
            if not n:
                out[f"{k}_mean"] = out[f"{k}_var"] = float("nan")
                continue
            s1, s2 = sums[k]
            mean = s1 / n
            out[f"{k}_mean"] = mean
            out[f"{k}_var"] = max(0.0, s2 / n - mean * mean)
        if vrn_delta is not None:
            n = self.count["cross_neg"]
            out["vrn"] = float("nan")
            if n:
                s1, s2 = sums["cross_neg"]
                out["vrn"] = (s2 - 2 * vrn_delta * s1) / n + vrn_delta**2
        return out


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


class _Silent:
    """No progress display (the library's default: only the CLI shows progress)."""

    def start(self, *, total_steps: int, done_steps: int, epochs: int) -> None:
        pass

    def step(self, step: int, epoch: int) -> None:
        pass

    def row(self, row: dict[str, float]) -> None:
        pass


class _RowMeter:
    """The sums of one metrics row, kept on the device.

    Per step the loss terms (loss, contrastive and, when computed, vrn) go into one row of a
    small buffer and the embeddings into a :class:`PairStats`; :meth:`close` reads both with
    one host sync and makes the metrics row. The per-step values are summed on the host in
    float64 in step order, as they always were, so metrics.csv keeps its values.
    """

    def __init__(
        self, capacity: int, device: torch.device, vrn_delta: float | None, last_path: Path | None
    ) -> None:
        self.values = torch.zeros(capacity, 3, device=device)
        self.vrn_delta = vrn_delta  # not None: the vrn column comes from the pair statistics
        self.last_path = last_path
        self.reset(0)

    def reset(self, step: int) -> None:
        self.first_step, self.n, self.images, self.lr = step, 0, 0, 0.0
        self.stats = PairStats()
        self.t0 = time.perf_counter()

    def add(
        self,
        terms: list[torch.Tensor],
        z1: torch.Tensor,
        z2: torch.Tensor,
        *,
        images: int,
        lr: float,
    ) -> None:
        self.values[self.n, : len(terms)] = torch.stack(terms).detach()
        self.stats.update(z1.detach(), z2.detach())
        self.n, self.images, self.lr = self.n + 1, self.images + images, lr

    def close(self, epoch: int) -> dict[str, float]:
        """The row of the steps since the last close (``epoch`` 1-based); starts the next row."""
        values = self.values[: self.n].tolist()  # the host sync
        stats = self.stats.result(vrn_delta=self.vrn_delta)
        seconds = time.perf_counter() - self.t0
        for i, (loss, _, _) in enumerate(values):
            if not math.isfinite(loss):
                last = self.last_path
                kept = (
                    f"the last good checkpoint {last} is kept"
                    if last and last.exists()
                    else "no checkpoint was written yet"
                )
                raise UserError(
                    f"the loss became {loss} at step {self.first_step + i + 1} (epoch {epoch}); "
                    f"training stopped and {kept}. Lower --lr, raise --temperature, or use "
                    "--precision fp32."
                )
        sums = [0.0, 0.0, 0.0]
        for step_values in values:
            for k, value in enumerate(step_values):
                sums[k] += value
        row = {
            "epoch": epoch,
            "step": self.first_step + self.n,
            "lr": self.lr,
            "images_per_s": self.images / seconds,
            "seconds": seconds,
        }
        row.update(
            {
                k: s / max(1, self.n)
                for k, s in zip(("loss", "contrastive", "vrn"), sums, strict=True)
            }
        )
        row.update(stats)
        self.reset(self.first_step + self.n)
        return row


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


def _loss_hparams(config: Any) -> dict[str, Any]:
    names = LOSSES[config.loss].hyperparameter_names
    return {k: getattr(config, k) for k in names if getattr(config, k, None) is not None}


def _write_metrics(path: Path, history: list[dict[str, float]]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=METRIC_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in history:
        writer.writerow({k: row[k] for k in METRIC_COLUMNS})
    atomic_write_bytes(path, buf.getvalue().encode())


@dataclass
class _Parts:
    """What a run trains with: the model and the module to call, optimiser, AMP, batches."""

    model: ContrastiveModel
    net: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    autocast: torch.dtype | None
    channels_last: bool
    sampler: EpochBatchSampler
    loader: DataLoader
    loader_gen: torch.Generator


@contextmanager
def _restoring(what: str, config: Any) -> Iterator[None]:
    """A resumed checkpoint whose ``what`` passed the schema check but does not fit this run
    (a crafted or damaged file): a UserError naming the part, not torch's traceback."""
    try:
        yield
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as exc:
        text = str(exc).strip().splitlines()
        raise UserError(
            f"--resume {config.resume}: its {what} does not fit the run it describes "
            f"({text[0] if text else type(exc).__name__}); the checkpoint is damaged. Give an "
            "intact last.pt, or train the run again."
        ) from None


def _build(
    config: Any,
    model: ContrastiveModel,
    data: TrainingData,
    env: DistEnv,
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
    net: nn.Module = model
    if env.distributed:
        ids = [device.index] if device.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    if config.compile:
        # torch.compile of a module returns a module (OptimizedModule); its stub says Callable
        net = cast(nn.Module, torch.compile(net))
    if device.type == "cuda":
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
    sampler = EpochBatchSampler(data.n_train, config.batch_size, config.seed, env.rank, env.world)
    loader_gen = torch.Generator().manual_seed(config.seed)
    loader = DataLoader(
        data.train_set,
        batch_sampler=sampler,
        num_workers=config.workers,
        pin_memory=device.type == "cuda",
        generator=loader_gen,
        worker_init_fn=_seed_worker,
        persistent_workers=config.workers > 0,
    )
    # Nothing in the loop draws from the global RNGs (data randomness is per sample, the initial
    # weights come from build_model's seed); the checkpoint still records and restores
    # them so that an extension that does draw stays reproducible across a resume.
    if resume is not None:
        with _restoring("optimizer state", config):
            optimizer.load_state_dict(resume["optimizer"])
        with _restoring("AMP scaler state", config):
            if resume.get("scaler"):
                scaler.load_state_dict(resume["scaler"])
        with _restoring("random generator states", config):
            restore_rng_state(resume["rng"], loader_gen)
    return _Parts(
        model, net, optimizer, scaler, autocast, channels_last, sampler, loader, loader_gen
    )


def _save(
    config: Any,
    data: TrainingData,
    parts: _Parts,
    out_dir: Path,
    epoch: int,
    step: int,
    history: list[dict[str, float]],
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
        "metrics": history,
        "versions": library_versions(),
    }
    if isinstance(model.backbone, FreeEmbeddings):
        z1, z2 = model.backbone.views()
        ck["embeddings"] = {"z1": z1, "z2": z2}
    save_checkpoint(out_dir / "last.pt", ck)
    if config.save_every and (epoch % config.save_every == 0):
        save_checkpoint(out_dir / f"epoch_{epoch:04d}.pt", ck)
    _write_metrics(out_dir / "metrics.csv", history)


def fit(
    config: Any,
    model: ContrastiveModel,
    data: TrainingData,
    out_dir: Path | None,
    *,
    env: DistEnv,
    resume: dict[str, Any] | None = None,
    progress: FitProgress | None = None,
) -> FitResult:
    """Train ``model`` on ``data`` as ``config`` says.

    ``config`` is a :class:`~cl_diag.orchestration.train.ResolvedTrainConfig` (its options,
    ``peak_lr``, ``warmup_steps``, ``total_steps``, ``run_epochs``, ``autocast`` and
    ``record()``, the dict stored as the checkpoint's ``config``). ``out_dir`` receives
    ``last.pt`` and ``metrics.csv`` (rank 0 only; None writes nothing). ``resume`` is a loaded
    checkpoint to continue from; ``progress`` is told about steps and rows.
    """
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
    # With p = 2 and no VRN in the loss, the logged VRN comes from the pair statistics
    # (var + (mean - delta)^2): no extra B x B product per step.
    vrn_from_stats = not lam and config.vrn_power == 2.0
    supervised = config.loss in SUPERVISED_LOSSES
    save_dir = Path(out_dir) if out_dir is not None and env.is_main else None
    writes = save_dir is not None
    last_path = None if out_dir is None else Path(out_dir) / "last.pt"
    # a row ends every log_every steps (0: none inside an epoch) and at each epoch end
    every = config.log_every
    capacity = min(every or len(sampler), len(sampler))
    meter = _RowMeter(capacity, device, config.vrn_delta if vrn_from_stats else None, last_path)

    shown = progress if progress is not None else _Silent()

    def close_row() -> float:
        row = meter.close(epoch + 1)
        history.append(row)
        shown.row(row)
        return row["seconds"]

    shown.start(total_steps=config.total_steps, done_steps=step, epochs=config.run_epochs)
    start_step, train_seconds, ckpt_seconds = step, 0.0, 0.0
    parts.net.train()
    while step < config.total_steps:
        sampler.set_epoch(epoch)
        meter.reset(step)
        for _, v1, v2, labels in parts.loader:
            lr = lr_at(
                step,
                peak=config.peak_lr,
                warmup_steps=config.warmup_steps,
                total_steps=config.total_steps,
                schedule=config.schedule,
            )
            for group in optimizer.param_groups:
                group["lr"] = lr
            x = torch.cat([v1, v2]).to(device, non_blocking=True)
            if parts.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            amp = parts.autocast
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                z = parts.net(x)
            z1, z2 = z.float().chunk(2)
            g = gather_batch(z1, z2, labels.to(device, non_blocking=True) if supervised else None)
            main = loss_fn(g.z1, g.z2, g.labels)
            if lam:
                vrn = vrn_fn(g.z1, g.z2)
                loss = main + lam * vrn
                terms = [loss, main, vrn]
            else:
                loss, terms = main, [main, main]
                if not vrn_from_stats:
                    with torch.no_grad():  # logged only
                        terms.append(vrn_fn(g.z1.detach(), g.z2.detach()))
            optimizer.zero_grad(set_to_none=True)
            parts.scaler.scale(loss).backward()
            parts.scaler.step(optimizer)
            parts.scaler.update()
            step += 1
            # statistics of the gathered global batch under DDP: every rank logs the same row
            meter.add(terms, g.z1, g.z2, images=v1.shape[0] * env.world, lr=lr)
            shown.step(step, epoch + 1)
            if every and step % every == 0:
                train_seconds += close_row()
            if step >= config.total_steps:
                break
        if meter.n:
            train_seconds += close_row()
        epoch += 1
        if save_dir is not None:
            t1 = time.perf_counter()
            _save(config, data, parts, save_dir, epoch, step, history)
            ckpt_seconds += time.perf_counter() - t1
    return FitResult(
        epochs=epoch,
        steps=step,
        steps_this_run=step - start_step,
        train_seconds=train_seconds,
        checkpoint_seconds=ckpt_seconds,
        history=history,
        checkpoint=last_path if writes else None,
        complete=step >= config.total_steps,
    )
