"""What ``cl-diag train --deterministic`` costs: a training step in its mode against the same step
without it, on the same model in one process.

One model (the digits small CNN with the 128-d projector of ``cl-diag train``; ``--model
resnet18`` for a torchvision ResNet-18 on 32 x 32 inputs), fixed random views, batch 256
(512 images a step): forward, SimCLR loss + 30 x VRN on one normalisation (what ``--vrn 30``
trains), backward, SGD. Three variants alternate step by step, in a random order each round:

* ``default`` -- torch's defaults (its threads, non-deterministic algorithms allowed);
* ``algorithms`` -- ``torch.use_deterministic_algorithms(True)`` alone, the threads unchanged;
* ``deterministic`` -- :func:`cl_diag.training.loop.deterministic_mode`, what ``--deterministic``
  turns on: deterministic algorithms, one intra-op thread, cuDNN deterministic.

Printed: each variant's median step and the ratio of its total step time to the default's (a
paired ratio: every round ran the three back to back, so a slow phase of a shared machine hits
all of them), with a 95 % bootstrap interval over rounds. On a CPU the mode's cost is its one
thread: with torch's default of one thread per core, ``deterministic`` / ``default`` approaches
the number of cores the default would use.

    python benchmarks/bench_deterministic.py                  # digits, 60 rounds
    python benchmarks/bench_deterministic.py --model resnet18 --rounds 10
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from collections.abc import Callable, Iterator

import numpy as np
import torch

from cl_diag.losses import RegularisedLoss, build_loss
from cl_diag.models import build_model
from cl_diag.orchestration.train import TrainConfig
from cl_diag.training.loop import deterministic_mode

MODELS = {
    "digits": (TrainConfig(dataset="digits"), (1, 8, 8)),
    "resnet18": (TrainConfig(dataset="cifar10", arch="resnet18"), (3, 32, 32)),
}
VARIANTS = ("default", "algorithms", "deterministic")


@contextlib.contextmanager
def _algorithms_only() -> Iterator[None]:
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def _mode(variant: str) -> contextlib.AbstractContextManager[None]:
    if variant == "algorithms":
        return _algorithms_only()
    return deterministic_mode(variant == "deterministic")


def bench(
    model_name: str, *, batch_size: int, rounds: int, warmup: int, clock: Callable[[], float]
) -> dict[str, dict[str, float]]:
    """Per variant: median step seconds, and the ratio of its total time to the default's with
    a 95 % bootstrap interval over rounds."""
    config, shape = MODELS[model_name]
    model = build_model(config, seed=0)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    objective = RegularisedLoss(
        build_loss("simclr", temperature=0.2), build_loss("vrn", delta=-1 / 1346), 30.0
    )
    x = torch.randn(2 * batch_size, *shape, generator=torch.Generator().manual_seed(0))

    def step(variant: str) -> float:
        with _mode(variant):
            t0 = clock()
            z1, z2 = model(x).chunk(2)
            loss, _, _ = objective(z1, z2, None)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            return clock() - t0

    for _ in range(warmup):
        for variant in VARIANTS:
            step(variant)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    order = random.Random(0)
    for _ in range(rounds):
        for variant in order.sample(VARIANTS, len(VARIANTS)):
            times[variant].append(step(variant))
    table = np.array([times[v] for v in VARIANTS]).T  # rounds x variants
    rng = np.random.default_rng(0)
    resampled = table[rng.integers(0, len(table), (2000, len(table)))].sum(1)
    out = {}
    for k, variant in enumerate(VARIANTS):
        low, high = np.percentile(resampled[:, k] / resampled[:, 0], [2.5, 97.5])
        out[variant] = {
            "median": statistics.median(times[variant]),
            "ratio": float(table[:, k].sum() / table[:, 0].sum()),
            "low": float(low),
            "high": float(high),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="digits")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=60, help="rounds of the three variants")
    ap.add_argument("--warmup", type=int, default=3, help="rounds run before timing")
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall seconds, or CPU seconds of this process (which counts every thread's time)",
    )
    args = ap.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads by default, CPU, "
        f"{args.model}, batch {args.batch_size} (x2 views), {args.rounds} interleaved rounds, "
        f"{args.clock} clock"
    )
    results = bench(
        args.model,
        batch_size=args.batch_size,
        rounds=args.rounds,
        warmup=args.warmup,
        clock=clock,
    )
    for variant, r in results.items():
        print(
            f"{variant:13s} median step {1000 * r['median']:8.1f} ms; time / default "
            f"{r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"
        )


if __name__ == "__main__":
    main()
