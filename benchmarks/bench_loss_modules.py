"""Forward + backward time of a loss, functional (options checked per call) vs module
(options checked once at construction), on CPU.

    PYTHONPATH=. python benchmarks/bench_loss_modules.py --batch 256 --dim 128 --reps 300

Prints the median microseconds per step over five timed blocks, for simclr and vrn.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from cl_diag.losses import LOSSES, build_loss

CASES = {"simclr": {"temperature": 0.2}, "vrn": {"delta": -1 / 49_999, "power": 2.0}}


def time_step(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    z1: torch.Tensor,
    z2: torch.Tensor,
    reps: int,
) -> float:
    """Median microseconds of fn(z1, z2).backward() over five blocks of reps // 5."""
    for _ in range(20):  # warm-up
        fn(z1, z2).backward()
    block = max(1, reps // 5)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(block):
            fn(z1, z2).backward()
        times.append((time.perf_counter() - t0) / block * 1e6)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    z1 = torch.randn(args.batch, args.dim, generator=g).requires_grad_()
    z2 = torch.randn(args.batch, args.dim, generator=g).requires_grad_()
    print(f"B = {args.batch}, d = {args.dim}, {args.reps} reps, {args.threads} thread(s), CPU")
    for name, hp in CASES.items():
        module = build_loss(name, **hp)
        functional = time_step(lambda a, b, n=name, h=hp: LOSSES[n](a, b, **h), z1, z2, args.reps)
        built = time_step(module, z1, z2, args.reps)
        print(f"{name:7s} functional {functional:9.1f} us/step   module {built:9.1f} us/step")


if __name__ == "__main__":
    main()
