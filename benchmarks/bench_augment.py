"""Digits two-view augmentation: cl-diag's batched DigitsViews against torchvision v2's per-image
pipeline (the peer it replaced), on the same images, seeds and keys, in one process.

    PYTHONPATH=. python benchmarks/bench_augment.py --batch 256 --rounds 5

Both sides draw every view from torch's generator seeded per (seed, epoch, index), as
``TwoViews`` does. The peer applies the v2 ``Compose`` one image at a time (``TwoViews`` with
the v2 pipeline); cl-diag's side is ``TwoViews.__getitems__`` with ``DigitsViews``, which draws per
image and warps the batch at once. Prints images/s of each (median of ``--rounds`` interleaved
rounds over the digits training split), their ratio, and whether the views are equal to the bit.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torchvision.transforms import v2

from cl_diag.training.augment import train_transform
from cl_diag.training.data import TwoViews, load_dataset


class _Contrast(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (0.6 + (1.2 - 0.6) * torch.rand(()))


def torchvision_pipeline() -> v2.Compose:
    """The per-image v2 pipeline that cl-diag used for digits at 8 px, one channel."""
    return v2.Compose(
        [
            v2.RandomAffine(degrees=12, translate=(0.15, 0.15), scale=(0.8, 1.2), shear=8),
            _Contrast(),
            v2.GaussianNoise(mean=0.0, sigma=0.1, clip=True),
            v2.Normalize((0.3053,), (0.3760,)),
        ]
    )


def _one_pass(views: TwoViews, batches: list[list[tuple[int, int]]], batched: bool) -> list:
    if batched:
        return [views.__getitems__(keys) for keys in batches]
    return [[views[key] for key in keys] for keys in batches]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    base = load_dataset("digits", "train")
    n = len(base)
    keys = [(1, i) for i in torch.randperm(n, generator=torch.Generator().manual_seed(0))]
    batches = [keys[k : k + args.batch] for k in range(0, n, args.batch)]
    peer = TwoViews(base, torchvision_pipeline(), seed=0)
    ours = TwoViews(base, train_transform("digits"), seed=0)
    rates: dict[str, list[float]] = {"torchvision v2, per image": [], "cl-diag, batched": []}
    for _ in range(args.rounds):
        for name, views, batched in (
            ("torchvision v2, per image", peer, False),
            ("cl-diag, batched", ours, True),
        ):
            start = time.perf_counter()
            _one_pass(views, batches, batched)
            rates[name].append(2 * n / (time.perf_counter() - start))
    a = [item for batch in _one_pass(peer, batches, False) for item in batch]
    b = [item for batch in _one_pass(ours, batches, True) for item in batch]
    equal = all(
        torch.equal(x.view(torch.int32), y.view(torch.int32))
        for p, q in zip(a, b, strict=True)
        for x, y in zip(p[1:-1], q[1:-1], strict=True)
    )
    print(f"digits train split: {n} images, 2 views, batch {args.batch}, {args.threads} thread(s)")
    for name, got in rates.items():
        print(f"{name:26s} {statistics.median(got):9.0f} views/s (median of {args.rounds})")
    ratio = statistics.median(rates["cl-diag, batched"]) / statistics.median(
        rates["torchvision v2, per image"]
    )
    print(f"ratio cl-diag / torchvision: {ratio:.1f}x; views equal to the bit: {equal}")


if __name__ == "__main__":
    main()
