"""What an analysis of an embeddings file costs at data-set scale: wall time and peak memory.

For each size it writes seeded synthetic embeddings (n x d standard normal views, z2 = z1 +
noise, ``--classes`` labels; .npz, float32) and times the command a user runs on them, in a
child process (its wall time and its peak resident memory, ``ru_maxrss`` of the children):

* ``exact``:    ``cl-diag analyze FILE --out DIR -q`` -- every pair of every type, the
  geometry's uniformity over every pair too, the class-collapse block (the README's
  n = 50,000 row: CIFAR-10's training set);
* ``moments``:  ``cl-diag analyze FILE --pairs moments --num-pairs K --out DIR -q`` -- the
  exact mean and variance of every pair type over all n^2 pairs in closed form, the rest
  (quantiles, excessive ratio, histogram, min/max, uniformity) from K sampled pairs with
  their 95 % intervals (the n = 1,281,167 row: ImageNet-1k's training set).

It prints each command, its wall seconds and peak memory, and for moments mode the exact mean
and variance of the cross-view negatives next to the estimates' intervals. Figures depend on
the machine and on what else runs on it: say so when quoting them.

Run:  python benchmarks/bench_scale.py [--runs exact:50000,moments:1281167] [--d 128]
          [--num-pairs 1000000] [--classes 10,1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_embeddings(path: Path, n: int, d: int, classes: int, seed: int = 0) -> None:
    """z1, z2 (float32) and labels, written in blocks so that memory stays ~ the arrays."""
    rng = np.random.default_rng(seed)
    z1 = np.empty((n, d), dtype=np.float32)
    z2 = np.empty((n, d), dtype=np.float32)
    labels = rng.integers(0, classes, n)
    means = rng.standard_normal((classes, d)).astype(np.float32)
    block = 100_000
    for r0 in range(0, n, block):
        r1 = min(r0 + block, n)
        base = means[labels[r0:r1]] + rng.standard_normal((r1 - r0, d), dtype=np.float32)
        z1[r0:r1] = base
        z2[r0:r1] = base + 0.7 * rng.standard_normal((r1 - r0, d), dtype=np.float32)
    np.savez(path, z1=z1, z2=z2, labels=labels)


def run(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MiB of the child) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss is the largest child so far (KiB on Linux): exact for the first, a lower
    # bound on later runs only if they use less; each run is reported as the running max
    return seconds, max(peak, before) / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="exact:50000,moments:1281167")
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--num-pairs", type=int, default=1_000_000)
    parser.add_argument(
        "--classes", default="10,1000", help="labels of each run, in the order of --runs"
    )
    parser.add_argument("--keep", type=Path, help="keep the files and analyses here")
    args = parser.parse_args(argv)
    runs = [(mode, int(n)) for mode, n in (item.split(":") for item in args.runs.split(","))]
    classes = [int(c) for c in args.classes.split(",")]
    cl_diag = [sys.executable, "-m", "cl_diag"]
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    root = Path(tempfile.mkdtemp(prefix="cl-diag-scale-")) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    try:
        for (mode, n), c in zip(runs, classes, strict=False):
            path = root / f"emb-{n}-{args.d}.npz"
            if not path.exists():
                write_embeddings(path, n, args.d, c)
            out = root / f"{mode}-{n}"
            command = [*cl_diag, "analyze", str(path), "--out", str(out), "-q", "--overwrite"]
            if mode == "moments":
                command[5:5] = ["--pairs", "moments", "--num-pairs", str(args.num_pairs)]
            shown = " ".join(["cl-diag", *command[3:]])
            seconds, peak = run(command)
            load = os.getloadavg()[0]
            print(f"\n{mode}, n = {n:,}, d = {args.d}, {c} classes: {seconds:.1f} s wall, peak")
            print(f"  resident memory {peak:,.0f} MiB (largest child so far); load {load:.1f}")
            print(f"  command: {shown}")
            result = json.loads((out / "result.json").read_text())
            cross = result["layers"]["embedding"]["pairs"]["cross_view_negative"]
            line = f"  cross-view negatives: {cross['count']:,} pairs, mean {cross['mean']:.6g}"
            line += f", var {cross['var']:.6g}, excessive ratio {cross['excessive_ratio']:.4f}"
            if "sampling" in cross:
                lo, hi = cross["sampling"]["excessive_ratio"]
                line += f" [{lo:.4f}, {hi:.4f}] (from {cross['sampling']['pairs']:,} pairs)"
            print(line)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
