"""Steps/s of cl-diag's training loop against a minimal hand-written PyTorch loop, and the cost of
--vrn.

Both loops run in this one process on the same model (same initial weights), the same
loss, the same batch size and the same dataset object, with the same DataLoader settings
(workers 0 on CPU). The hand-written loop is the floor: forward, loss, backward, step,
nothing else. cl-diag's loop adds the per-step lr schedule, the in-batch pair statistics
(on the device), the loss terms kept for metrics.csv and, once per epoch (--log-every 0, the
default), the host sync that reads them, checks the loss is finite and logs the VRN value
(from the pair statistics without --vrn). Checkpoint writes (once per epoch) are timed
separately.

Targets (issue 10): cl-diag / hand-written >= 0.98; --vrn 30 costs < 3 % over no VRN.

    python benchmarks/bench_train_loop.py                      # digits, real augmentation
    python benchmarks/bench_train_loop.py --data cached        # pre-made views: loop overhead only
    python benchmarks/bench_train_loop.py --data cached --device cuda --arch resnet18-cifar \
        --batch-size 256 --epochs 3 --num-samples 25600        # GPU images/s, AMP on

Two ratios are printed for each comparison: of whole loops (the best total over --repeats
rounds, each running the three loops in a new random order, so per-epoch costs such as the
host sync count) and of steady-state steps
(the median time of one step, pooled over the repeats; the first step of each epoch, which
also carries the previous epoch's end, is left out in both loops). The median is what a busy
shared machine cannot move much: interference from other processes lands on a few steps,
while a whole-loop total of a second or so can absorb it all. Where that machine
is busy (more runnable processes than cores), ``--clock cpu`` times both loops in CPU seconds
of this process instead of wall seconds, so that time spent waiting for a core is not counted
(use it with one thread, OMP_NUM_THREADS=1, and workers 0; on CUDA only wall time is honest).

Measured with torch 2.14 on 2 CPU cores (small CNN, batch 128, 10 steps an epoch), as
cl-diag / hand-written and the --vrn 30 overhead, whole loop | median step:

    quiet machine, 2 threads, digits (the default data)     0.986 | 1.009,  +0.4 % | +0.9 %
        python benchmarks/bench_train_loop.py --epochs 2 --repeats 5
    quiet machine, OMP_NUM_THREADS=1, cached views          0.977 | 0.987,  +2.6 % | +2.0 %
        python benchmarks/bench_train_loop.py --data cached --epochs 4 --repeats 12
    busy machine (load ~2.5), OMP_NUM_THREADS=1, cached     1.009 | 0.979,  +1.3 % | +0.5 %
        ... --data cached --epochs 4 --repeats 20 --clock cpu

Repeated runs move these by about +-0.01 (and the overhead by +-2 %). Cached views are the
hardest case (a ~33 ms step with nothing else in it): there the loop's own cost, nearly all the
in-batch pair statistics (two d x d products of the normalised views), is about 2 % of a step,
and --vrn 30 adds the VRN loss's forward and backward (a B x B product and its two gradients,
about 0.7 ms). With augmentation, a larger encoder or a GPU both are a smaller share.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time
import types
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

import cl_diag.measurement.monitor as monitor_module
import cl_diag.training.loop as loop_module
from cl_diag.losses import LOSSES
from cl_diag.models import build_model
from cl_diag.orchestration.train import ResolvedTrainConfig, TrainConfig, resolve_config
from cl_diag.training.data import TrainingData, training_data
from cl_diag.training.loop import DistEnv, EpochBatchSampler, amp_dtype, fit


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


clock = time.perf_counter  # --clock cpu: time.process_time


class StepClock:
    """The time of every step inside an epoch (a FitProgress, and called by the hand loop)."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self.last, self.epoch = None, None

    def start(self, *, total_steps: int, done_steps: int, epochs: int) -> None:
        self.last, self.epoch = None, None

    def step(self, step: int, epoch: int) -> None:
        now = clock()
        if self.last is not None and epoch == self.epoch:
            self.durations.append(now - self.last)
        self.last, self.epoch = now, epoch

    def row(self, row: dict) -> None:
        pass


def hand_loop(
    config: ResolvedTrainConfig, data: TrainingData, device: torch.device, steps_clock: StepClock
) -> tuple[int, float]:
    """The minimal loop: returns (steps, seconds)."""
    peak_lr = config.peak_lr
    model = build_model(config, seed=config.seed).to(device)
    channels_last = device.type == "cuda"
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(
        model.parameters(), lr=peak_lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    loss_fn = LOSSES[config.loss]
    dtype = amp_dtype(config.autocast, device)
    sampler = EpochBatchSampler(data.n_train, config.batch_size, config.seed)
    loader = DataLoader(
        data.train_set,
        batch_sampler=sampler,
        num_workers=config.workers,
        pin_memory=device.type == "cuda",
    )
    steps, seconds = 0, 0.0
    model.train()
    for epoch in range(config.run_epochs):
        sampler.set_epoch(epoch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = clock()
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
            steps_clock.step(steps, epoch + 1)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds += clock() - t0
    return steps, seconds


def cl_diag_loop(
    config: ResolvedTrainConfig, data: TrainingData, device: torch.device, steps_clock: StepClock
) -> tuple[int, float, float]:
    """cl-diag's fit(): returns (steps, loop seconds, checkpoint seconds)."""
    model = build_model(config, seed=config.seed)
    with tempfile.TemporaryDirectory() as out:
        r = fit(config, model, data, out_dir=Path(out), env=DistEnv(device), progress=steps_clock)
    return r.steps_this_run, r.train_seconds, r.checkpoint_seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=["digits", "cached"], default="digits")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--arch", default="auto")
    ap.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--num-samples", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall seconds, or CPU seconds of this process (a busy shared CPU machine)",
    )
    args = ap.parse_args()
    global clock
    if args.clock == "cpu":
        clock = time.process_time
        # fit() times its rows (in the Monitor) and its checkpoint writes with
        # time.perf_counter: the same clock for both loops
        cpu_clock = types.SimpleNamespace(perf_counter=time.process_time)
        loop_module.time = monitor_module.time = cpu_clock

    device = torch.device(args.device)
    dataset = "digits" if args.arch in ("auto", "small-cnn") else "cifar10"
    if args.data == "digits":
        data = training_data("digits", seed=0, num_samples=args.num_samples)
    else:
        shape = (1, 8, 8) if dataset == "digits" else (3, 32, 32)
        n = args.num_samples or (1347 if dataset == "digits" else 10 * args.batch_size)
        views = CachedViews(n, shape)
        data = TrainingData(dataset, views, torch.zeros(n, dtype=torch.long), n, 1)
    # the same resolution as `cl-diag train` (peak lr, steps, VRN delta), on this data's size
    options = TrainConfig(
        dataset=dataset,
        arch=args.arch,
        batch_size=args.batch_size,
        epochs=args.epochs,
        temperature=0.2,
        device=args.device,
        workers=args.workers,
        quiet=True,
    )
    base = resolve_config(options, n_train=data.n_train)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}, "
        f"arch {base.arch}, data {args.data} (n={data.n_train}), batch {base.batch_size}, "
        f"{args.epochs} epochs x {args.repeats} repeats, "
        f"precision {base.autocast}, {args.clock} clock"
    )

    # warm-up (allocator, kernels, first-touch of the data)
    one_epoch = resolve_config(replace(options, epochs=1), n_train=data.n_train)
    hand_loop(one_epoch, data, device, StepClock())
    with_vrn = resolve_config(replace(options, vrn=30.0), n_train=data.n_train)

    names = ("hand", "cl-diag", "cl-diag --vrn 30")
    best = dict.fromkeys(names, math.inf)
    clocks = {name: StepClock() for name in names}
    steps = {}
    ckpt = {}
    runs = {
        "hand": lambda: (*hand_loop(base, data, device, clocks["hand"]), 0.0),
        "cl-diag": lambda: cl_diag_loop(base, data, device, clocks["cl-diag"]),
        "cl-diag --vrn 30": lambda: cl_diag_loop(
            with_vrn, data, device, clocks["cl-diag --vrn 30"]
        ),
    }
    order = random.Random(0)
    for _ in range(args.repeats):
        # a new order every repeat: whatever runs first or last in a round (a warmer or a
        # colder allocator and cache) must not favour one loop
        for name in order.sample(names, len(names)):
            s, t, c = runs[name]()
            best[name], steps[name], ckpt[name] = min(best[name], t), s, c
    rate = {k: steps[k] / best[k] for k in names}  # whole loops
    step_rate = {k: 1 / statistics.median(clocks[k].durations) for k in names}  # steady state
    print(f"{'':18s} {'whole loop':>21s}   {'median step':>22s}")
    for k in names:
        print(
            f"{k:18s} {rate[k]:8.2f} steps/s {rate[k] * base.batch_size:7.0f} img/s   "
            f"{step_rate[k]:8.2f} steps/s {step_rate[k] * base.batch_size:7.0f} img/s"
        )
    for title, r in (("whole loop", rate), ("median step", step_rate)):
        overhead = 100 * (r["cl-diag"] / r["cl-diag --vrn 30"] - 1)
        print(
            f"{title + ':':13s} cl-diag / hand-written {r['cl-diag'] / r['hand']:.3f} "
            f"(target >= 0.98), --vrn 30 overhead {overhead:+.1f} % (target < 3 %)"
        )
    per_epoch = ckpt["cl-diag"] / args.epochs
    print(
        f"checkpoint write per epoch:  {1000 * per_epoch:.1f} ms (last.pt + metrics.csv, fsync'd)"
    )


if __name__ == "__main__":
    main()
