"""Steps/s of a training step with and without ``cl_diag.Monitor.update`` on the same model.

One process, one model per architecture (the digits small CNN and a ResNet-18, each with the
128-d projector of ``cl-diag train``), fixed random views (no data pipeline: the step is
forward, SimCLR loss, backward, SGD, nothing else), batch 256 (512 images a step). The two
variants alternate step by step, in a random order each round, on the same model: a step with
the monitor also calls ``mon.update(z1, z2, loss=loss)`` and ``mon.flush()`` (a row every
``--log-every`` steps, with its one host sync). The monitor runs as a user gets it:
``Monitor(n_ref=50000)``, so it also counts the negatives below delta (three B x B products a
step besides the d x d moments); ``--no-excessive`` times the cheaper means-and-variances-only
monitor that ``cl-diag train`` uses.

Printed per model: the median step time of each variant, the ratio of steps/s with / without
as a ratio of total times with a 95 % bootstrap interval over rounds (totals, not medians: on
the means-and-variances route the monitor holds 16 steps' views and adds them in one go, a cost
a median step never shows; target >= 0.98), the median of the per-round paired ratios (each
round's two steps ran back to back, so a slow phase of the machine hits both), and the mean time
of the monitor's own calls per step.

    python benchmarks/bench_monitor.py                       # both models, 40 rounds each
    python benchmarks/bench_monitor.py --models digits --rounds 200
    OMP_NUM_THREADS=1 python benchmarks/bench_monitor.py --clock cpu   # a busy shared machine

``--clock cpu`` times steps in CPU seconds of this process (with one thread, time spent waiting
for a core is not counted). Measured on the project's idle 2-core machine, torch 2.14, 2 threads,
wall clock (docs/implementation.md, "The training-time monitor", has the table):

    digits    --no-excessive, 200 rounds: step 43 ms, monitor 0.39 ms, 0.994 [0.980, 1.007]
    digits    Monitor(n_ref=50000), 200 rounds: step 37 ms, monitor 1.8 ms, 0.964 [0.950, 0.978]
    resnet18  --no-excessive, 12 rounds: step 0.78 s, monitor 0.24 ms, 1.026 [0.983, 1.073]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np
import torch

from cl_diag.losses import build_loss
from cl_diag.measurement.monitor import Monitor
from cl_diag.models import build_model
from cl_diag.orchestration.train import TrainConfig

#: model name -> (training config naming the architecture, input shape of one image)
MODELS = {
    "digits": (TrainConfig(dataset="digits"), (1, 8, 8)),
    "resnet18": (TrainConfig(dataset="cifar10", arch="resnet18"), (3, 32, 32)),
}


def bench(name: str, args: argparse.Namespace, clock) -> dict[str, float]:
    config, shape = MODELS[name]
    model = build_model(config, seed=0)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = build_loss("simclr", temperature=0.2)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2 * args.batch_size, *shape, generator=g)  # the two views, stacked
    monitor = Monitor(n_ref=50_000, log_every=args.log_every, excessive=not args.no_excessive)
    monitor_seconds: list[float] = []

    def step(with_monitor: bool) -> float:
        t0 = clock()
        z1, z2 = model(x).chunk(2)
        loss = loss_fn(z1, z2)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if with_monitor:
            t1 = clock()
            monitor.update(z1, z2, loss=loss)
            monitor.flush()
            monitor_seconds.append(clock() - t1)
        return clock() - t0

    for _ in range(args.warmup):
        step(True)
        step(False)
    monitor_seconds.clear()
    times: dict[bool, list[float]] = {True: [], False: []}
    paired: list[float] = []
    order = random.Random(0)
    for _ in range(args.rounds):
        this_round = {}
        for with_monitor in order.sample([True, False], 2):
            this_round[with_monitor] = step(with_monitor)
            times[with_monitor].append(this_round[with_monitor])
        paired.append(this_round[False] / this_round[True])
    without, with_ = sum(times[False]), sum(times[True])
    # the monitor's work is not the same every step (on the d x d route it adds 16 steps' views
    # in one go), so the ratio is of total times, with a 95 % bootstrap interval over rounds
    rounds = np.array([times[False], times[True]]).T
    rng = np.random.default_rng(0)
    resampled = rounds[rng.integers(0, len(rounds), (2000, len(rounds)))].sum(1)
    low, high = np.percentile(resampled[:, 0] / resampled[:, 1], [2.5, 97.5])
    return {
        "without": statistics.median(times[False]),
        "with": statistics.median(times[True]),
        "ratio": without / with_,
        "interval": (float(low), float(high)),
        "paired": statistics.median(paired),
        "monitor": statistics.fmean(monitor_seconds),
        "rows": len(monitor.history),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="digits,resnet18", help="comma-separated: digits, resnet18")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=40, help="step pairs timed per model")
    ap.add_argument("--warmup", type=int, default=3, help="step pairs run before timing")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--no-excessive", action="store_true", help="means and variances only")
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall seconds, or CPU seconds of this process (a busy shared CPU machine)",
    )
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU, batch "
        f"{args.batch_size} (x2 views), {args.rounds} interleaved rounds, {args.clock} clock, "
        f"monitor: n_ref 50000, excessive {'off' if args.no_excessive else 'on'}, "
        f"log_every {args.log_every}"
    )
    for name in args.models.split(","):
        r = bench(name.strip(), args, clock)
        low, high = r["interval"]
        print(
            f"{name:9s} median step without {1000 * r['without']:8.1f} ms, with "
            f"{1000 * r['with']:8.1f} ms; steps/s with / without {r['ratio']:.3f} "
            f"[{low:.3f}, {high:.3f}] (median paired {r['paired']:.3f}; target >= 0.98); "
            f"update + flush {1000 * r['monitor']:.2f} ms a step (mean); {r['rows']} rows"
        )


if __name__ == "__main__":
    main()
