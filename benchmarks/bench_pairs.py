"""Exact pair statistics vs the obvious peer, and vs plain matmul throughput.

In one process, on the same seeded data (n x d standard normal views, z2 = z1 + noise):

* **cl-diag**: ``pair_statistics(z1, z2)`` in exact mode (all three pair types: every
  statistic, fine-histogram quantiles, excessive ratio; streamed in tiles), and
  ``pair_statistics_of`` on the rows normalised once (the statistics alone, as ``analyze``
  runs them: it normalises each layer once for the pairs and the geometry).
* **peer**: scikit-learn ``cosine_similarity`` on the full matrices (z1 vs z2, z1 vs z1,
  z2 vs z2), then numpy statistics of the same pairs (mean/var in float64, min, max,
  ``np.percentile``, ``np.histogram``, excessive ratio).
* **plain matmul**: the same float32 tile GEMMs as cl-diag, without any statistics
  (``torch.mm`` on the same shapes, torch's default threads), and one full n x n
  ``torch.mm``, for throughput: GFLOP/s = 2 d * (similarities computed) / seconds, with
  n^2 cross-view + n(n-1) within-view similarities for cl-diag (2 d n^2 for the full mm).
  The same tile GEMMs are also run through cl-diag's own parallel structure (one
  single-threaded worker per core): cl-diag's time minus that is the cost of the statistics.
  **The ratio** cl-diag / these GEMMs (throughput, i.e. GEMM seconds / cl-diag seconds) is
  printed from the best of each and as the median over the repeats, each repeat running the
  two back to back (the machine may be shared: paired runs see the same load). On a machine
  that other jobs load, wall seconds still swing by tens of percent from run to run, so the
  same ratio is also printed in **one thread's CPU time** (``time.thread_time``, which counts
  only the seconds the thread ran): the statistics with one worker in this thread against the
  same tile GEMMs in this thread, paired likewise.
* **moments check**: the previous implementation's means and variances (float32 similarities
  from the same tiles, summed in float64; :func:`previous_moments`) against cl-diag's closed
  form, with the bound they must meet (:func:`moment_bound`): |mean diff| <= eps + E1 and
  |var diff| <= 2 eps std + eps^2 + E2, eps = gamma_d (float32 rounding of a similarity) and
  E1, E2 the closed form's float64 bounds (:func:`cl_diag.measurement.moments.error_bounds`,
  which the float32 sums' own float64 rounding, ~1e-12 here, fits inside).

Peak memory is read from the kernel, not from tracemalloc (which misses torch's CPU
allocations): before each measurement freed heap is returned (``malloc_trim``) and the
peak-RSS counter is reset (``echo 5 > /proc/self/clear_refs``, Linux >= 4.0); the figure is
VmHWM minus the RSS at the start, i.e. the extra resident memory the method needed on top
of the inputs already loaded.

Run:  python benchmarks/bench_pairs.py [--sizes 2000,5000,10000,20000] [--repeats 3] [--skip-100k]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import math
import platform
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from cl_diag.measurement import theory
from cl_diag.measurement.moments import error_bounds
from cl_diag.measurement.pairs import (
    _default_tile,
    _LockedIter,
    _tiles,
    full_fp32_matmul,
    normalise_views,
    pair_statistics,
    pair_statistics_of,
)
from cl_diag.result import PairStats

QS = (1, 5, 25, 50, 75, 95, 99)


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def _reset_peak() -> int:
    gc.collect()
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
    return _status_kb("VmRSS")


def measure(fn):
    """(seconds, peak extra resident MiB, result) of one call."""
    base = _reset_peak()
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    peak = (_status_kb("VmHWM") - base) / 1024
    return seconds, peak, out


def peer(z1: np.ndarray, z2: np.ndarray, n_ref: int) -> dict:
    """The obvious implementation: full similarity matrices, then numpy."""
    from sklearn.metrics.pairwise import cosine_similarity

    n = z1.shape[0]
    delta = theory.delta(n_ref)

    def stats(x: np.ndarray) -> dict:
        return {
            "count": x.size,
            "mean": float(x.mean(dtype=np.float64)),
            "var": float(x.var(dtype=np.float64)),
            "min": float(x.min()),
            "max": float(x.max()),
            "quantiles": np.percentile(x, QS).tolist(),
            "histogram": np.histogram(x, bins=100, range=(-1.0, 1.0))[0].tolist(),
            "excessive_ratio": float(np.count_nonzero(x < delta) / x.size),
        }

    s = cosine_similarity(z1, z2)
    out = {"positive": stats(np.diagonal(s).copy())}
    out["cross_view_negative"] = stats(s[~np.eye(n, dtype=bool)])
    del s
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    within = np.concatenate([cosine_similarity(z1)[upper], cosine_similarity(z2)[upper]])
    out["within_view_negative"] = stats(within)
    return out


def plain_tiles(u: torch.Tensor, v: torch.Tensor, tile: int) -> None:
    """The GEMMs cl-diag runs (same tiles, same shapes), without the statistics."""
    buf = torch.empty(tile * tile)
    with full_fp32_matmul():
        for r0, r1, c0, c1, upper in _tiles(u.shape[0], tile):
            s = buf[: (r1 - r0) * (c1 - c0)].view(r1 - r0, c1 - c0)
            torch.mm(u[r0:r1], v[c0:c1].T, out=s)
            if upper:
                torch.mm(u[r0:r1], u[c0:c1].T, out=s)
                torch.mm(v[r0:r1], v[c0:c1].T, out=s)


def plain_tiles_workers(u: torch.Tensor, v: torch.Tensor, tile: int) -> None:
    """The same GEMMs through cl-diag's parallel structure: one single-threaded worker per
    core pulling tiles from a shared queue. Against this, cl-diag's time is GEMMs + statistics."""
    threads = torch.get_num_threads()
    tasks = _LockedIter(_tiles(u.shape[0], tile))

    def work() -> None:
        torch.set_num_threads(1)
        buf = torch.empty(tile * tile)
        for r0, r1, c0, c1, upper in tasks:
            s = buf[: (r1 - r0) * (c1 - c0)].view(r1 - r0, c1 - c0)
            torch.mm(u[r0:r1], v[c0:c1].T, out=s)
            if upper:
                torch.mm(u[r0:r1], u[c0:c1].T, out=s)
                torch.mm(v[r0:r1], v[c0:c1].T, out=s)

    torch.set_num_threads(1)
    try:
        with full_fp32_matmul(), ThreadPoolExecutor(threads) as pool:
            for f in [pool.submit(work) for _ in range(threads)]:
                f.result()
    finally:
        torch.set_num_threads(threads)


def thread_seconds(fn) -> float:
    """CPU seconds this thread spent in ``fn()``, with torch (and so cl-diag's tile pass) on
    this one thread: what other processes on the cores disturb far less than wall time."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        start = time.thread_time()
        fn()
        return time.thread_time() - start
    finally:
        torch.set_num_threads(threads)


def full_mm(u: torch.Tensor, v: torch.Tensor) -> None:
    with full_fp32_matmul():
        torch.mm(u, v.T)


def previous_moments(u: torch.Tensor, v: torch.Tensor, tile: int) -> dict[str, tuple]:
    """(mean, var) of the cross- and within-view negatives as the previous implementation
    computed them: the float32 similarities of the same tiles (torch's threads), each tile's
    sum and sum of squares in float64, added with math.fsum."""
    n = u.shape[0]
    sums: dict[str, list] = {"cross_view_negative": [], "within_view_negative": []}
    with full_fp32_matmul(), torch.inference_mode():
        for r0, r1, c0, c1, upper in _tiles(n, tile):
            s = torch.mm(u[r0:r1], v[c0:c1].T).double()
            if r0 == c0:
                s.fill_diagonal_(0.0)  # the positives are not negatives (0 adds nothing)
            sums["cross_view_negative"].append((float(s.sum()), float((s * s).sum())))
            if not upper:
                continue
            for x in (u, v):
                w = torch.mm(x[r0:r1], x[c0:c1].T).double()
                if r0 == c0:
                    w = torch.triu(w, diagonal=1)
                sums["within_view_negative"].append((float(w.sum()), float((w * w).sum())))
    out = {}
    for kind, parts in sums.items():
        count = n * (n - 1)
        total = math.fsum(a for a, _ in parts)
        squares = math.fsum(b for _, b in parts)
        mean = total / count
        out[kind] = (mean, squares / count - mean * mean)
    return out


def moment_bound(n: int, d: int, mean: float, var: float) -> tuple[float, float]:
    """How far the closed form's (mean, var) may lie from the previous implementation's: the
    float32 rounding of each similarity, eps = gamma_d rho^2 (Higham Thm 3.5, unit 2^-24),
    moves the mean by <= eps and the variance by <= 2 eps std + eps^2; the closed form's own
    float64 error adds E1, E2."""
    unit = 2.0**-24
    eps = d * unit / (1 - d * unit) * (1 + 2.0**-22) ** 2
    e1, e2 = error_bounds(n, d, n * (n - 1), mean, var + mean * mean)
    return eps + e1, 2 * eps * math.sqrt(var) + eps * eps + e2


def data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z1 = rng.standard_normal((n, d), dtype=np.float32)
    z2 = z1 + 0.7 * rng.standard_normal((n, d), dtype=np.float32)
    return z1, z2


def compare(ours: dict[str, PairStats], theirs: dict) -> float:
    """Largest |difference| over means, variances, mins, maxs (a sanity check of the peer)."""
    worst = 0.0
    for kind in ("positive", "cross_view_negative", "within_view_negative"):
        for key in ("mean", "var", "min", "max"):
            worst = max(worst, abs(getattr(ours[kind], key) - theirs[kind][key]))
        assert ours[kind].count == theirs[kind]["count"], kind
    return worst


def run_size(n: int, d: int, repeats: int, with_peer: bool, block_size: int | None) -> dict:
    z1, z2 = data(n, d)
    views = normalise_views(z1, z2)
    u, v = views
    tile = block_size or _default_tile(n, u.device)
    sims = n * n + n * (n - 1)  # cross-view tiles (incl. positives) + within-view pairs
    flops = 2.0 * d * sims
    row: dict = {"n": n, "ours": [], "stats": [], "peer": [], "tiles": [], "workers": []}
    row["full"] = []
    ratios = []
    cpu_ratios = []
    for _ in range(repeats):
        t, m, ours = measure(lambda: pair_statistics(z1, z2, n_ref=n, block_size=block_size))
        row["ours"].append((t, m))
        # the statistics alone and the same GEMMs through cl-diag's workers, back to back
        t_stats, m, _ = measure(lambda: pair_statistics_of(views, n_ref=n, block_size=block_size))
        row["stats"].append((t_stats, m))
        t_gemm, m, _ = measure(lambda: plain_tiles_workers(u, v, tile))
        row["workers"].append((t_gemm, m))
        ratios.append(t_gemm / t_stats)
        cpu_stats = thread_seconds(
            lambda: pair_statistics_of(views, n_ref=n, block_size=block_size)
        )
        cpu_gemm = thread_seconds(lambda: plain_tiles(u, v, tile))
        cpu_ratios.append(cpu_gemm / cpu_stats)
        if n <= 20_000:  # torch-threaded tiles: minutes at 100,000 when the cores are shared
            t, m, _ = measure(lambda: plain_tiles(u, v, tile))
            row["tiles"].append((t, m))
        if with_peer:
            t, m, theirs = measure(lambda: peer(z1, z2, n))
            row["peer"].append((t, m))
            row["max_abs_diff"] = compare(ours, theirs)
        if n <= 20_000:
            t, m, _ = measure(lambda: full_mm(u, v))
            row["full"].append((t, m))
    best = {
        k: min(row[k]) if row[k] else None
        for k in ("ours", "stats", "peer", "tiles", "workers", "full")
    }
    row["gflops_ours"] = flops / best["ours"][0] / 1e9
    row["gflops_stats"] = flops / best["stats"][0] / 1e9
    row["gflops_tiles"] = flops / best["tiles"][0] / 1e9 if best["tiles"] else None
    row["gflops_workers"] = flops / best["workers"][0] / 1e9
    row["gflops_full"] = 2.0 * d * n * n / best["full"][0] / 1e9 if best["full"] else None
    row["ratio_best"] = best["workers"][0] / best["stats"][0]
    row["ratio_median"] = statistics.median(ratios)
    row["ratios"] = ratios
    row["cpu_ratios"] = cpu_ratios
    row["best"] = best
    row["tile"] = tile
    row["d"] = d
    if n <= 20_000:
        previous = previous_moments(u, v, tile)
        checks = []
        for kind, (mean0, var0) in previous.items():
            mean_bound, var_bound = moment_bound(n, d, mean0, var0)
            dm = abs(ours[kind].mean - mean0)
            dv = abs(ours[kind].var - var0)
            checks.append((kind, dm, mean_bound, dv, var_bound))
        row["moments"] = checks
    return row


def report(row: dict) -> None:
    n, best = row["n"], row["best"]
    ours_t, ours_m = best["ours"]
    runs = ", ".join(f"{t:.2f}" for t, _ in row["ours"])
    print(f"\nn = {n:,}  (tile {row['tile']}, d = {row['d']})")
    print(f"  cl-diag exact      {ours_t:8.2f} s   peak +{ours_m:8.1f} MiB   runs: {runs}")
    if best["peer"]:
        peer_t, peer_m = best["peer"]
        runs = ", ".join(f"{t:.2f}" for t, _ in row["peer"])
        print(f"  sklearn + numpy    {peer_t:8.2f} s   peak +{peer_m:8.1f} MiB   runs: {runs}")
        print(
            f"  speed-up {peer_t / ours_t:6.1f}x   memory ratio (peer / cl-diag) "
            f"{peer_m / max(ours_m, 1e-9):6.1f}x"
            f"   max |diff| of mean/var/min/max {row['max_abs_diff']:.1e}"
        )
    stats_t, _ = best["stats"]
    workers_t, _ = best["workers"]
    runs = ", ".join(f"{t:.2f}" for t, _ in row["stats"])
    print(
        f"  cl-diag            {row['gflops_ours']:6.1f} GFLOP/s; the statistics alone (rows "
        f"normalised once) {stats_t:.2f} s, {row['gflops_stats']:.1f} GFLOP/s   runs: {runs}"
    )
    if best["tiles"]:
        tiles_t, _ = best["tiles"]
        print(
            f"  plain tile GEMMs   {tiles_t:8.2f} s   {row['gflops_tiles']:6.1f} GFLOP/s "
            "(torch threads);"
            f"  cl-diag = {100 * row['gflops_ours'] / row['gflops_tiles']:5.1f} % of it"
        )
    runs = ", ".join(f"{t:.2f}" for t, _ in row["workers"])
    print(
        f"  same, cl-diag's workers {workers_t:5.2f} s   {row['gflops_workers']:6.1f} GFLOP/s   "
        f"runs: {runs}"
    )
    paired = ", ".join(f"{100 * r:.0f}" for r in row["ratios"])
    print(
        f"  RATIO statistics / tile GEMMs through cl-diag's workers: "
        f"{100 * row['ratio_best']:5.1f} % (best vs best), "
        f"{100 * row['ratio_median']:5.1f} % (median of the paired repeats: {paired} %); "
        f"with normalising: {100 * row['gflops_ours'] / row['gflops_workers']:5.1f} %; "
        f"on {cpu_text()}"
    )
    cpu = row["cpu_ratios"]
    print(
        f"  the same RATIO in one thread's CPU time (time.thread_time): "
        f"{100 * statistics.median(cpu):5.1f} % (median of the paired repeats: "
        f"{', '.join(f'{100 * r:.0f}' for r in cpu)} %)"
    )
    if row["gflops_full"]:
        full_t, full_m = best["full"]
        print(
            f"  one full n x n mm  {full_t:8.2f} s   {row['gflops_full']:6.1f} GFLOP/s "
            f"(peak +{full_m:.0f} MiB);"
            f"  cl-diag = {100 * row['gflops_ours'] / row['gflops_full']:5.1f} % of it"
        )
    for kind, dm, mb, dv, vb in row.get("moments", []):
        verdict = "within" if dm <= mb and dv <= vb else "OUTSIDE"
        print(
            f"  moments vs the previous implementation, {kind}: |d mean| {dm:.1e} "
            f"(bound {mb:.1e}), |d var| {dv:.1e} (bound {vb:.1e}): {verdict} the bound"
        )


def l2_size() -> str:
    """The size of CPU 0's level-2 cache as sysfs gives it (e.g. "1024K"); "?" elsewhere."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2":
                return (index / "size").read_text().strip()
        except OSError:
            continue
    return "?"


def cpu_text() -> str:
    """What the ratio depends on besides the code: the CPU's model, the vector ISA ATen
    dispatches to (AVX2, AVX512, ...) and the L2 cache size per core."""
    from cl_diag.environment import cpu_model

    isa = torch.backends.cpu.get_cpu_capability()
    return f"{cpu_model()}, {isa}, L2 {l2_size()}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="2000,5000,10000,20000", help="comma-separated n (default %(default)s)"
    )
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs per size; the best is reported"
    )
    parser.add_argument(
        "--block-size", type=int, default=None, help="tile side (default: cl-diag's)"
    )
    parser.add_argument(
        "--skip-peer", action="store_true", help="only cl-diag and the plain matmuls"
    )
    parser.add_argument("--skip-100k", action="store_true", help="skip the n = 100,000 run")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{platform.processor() or platform.machine()}; CPU: {cpu_text()}"
    )
    for n in sizes:
        report(run_size(n, args.d, args.repeats, not args.skip_peer, args.block_size))
    if not args.skip_100k:
        n = 100_000
        row = run_size(n, args.d, 1, False, args.block_size)
        report(row)
        print(
            f"  (peer not run at n = {n:,}: its three {n:,} x {n:,} float32 matrices need "
            f"{3 * 4 * n * n / 2**30:.0f} GiB)"
        )
    print("\npeak = extra resident memory (VmHWM after reset) over the RSS before the call")
    print(
        f"cl-diag working set per CPU worker: ~16 bytes x tile^2 = "
        f"{16 * _default_tile(10**6, torch.device('cpu')) ** 2 / 2**20:.0f} MiB at the default tile"
    )


if __name__ == "__main__":
    main()
