"""Exact analysis spread over ranks: seconds per rank against n and the number of ranks K.

Run under torchrun, once per K (each rank single-threaded: one core per rank):

    torchrun --standalone --nproc-per-node 1 benchmarks/bench_ranks.py --sizes 5000,10000,20000
    torchrun --standalone --nproc-per-node 2 benchmarks/bench_ranks.py --sizes 5000,10000,20000

For each n, every rank holds the same seeded n x d views (d = 128 by default, z2 = z1 +
noise, 10 classes) and runs what ``cl-diag analyze`` runs on an embeddings file: exact pair
statistics with labels (:func:`cl_diag.measurement.pairs.pair_statistics_of`) and the
geometry (:func:`cl_diag.measurement.geometry.geometry_of`: uniformity streams another n^2
similarities), with the ranks of :meth:`cl_diag.runtime.Runtime.start`. Rank 0 prints, per n,
the slowest rank's seconds for each and the sha256 of the JSON of both results: the digest
must be the same for every K (the merge is exact).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import torch

from cl_diag.measurement.geometry import geometry_of
from cl_diag.measurement.inputs import label_codes, normalise_views
from cl_diag.measurement.pairs import pair_statistics_of
from cl_diag.runtime import Ranks, Runtime


def _timed(job: Ranks, fn, *args, **kwargs):
    """(seconds of the slowest rank, result): the job is done when the last rank is."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    seconds = max(job.gather(time.perf_counter() - t0))
    return seconds, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5000,10000,20000")
    parser.add_argument("--d", type=int, default=128)
    args = parser.parse_args()

    torch.set_num_threads(1)  # one core per rank, also for K = 1 (torchrun sets it for K > 1)
    env = Runtime.start("cpu")  # the trainer's and analyze's torchrun setup (gloo on CPU)
    ranks = env.ranks
    if ranks.is_main:
        print(f"K = {ranks.world} rank(s), {torch.get_num_threads()} thread(s) each, d = {args.d}")
        print(f"{'n':>8} {'pairs s':>9} {'geometry s':>11} {'total s':>9}  digest")
    for n in (int(s) for s in args.sizes.split(",")):
        g = torch.Generator().manual_seed(n)
        z1 = torch.randn(n, args.d, generator=g)
        z2 = z1 + 0.5 * torch.randn(n, args.d, generator=g)
        views = normalise_views(z1, z2)
        codes = label_codes(torch.arange(n) % 10, n, "cpu")
        t_pairs, pairs = _timed(
            ranks, pair_statistics_of, views, n_ref=50_000, codes=codes, ranks=ranks
        )
        mean = pairs["cross_view_negative"].mean
        t_geo, geo = _timed(
            ranks, geometry_of, views, n_ref=50_000, cross_view_mean=mean, ranks=ranks
        )
        record = [{kind: stats.to_dict() for kind, stats in pairs.items()}, geo.to_dict()]
        digest = hashlib.sha256(json.dumps(record).encode()).hexdigest()[:16]
        if ranks.is_main:
            total = t_pairs + t_geo
            print(f"{n:>8} {t_pairs:>9.2f} {t_geo:>11.2f} {total:>9.2f}  {digest}", flush=True)
    env.close(wait=True)  # every rank finished: none closes its sockets while another reads


if __name__ == "__main__":
    main()
