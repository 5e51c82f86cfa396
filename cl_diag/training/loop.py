"""The training loop: one function, :func:`fit`, that a reader can hold in their head.

Per step::

    lr      = lr_at(step)                           # linear warm-up, then cosine (or constant)
    z1, z2  = model(cat(view1, view2)).chunk(2)     # one forward pass, AMP on CUDA
    g       = gather_batch(z1, z2)                  # the global batch under DDP (identity otherwise)
    loss    = LOSSES[loss](g.z1, g.z2) + lambda * LOSSES["vrn"](g.z1, g.z2, delta, power)
    backward, optimizer step

Per epoch: the in-batch pair statistics and the loss means go to ``metrics.csv``, and
``last.pt`` is written atomically (plus ``epoch_NNNN.pt`` every ``save_every`` epochs).

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
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler

from cl_diag.errors import UserError
from cl_diag.losses import LOSSES, build_loss
from cl_diag.losses.distributed import gather_batch
from cl_diag.io.atomic import atomic_write_bytes
from cl_diag.models import ContrastiveModel, FreeEmbeddings, is_convolutional
from cl_diag.training.checkpoint import (
    FORMAT,
    FORMAT_VERSION,
    capture_rng_state,
    library_versions,
    restore_rng_state,
    save_checkpoint,
)
from cl_diag.training.data import TrainingData

__all__ = [
    "DistEnv",
    "EpochBatchSampler",
    "PairStats",
    "FitResult",
    "METRIC_COLUMNS",
    "distributed_env",
    "close_distributed",
    "lr_at",
    "make_optimizer",
    "amp_dtype",
    "fit",
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


def distributed_env(device: str) -> DistEnv:
    """The device, and (under ``torchrun``) an initialised process group.

    ``device`` is ``auto`` (CUDA when present), ``cpu`` or ``cuda``. torchrun's
    ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` select DDP (env:// init; NCCL on CUDA, gloo on CPU).
    """
    if device not in ("auto", "cpu", "cuda"):
        raise UserError(f"--device {device!r} is not one of auto, cpu, cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda was given but torch sees no CUDA device; use --device cpu (or auto).")
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistEnv(torch.device("cuda" if use_cuda else "cpu"))
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
        g = torch.Generator().manual_seed(int(np.random.SeedSequence([self.seed, self.epoch]).generate_state(1)[0]))
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


def lr_at(step: int, *, peak: float, warmup_steps: int, total_steps: int, schedule: str = "cosine") -> float:
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


def make_optimizer(name: str, params, *, lr: float, momentum: float, weight_decay: float) -> torch.optim.Optimizer:
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
    negative cosine similarities over all batches of an epoch.

    Per batch of normalised ``u = z1/|z1|``, ``v = z2/|z2|``: positives ``u_i.v_i`` (B),
    cross-view negatives ``u_i.v_j, i != j`` (B(B-1)), within-view negatives ``u_i.u_j``
    and ``v_i.v_j, i < j`` (B(B-1)). The epoch keeps, per kind, the count and the float64
    sums of s and s^2 (read off the Gram matrices without extracting the pairs), on the
    device, so no step waits for the host; then mean = S1/n and var = S2/n - mean^2.
    Similarities lie in [-1, 1], so in float64 the cancellation in S2/n - mean^2 costs at
    most ~1e-16 * E[s^2] / var relative error: negligible for any variance above 1e-12.
    """

    KINDS = ("pos", "cross_neg", "within_neg")

    def __init__(self):
        self.count = {k: 0 for k in self.KINDS}
        self.sums: torch.Tensor | None = None  # (3 kinds, [sum s, sum s^2]) in float64

    @torch.no_grad()
    def update(self, z1: torch.Tensor, z2: torch.Tensor) -> None:
        u = nn.functional.normalize(z1.float(), dim=1)
        v = nn.functional.normalize(z2.float(), dim=1)
        b = u.shape[0]
        # Gram matrices (cross u.v, within u.u, within v.v) and, per matrix, the sums of
        # s and s^2 over all entries and over the diagonal; off-diagonal = all - diagonal.
        gram = torch.stack([u @ v.T, u @ u.T, v @ v.T]).double()
        diag = gram.diagonal(dim1=1, dim2=2)
        every = torch.stack([gram.sum((1, 2)), (gram * gram).sum((1, 2))], dim=1)  # (3, 2)
        on_diag = torch.stack([diag.sum(1), (diag * diag).sum(1)], dim=1)
        off_diag = every - on_diag
        # within-view pairs i < j are half of each symmetric matrix's off-diagonal
        batch = torch.stack([on_diag[0], off_diag[0], (off_diag[1] + off_diag[2]) / 2])
        self.sums = batch if self.sums is None else self.sums + batch
        for k, n in zip(self.KINDS, (b, b * (b - 1), b * (b - 1))):
            self.count[k] += n

    def result(self) -> dict[str, float]:
        out = {}
        sums = self.sums.tolist() if self.sums is not None else None
        for i, k in enumerate(self.KINDS):
            n = self.count[k]
            if not n:
                out[f"{k}_mean"] = out[f"{k}_var"] = float("nan")
                continue
            mean = sums[i][0] / n
            out[f"{k}_mean"] = mean
            out[f"{k}_var"] = max(0.0, sums[i][1] / n - mean * mean)
        return out


# --------------------------------------------------------------------------- progress


class _Progress:
    """A rich bar on a TTY; otherwise (or with ``quiet``) one plain line per epoch."""

    def __init__(self, enabled: bool, rich: bool, total_steps: int, epochs: int, start_step: int):
        self.enabled, self.epochs = enabled, epochs
        self.bar = None
        if enabled and rich:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("epoch {task.fields[epoch]}/" + str(epochs)),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(
                    "loss {task.fields[loss]:.4f}  vrn {task.fields[vrn]:.4g}  "
                    "lr {task.fields[lr]:.3g}  {task.fields[ips]:.0f} img/s"
                ),
                TimeRemainingColumn(),
            )
            self.task = self.bar.add_task(
                "train", total=total_steps, completed=start_step, epoch=0, loss=float("nan"), vrn=float("nan"), lr=0.0, ips=0.0
            )

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def step(self, epoch: int, loss: float, vrn: float, lr: float, ips: float) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=1, epoch=epoch + 1, loss=loss, vrn=vrn, lr=lr, ips=ips)

    def epoch_end(self, row: dict[str, float]) -> None:
        if self.enabled and self.bar is None:
            print(
                f"epoch {row['epoch']}/{self.epochs}  step {row['step']}  loss {row['loss']:.4f}  "
                f"vrn {row['vrn']:.4g}  lr {row['lr']:.4g}  {row['images_per_s']:.0f} img/s",
                flush=True,
            )


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


def fit(
    config: Any,
    model: ContrastiveModel,
    data: TrainingData,
    out_dir: Path | None,
    *,
    env: DistEnv,
    resume: dict[str, Any] | None = None,
    config_record: dict[str, Any] | None = None,
    peak_lr: float,
    delta: float,
) -> FitResult:
    """Train ``model`` on ``data`` as ``config`` (a resolved ``TrainConfig``) says.

    ``out_dir`` receives ``last.pt``, ``metrics.csv`` (rank 0 only; None writes nothing).
    ``resume`` is a loaded checkpoint to continue from; ``config_record`` the dict stored
    as the checkpoint's ``config``; ``peak_lr`` the learning rate after warm-up (batch
    scaling applied); ``delta`` the VRN target similarity.
    """
    device = env.device
    channels_last = device.type == "cuda" and is_convolutional(model.arch)
    model.to(device)
    if channels_last:
        model.to(memory_format=torch.channels_last)
    if resume is not None:  # before DDP/compile wrap the module; every rank loads the same file
        model.backbone.load_state_dict(resume["backbone"])
        model.projector.load_state_dict(resume["projector"])
    if config.sync_bn and env.distributed:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    net: nn.Module = model
    if env.distributed:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if config.compile:
        net = torch.compile(net)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed input shapes; bit-exactness is a CPU promise

    optimizer = make_optimizer(
        config.optimizer, model.parameters(), lr=peak_lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    autocast_dtype = amp_dtype(config.precision, device)
    scaler = torch.amp.GradScaler(device.type, enabled=autocast_dtype == torch.float16)

    sampler = EpochBatchSampler(data.n_train, config.batch_size, config.seed, env.rank, env.world)
    steps_per_epoch = len(sampler)
    total_steps = config.steps if config.steps else config.epochs * steps_per_epoch
    epochs = math.ceil(total_steps / steps_per_epoch)
    warmup_steps = round(config.warmup_epochs * steps_per_epoch)
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

    # Nothing below draws from the global RNGs (data randomness is per sample, the initial
    # weights come from build_model's seed); the checkpoint still records and restores
    # them so that an extension that does draw stays reproducible across a resume.
    epoch, step, history = 0, 0, []
    if resume is not None:
        optimizer.load_state_dict(resume["optimizer"])
        if resume.get("scaler"):
            scaler.load_state_dict(resume["scaler"])
        epoch, step, history = int(resume["epoch"]), int(resume["step"]), list(resume.get("metrics", []))
        restore_rng_state(resume["rng"], loader_gen)

    # Built once: the hyper-parameters are checked here, not on every step.
    loss_fn = build_loss(config.loss, **_loss_hparams(config)).to(device)
    vrn_fn = build_loss("vrn", delta=delta, power=float(config.vrn_power))
    lam = float(config.vrn)
    supervised = config.loss in SUPERVISED_LOSSES
    writes = out_dir is not None and env.is_main
    last_path = None if out_dir is None else Path(out_dir) / "last.pt"

    def checkpoint() -> dict[str, Any]:
        ck = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "config": dict(config_record or {}),
            "dataset": data.dataset,
            "n_train": data.n_train,
            "split": data.split,
            "backbone": model.backbone.state_dict(),
            "projector": model.projector.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": {
                "kind": f"warmup-{config.schedule}",
                "step": step,
                "peak_lr": peak_lr,
                "warmup_steps": warmup_steps,
                "total_steps": total_steps,
            },
            "scaler": scaler.state_dict() if scaler.is_enabled() else None,
            "epoch": epoch,
            "step": step,
            "complete": step >= total_steps,
            "rng": capture_rng_state(loader_gen),
            "metrics": history,
            "versions": library_versions(),
        }
        if isinstance(model.backbone, FreeEmbeddings):
            z1, z2 = model.backbone.views()
            ck["embeddings"] = {"z1": z1, "z2": z2}
        return ck

    show = env.is_main and not config.quiet
    progress = _Progress(env.is_main, show and sys.stdout.isatty(), total_steps, epochs, step)
    start_step, train_seconds, ckpt_seconds = step, 0.0, 0.0
    net.train()
    with progress:
        while step < total_steps:
            sampler.set_epoch(epoch)
            stats = PairStats()
            sums = {"loss": 0.0, "contrastive": 0.0, "vrn": 0.0}
            n_steps, n_images, lr = 0, 0, 0.0
            t0 = time.perf_counter()
            for _, v1, v2, labels in loader:
                lr = lr_at(step, peak=peak_lr, warmup_steps=warmup_steps, total_steps=total_steps, schedule=config.schedule)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                x = torch.cat([v1, v2]).to(device, non_blocking=True)
                if channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                with torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype else nullcontext():
                    z = net(x)
                z1, z2 = z.float().chunk(2)
                g = gather_batch(z1, z2, labels.to(device, non_blocking=True) if supervised else None)
                main = loss_fn(g.z1, g.z2, g.labels)
                if lam:
                    vrn = vrn_fn(g.z1, g.z2)
                    loss = main + lam * vrn
                else:
                    with torch.no_grad():  # logged only
                        vrn = vrn_fn(g.z1.detach(), g.z2.detach())
                    loss = main
                value, main_value, vrn_value = torch.stack([loss.detach(), main.detach(), vrn.detach()]).tolist()
                if not math.isfinite(value):
                    kept = f"the last good checkpoint {last_path} is kept" if last_path and last_path.exists() else "no checkpoint was written yet"
                    raise UserError(
                        f"the loss became {value} at step {step + 1} (epoch {epoch + 1}); training stopped and "
                        f"{kept}. Lower --lr, raise --temperature, or use --precision fp32."
                    )
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                stats.update(z1.detach(), z2.detach())
                step += 1
                n_steps += 1
                n_images += v1.shape[0] * env.world
                sums["loss"] += value
                sums["contrastive"] += main_value
                sums["vrn"] += vrn_value
                progress.step(epoch, value, sums["vrn"] / n_steps, lr, n_images / (time.perf_counter() - t0))
                if step >= total_steps:
                    break
            seconds = time.perf_counter() - t0
            train_seconds += seconds
            epoch += 1
            row = {"epoch": epoch, "step": step, "lr": lr, "images_per_s": n_images / seconds, "seconds": seconds}
            row.update({k: v / max(1, n_steps) for k, v in sums.items()})
            row.update(stats.result())
            history.append(row)
            progress.epoch_end(row)
            if writes:
                t1 = time.perf_counter()
                ck = checkpoint()
                save_checkpoint(last_path, ck)
                if config.save_every and (epoch % config.save_every == 0):
                    save_checkpoint(Path(out_dir) / f"epoch_{epoch:04d}.pt", ck)
                _write_metrics(Path(out_dir) / "metrics.csv", history)
                ckpt_seconds += time.perf_counter() - t1
    return FitResult(
        epochs=epoch,
        steps=step,
        steps_this_run=step - start_step,
        train_seconds=train_seconds,
        checkpoint_seconds=ckpt_seconds,
        history=history,
        checkpoint=last_path if writes else None,
        complete=step >= total_steps,
    )
