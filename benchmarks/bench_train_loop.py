"""Steps/s of cl-diag's training loop against a minimal hand-written PyTorch loop, and the cost of
--vrn, with 95 % intervals and a verdict on each target.

Four loops run in this one process on the same model (same initial weights), the same loss, the
same batch size and the same dataset object, with the same DataLoader settings (workers 0 on
CPU): the hand-written loop (forward, loss, backward, step, nothing else: the floor) twice,
cl-diag's ``fit`` and ``fit`` with ``--vrn 30``. cl-diag's loop adds the per-step lr schedule,
the in-batch pair statistics of the Monitor (on the device), the loss terms kept for metrics.csv
and, once per epoch (--log-every 0, the default), the host sync that reads them, checks that the
loss is finite and logs the VRN value (from the pair statistics without --vrn). Checkpoint
writes (once per epoch) are timed separately, in one more run of ``fit`` after the comparison.

Lock step. The loops run as greenlets on this one thread and take turns: one step of one loop at
a time, the turns of each round in a new random order, so step k of every loop runs within a few
hundred milliseconds of the others. A slow phase of a shared machine (another process, a
frequency change) then lands on the steps of one round, of every loop alike, instead of on
whichever loop happened to be running; this is what makes a difference of 1-2 % measurable on a
machine whose whole-run timings move by +-5 % from one run to the next. (Loops in OS threads
would each wake their own OpenMP team and slow one another by a third.) A loop's turn runs from
the moment it gets the turn to the end of its step: the DataLoader's next batch and the epoch's
end are in it, so per-epoch costs count. A second copy of the hand-written loop is the control:
two identical loops differ only by chance, and how far apart they land is printed.

Printed: steps/s of each loop, then for the control, cl-diag / hand-written (against the mean of
the two hand-written copies) and cl-diag --vrn 30 / cl-diag (time):

* per step: the 10 %-trimmed mean of the per-round ratios (a step hit by another process makes
  one round's ratio extreme in either direction; trimming 10 % at each end drops those, while
  costs that come every few steps, such as the monitor's batched statistics every 16 steps and
  the epoch's host sync, stay in);
* whole loop: the ratio of total times (what a wall clock sees, and what one 100 ms stall moves);

each with a 95 % block-bootstrap interval (blocks of one epoch's rounds, resampled 2,000 times:
neighbouring rounds share the machine's state), and a verdict per target on the per-step
interval: "met" when the whole interval is on the target's side, "not met" when all of it is on
the other side, else "inconclusive".

Targets (issue 10): cl-diag / hand-written >= 0.98; --vrn 30 costs < 3 % over no VRN.

    pip install -e ".[bench]"                                   # greenlet
    python benchmarks/bench_train_loop.py                      # digits, real augmentation
    python benchmarks/bench_train_loop.py --data cached        # pre-made views: loop overhead only
    python benchmarks/bench_train_loop.py --data cached --device cuda --arch resnet18-cifar \
        --batch-size 256 --epochs 10 --num-samples 25600       # GPU images/s, AMP on

On CUDA every turn ends with ``torch.cuda.synchronize()`` (a step's kernels must not run into
the next loop's turn), which all the loops pay alike. ``--clock cpu`` times turns in CPU seconds
of this process instead of wall seconds (use it with OMP_NUM_THREADS=1 on a machine busier than
its cores; on CUDA only wall time is honest).

Measured with torch 2.14 on the project's 2-core CPU machine, idle, 2 threads, small CNN
(per step, trimmed; whole loop in brackets after it):

    digits, batch 128, 40 epochs (the default run)
        control 1.000 [0.993, 1.006]; whole 1.015 [0.995, 1.036]
        cl-diag / hand 0.998 [0.993, 1.004] met; whole 1.005 [0.993, 1.019]
        --vrn 30 +0.5 % [-0.1, +1.2] met; whole +0.9 % [+0.0, +2.1]
    cached views, batch 128, 40 epochs (a 20 ms step with nothing else in it)
        control 0.999 [0.993, 1.004]
        cl-diag / hand 0.983 [0.977, 0.991] inconclusive (0.987 [0.980, 0.995], met, in
        another run); --vrn 30 +1.9 % [+1.1, +2.7] met
    cached views, batch 16, 6 epochs (a 7 ms step)
        cl-diag / hand 0.983 [0.980, 0.986] met; --vrn 30 +4.5 % [+4.2, +4.9] not met

With pre-made views at batch 128 cl-diag's loop costs about 0.24 ms a step over the hand-written
one: 0.14 ms for the monitor's statistics (the two d x d Gram matrices of each step, computed 16
steps at a time), 0.1 ms for the rest (lr schedule, loss terms, progress). VRN is its forward
and backward (a B x B product and its two gradients) on the views the loss has normalised
already; at batch 16 what VRN adds is mostly the launch of its ~15 small kernels, which the 7 ms
step of the tiny CNN cannot hide. With augmentation, a larger encoder or a GPU both are a smaller
share.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from scipy.stats import trim_mean
from torch.utils.data import DataLoader, Dataset

from cl_diag.losses import LOSSES
from cl_diag.models import build_model
from cl_diag.orchestration.train import ResolvedTrainConfig, TrainConfig, resolve_config
from cl_diag.runtime import Runtime, amp_dtype
from cl_diag.training.data import TrainingData, training_data
from cl_diag.training.loop import EpochBatchSampler, fit

try:
    import greenlet
except ImportError:  # pragma: no cover - a message, not a traceback
    raise SystemExit('bench_train_loop.py needs greenlet: pip install -e ".[bench]"') from None

HAND, HAND_AGAIN = "hand-written", "hand-written again"
CL_DIAG, CL_DIAG_VRN = "cl-diag", "cl-diag --vrn 30"
TARGET_RATIO, TARGET_OVERHEAD = 0.98, 0.03
#: the share of rounds trimmed from each end of the per-round ratios (scipy's trim_mean)
TRIM = 0.1


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


class LockStep:
    """Turns for loops running as greenlets on this one thread (one OpenMP team for all, as in a
    plain run: loops in OS threads would each wake their own team and slow one another): every
    round gives each running loop one turn, in a new random order. A loop calls :meth:`turn` at
    the end of each step (``timed=False`` after its set-up)."""

    def __init__(self, seed: int, clock: Callable[[], float], sync: bool):
        self.clock, self.sync = clock, sync
        self.rng = random.Random(seed)
        self.began: dict[str, float] = {}
        self.turns: dict[str, list[float]] = {}
        self.conductor = greenlet.getcurrent()

    def run(self, loops: dict[str, Callable[[Turns], object]]) -> None:
        """Run every loop to its end, a step of one at a time; a loop's error is raised here."""
        lets = {}
        for name, loop in loops.items():
            self.turns[name] = []
            lets[name] = greenlet.greenlet(lambda loop=loop, name=name: loop(Turns(self, name)))
        running = list(loops)
        while running:
            for name in self.rng.sample(running, len(running)):
                lets[name].switch()  # until its next turn(), or its end
                if lets[name].dead:
                    running.remove(name)

    def turn(self, name: str, *, timed: bool = True) -> None:
        if self.sync:
            torch.cuda.synchronize()
        if timed:
            self.turns[name].append(self.clock() - self.began[name])
        self.conductor.switch()
        self.began[name] = self.clock()


class Turns:
    """The FitProgress that gives the turn away after fit's set-up and after every step."""

    def __init__(self, lock_step: LockStep, name: str):
        self.lock_step, self.name = lock_step, name

    def start(self, *, total_steps: int, done_steps: int, epochs: int) -> None:
        self.lock_step.turn(self.name, timed=False)

    def step(self, step: int, epoch: int) -> None:
        self.lock_step.turn(self.name)

    def row(self, row: dict) -> None:
        pass


def hand_loop(
    config: ResolvedTrainConfig, data: TrainingData, device: torch.device, turns: Turns | None
) -> int:
    """The minimal loop; returns its step count. ``turns`` (None: run free) is told of each step."""
    model = build_model(config, seed=config.seed).to(device)
    channels_last = device.type == "cuda"
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(
        model.parameters(),
        lr=config.peak_lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
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
    if turns is not None:
        turns.start(total_steps=0, done_steps=0, epochs=0)
    steps = 0
    model.train()
    for epoch in range(config.run_epochs):
        sampler.set_epoch(epoch)
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
            if turns is not None:
                turns.step(steps, epoch + 1)
    return steps


def cl_diag_loop(
    config: ResolvedTrainConfig, data: TrainingData, device: torch.device, turns: Turns
) -> int:
    """cl-diag's fit(), writing nothing; returns its step count."""
    model = build_model(config, seed=config.seed)
    return fit(config, model, data, out_dir=None, env=Runtime(device), progress=turns).steps


def block_bootstrap(
    statistic: Callable[[np.ndarray], float], rounds: np.ndarray, block: int, seed: int = 0
) -> tuple[float, float]:
    """95 % percentile interval of ``statistic`` over rows of ``rounds`` resampled in blocks of
    ``block`` consecutive rows (2,000 resamples)."""
    rng = np.random.default_rng(seed)
    starts = np.arange(0, len(rounds) - block + 1)
    blocks_needed = -(-len(rounds) // block)
    values = []
    for _ in range(2000):
        chosen = rng.choice(starts, size=blocks_needed)
        idx = (chosen[:, None] + np.arange(block)[None, :]).reshape(-1)[: len(rounds)]
        values.append(statistic(rounds[idx]))
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def verdict(
    low: float, high: float, *, at_least: float | None = None, below: float | None = None
) -> str:
    """ "met" when the whole interval is on the target's side, "not met" when all of it is on the
    other side, else "inconclusive"."""
    if at_least is not None:
        return "met" if low >= at_least else "not met" if high < at_least else "inconclusive"
    assert below is not None
    return "met" if high < below else "not met" if low >= below else "inconclusive"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=["digits", "cached"], default="digits")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--arch", default="auto")
    ap.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    ap.add_argument("--epochs", type=int, default=40, help="epochs of each loop (>= 4)")
    ap.add_argument("--num-samples", type=int, default=None)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0, help="the order of the turns in each round")
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall seconds, or CPU seconds of this process (a busy shared CPU machine)",
    )
    args = ap.parse_args()
    if args.epochs < 4:
        ap.error("--epochs must be at least 4 (the interval resamples whole epochs)")
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

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
    with_vrn = resolve_config(replace(options, vrn=30.0), n_train=data.n_train)
    steps_per_epoch = base.total_steps // base.run_epochs
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}, "
        f"arch {base.arch}, data {args.data} (n={data.n_train}), batch {base.batch_size}, "
        f"{args.epochs} epochs x {steps_per_epoch} steps in lock step, "
        f"precision {base.autocast}, {args.clock} clock"
    )

    # warm-up (allocator, kernels, first touch of the data)
    hand_loop(resolve_config(replace(options, epochs=1), n_train=data.n_train), data, device, None)

    names = [HAND, HAND_AGAIN, CL_DIAG, CL_DIAG_VRN]
    lock_step = LockStep(args.seed, clock, sync=device.type == "cuda")
    lock_step.run(
        {
            HAND: lambda turns: hand_loop(base, data, device, turns),
            HAND_AGAIN: lambda turns: hand_loop(base, data, device, turns),
            CL_DIAG: lambda turns: cl_diag_loop(base, data, device, turns),
            CL_DIAG_VRN: lambda turns: cl_diag_loop(with_vrn, data, device, turns),
        }
    )

    n_rounds = min(len(lock_step.turns[name]) for name in names)
    rounds = np.array([lock_step.turns[name][:n_rounds] for name in names]).T  # (rounds, 4)
    hand, again, plain, vrn = range(4)
    print(f"{'':22s} {'steps/s':>9s} {'img/s':>8s} {'median step':>12s}")
    for k, name in enumerate(names):
        column = rounds[:, k]
        print(
            f"{name:22s} {n_rounds / column.sum():9.2f} "
            f"{n_rounds * base.batch_size / column.sum():8.0f} "
            f"{1000 * statistics.median(column):9.2f} ms"
        )

    block = max(1, steps_per_epoch)
    both_hands = [hand, again]
    # (label, per-round ratio, ratio of totals over rounds r, target): speed ratios for the
    # control and cl-diag (against the mean of the two hand-written copies), a time ratio for VRN
    lines = [
        (
            "control, hand-written / hand-written again",
            lambda r: r[:, hand] / r[:, again],
            lambda r: r[:, hand].sum() / r[:, again].sum(),
            None,
        ),
        (
            "cl-diag / hand-written",
            lambda r: r[:, both_hands].mean(1) / r[:, plain],
            lambda r: r[:, both_hands].sum() / 2 / r[:, plain].sum(),
            (">=", TARGET_RATIO),
        ),
        (
            "cl-diag --vrn 30 / cl-diag, time",
            lambda r: r[:, vrn] / r[:, plain],
            lambda r: r[:, vrn].sum() / r[:, plain].sum(),
            ("<", 1 + TARGET_OVERHEAD),
        ),
    ]
    for label, per_round, whole, target in lines:
        trimmed = float(trim_mean(per_round(rounds), TRIM))
        trimmed_ci = block_bootstrap(
            lambda r, per_round=per_round: float(trim_mean(per_round(r), TRIM)), rounds, block
        )
        total, total_ci = float(whole(rounds)), block_bootstrap(whole, rounds, block)
        if target is None:
            judged = "how far apart two identical loops land"
        else:
            side, value = target
            bound = {"at_least": value} if side == ">=" else {"below": value}
            judged = f"target {side} {value:.2f}: {verdict(*trimmed_ci, **bound)}"
        print(
            f"{label}: {trimmed:.3f} [{trimmed_ci[0]:.3f}, {trimmed_ci[1]:.3f}] per step "
            f"(trimmed mean), {total:.3f} [{total_ci[0]:.3f}, {total_ci[1]:.3f}] whole loop; "
            f"{judged}"
        )

    # checkpoint writes: one more run of fit, on its own, into a temporary folder
    ckpt = _checkpoint_seconds(base, data, device)
    print(f"checkpoint write per epoch: {1000 * ckpt / args.epochs:.1f} ms (last.pt + metrics.csv)")


def _checkpoint_seconds(config: ResolvedTrainConfig, data: TrainingData, device) -> float:
    """fit's own time for its checkpoint writes over a whole run (into a temporary folder)."""
    with tempfile.TemporaryDirectory() as out:
        model = build_model(config, seed=config.seed)
        result = fit(config, model, data, out_dir=Path(out), env=Runtime(device))
    return result.checkpoint_seconds


if __name__ == "__main__":
    main()
