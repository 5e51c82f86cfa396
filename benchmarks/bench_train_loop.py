"""Steps/s of cl-diag's training loop against a minimal hand-written PyTorch loop, and the cost of --vrn.

Both loops run in this one process on the same model (same initial weights), the same
loss, the same batch size and the same dataset object, with the same DataLoader settings
(workers 0 on CPU). The hand-written loop is the floor: forward, loss, backward, step,
nothing else. cl-diag's loop adds the per-step lr schedule, the NaN check, the logged VRN
value, the in-batch pair statistics and the progress bookkeeping. Checkpoint writes (once
per epoch) are timed separately.

Targets (issue 4): cl-diag / hand-written >= 0.95; --vrn 30 costs < 5 % over no VRN.

    python benchmarks/bench_train_loop.py                      # digits, real augmentation
    python benchmarks/bench_train_loop.py --data cached        # pre-made views: loop overhead only
    python benchmarks/bench_train_loop.py --data cached --device cuda --arch resnet18-cifar \
        --batch-size 256 --epochs 3 --num-samples 25600        # GPU images/s, AMP on

Each measurement is repeated (--repeats) in interleaved order and the best time kept,
which filters out interference from other processes on a shared machine.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

from cl_diag.losses import LOSSES
from cl_diag.orchestration.train import TrainConfig, resolve_config
from cl_diag.training.data import TrainingData, training_data
from cl_diag.training.loop import DistEnv, EpochBatchSampler, amp_dtype, fit
from cl_diag.models import build_model


class CachedViews(Dataset):
    """Fixed random views (no augmentation): isolates the loop from the data pipeline."""

    def __init__(self, n: int, shape: tuple[int, ...], seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.v1 = torch.randn(n, *shape, generator=g)
        self.v2 = torch.randn(n, *shape, generator=g)

    def __len__(self) -> int:
        return len(self.v1)

    def __getitem__(self, key):
        i = key[1] if isinstance(key, tuple) else key
        return i, self.v1[i], self.v2[i], 0


def hand_loop(config: TrainConfig, data: TrainingData, device: torch.device, peak_lr: float) -> tuple[int, float]:
    """The minimal loop: returns (steps, seconds)."""
    model = build_model(config, seed=config.seed).to(device)
    channels_last = device.type == "cuda"
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=peak_lr, momentum=config.momentum, weight_decay=config.weight_decay)
    loss_fn = LOSSES[config.loss]
    dtype = amp_dtype(config.precision, device)
    sampler = EpochBatchSampler(data.n_train, config.batch_size, config.seed)
    loader = DataLoader(data.train_set, batch_sampler=sampler, num_workers=config.workers, pin_memory=device.type == "cuda")
    steps, seconds = 0, 0.0
    model.train()
    for epoch in range(config.epochs):
        sampler.set_epoch(epoch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _, v1, v2, _ in loader:
            x = torch.cat([v1, v2]).to(device, non_blocking=True)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                z = model(x)
            z1, z2 = z.float().chunk(2)
            loss = loss_fn(z1, z2, temperature=config.temperature)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds += time.perf_counter() - t0
    return steps, seconds


def cl_diag_loop(config: TrainConfig, data: TrainingData, device: torch.device, peak_lr: float) -> tuple[int, float, float]:
    """cl-diag's fit(): returns (steps, loop seconds, checkpoint seconds)."""
    model = build_model(config, seed=config.seed)
    delta = -1.0 / (data.n_train - 1)
    with tempfile.TemporaryDirectory() as out:
        r = fit(replace(config, vrn_delta=delta), model, data, out_dir=Path(out),
                env=DistEnv(device), config_record={}, peak_lr=peak_lr, delta=delta)
    return r.steps_this_run, r.train_seconds, r.checkpoint_seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", choices=["digits", "cached"], default="digits")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--arch", default="auto")
    ap.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--num-samples", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()

    device = torch.device(args.device)
    dataset = "digits" if args.arch in ("auto", "small-cnn") else "cifar10"
    base = resolve_config(TrainConfig(dataset=dataset, arch=args.arch, batch_size=args.batch_size, epochs=args.epochs,
                                      temperature=0.2, device=args.device, quiet=True))
    base = replace(base, workers=args.workers)
    if args.data == "digits":
        data = training_data("digits", seed=base.seed, num_samples=args.num_samples)
    else:
        shape = (1, 8, 8) if dataset == "digits" else (3, 32, 32)
        n = args.num_samples or (1347 if dataset == "digits" else 10 * args.batch_size)
        views = CachedViews(n, shape)
        data = TrainingData(dataset, views, torch.zeros(n, dtype=torch.long), n, 1)
    peak = base.lr * base.batch_size / 256
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}, arch {base.arch}, "
          f"data {args.data} (n={data.n_train}), batch {base.batch_size}, {args.epochs} epochs x {args.repeats} repeats, "
          f"precision {amp_dtype(base.precision, device) or 'fp32'}")

    # warm-up (allocator, kernels, first-touch of the data)
    hand_loop(replace(base, epochs=1), data, device, peak)

    best = {"hand": math.inf, "cl-diag": math.inf, "cl-diag --vrn 30": math.inf}
    steps = {}
    ckpt = {}
    for _ in range(args.repeats):
        s, t = hand_loop(base, data, device, peak)
        best["hand"], steps["hand"] = min(best["hand"], t), s
        s, t, c = cl_diag_loop(base, data, device, peak)
        best["cl-diag"], steps["cl-diag"], ckpt["cl-diag"] = min(best["cl-diag"], t), s, c
        s, t, c = cl_diag_loop(replace(base, vrn=30.0), data, device, peak)
        best["cl-diag --vrn 30"], steps["cl-diag --vrn 30"] = min(best["cl-diag --vrn 30"], t), s
    rate = {k: steps[k] / best[k] for k in best}
    for k in best:
        print(f"{k:18s} {rate[k]:8.2f} steps/s  {rate[k] * base.batch_size:9.0f} img/s")
    print(f"cl-diag / hand-written:      {rate['cl-diag'] / rate['hand']:.3f}   (target >= 0.95)")
    print(f"--vrn 30 overhead:           {100 * (rate['cl-diag'] / rate['cl-diag --vrn 30'] - 1):+.1f} %  (target < 5 %)")
    per_epoch = ckpt["cl-diag"] / args.epochs
    print(f"checkpoint write per epoch:  {1000 * per_epoch:.1f} ms (last.pt + metrics.csv, fsync'd)")


if __name__ == "__main__":
    main()
