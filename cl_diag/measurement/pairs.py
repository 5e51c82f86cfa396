"""Cosine-similarity statistics of the three pair types of Lee et al. (ICML 2025).

For two views U = (u_i), V = (v_i) of n instances (row i of each is instance i),
after L2-normalising every row (paper Sec. 3: ||f(.)|| = 1):

* ``positive``              s = u_i . v_i,                      n pairs;
* ``cross_view_negative``   s = u_i . v_j,  i != j,             n(n-1) ordered pairs;
* ``within_view_negative``  s = u_i . u_j and v_i . v_j, i < j, 2 * n(n-1)/2 = n(n-1) pairs.

For each type: count, mean, population variance (ddof 0), std, min, max, the
quantiles 1/5/25/50/75/95/99 %, a histogram on [-1, 1], and for the negative
types the *excessive-separation ratio* (paper Sec. 5, rebuttal Table 1):

    excessive_ratio = #{s < delta} / count,     delta = -1 / (n_ref - 1),

the fraction of negatives more separated than the full-batch optimum (the
simplex ETF of Thm 5.1), n_ref being the number of training instances.

Exact mode (default) visits every pair, streaming square tiles of the
similarity matrices (never an n x n matrix; working memory ~25 bytes x tile^2
per worker, whatever n): each tile is one float32 matmul with TF32 off, and
every statistic is accumulated from the float32 similarities in float64:

* mean and variance: per tile the float64 sum and M2 = sum (s - mean_tile)^2
  (one pass when that is numerically safe, else centred; see ``_Stream._m2``),
  merged with the parallel-variance formula of Chan, Golub & LeVeque (1979):
  M2 = sum_t M2_t + sum_t n_t (mean_t - mean)^2;
* min, max and the excessive count are exact;
* quantiles come from a fine histogram of B = hist_bins * 2^k >= 65,536 bins
  on [-1, 1] (bin width w = 2/B); every similarity is put in its exact bin,
  and quantiles use numpy's default (linear) rule with bin midpoints for the
  order statistics, so the reported value is within w/2 of the exact quantile
  of the float32 similarities; ``quantile_error`` states w. The positives (n
  values) get exact quantiles (``quantile_error`` 0). The report histogram
  (``hist_bins`` bins) is the fine one summed in groups of 2^k, so it is exact.

On CPU the tiles are shared among ``torch.get_num_threads()`` single-threaded
workers, and the per-tile partial results are reduced in tile order: the result
is the same for any number of cores.

Under ``torchrun`` (``ranks``, :class:`cl_diag.runtime.Ranks`) every rank holds
the same views and computes a fixed share of the tiles; the per-tile parts (float64 sums,
M2s, min, max, below-delta counts), the integer histogram bins and the positives are
gathered onto every rank and reduced exactly as one process reduces them, in tile order
(Chan's merge over the same parts, integer sums), so K ranks give the same bits as one.

Sampled mode draws ``num_pairs`` pairs of each type uniformly (with
replacement, from a ``torch.Generator`` seeded with ``seed``) and reports the
exact statistics of that sample, marked ``"estimate": true``: the paper's
protocol measures 5,000 pairs (paper-notes 8). Beyond ``SAMPLE_CHUNK`` (2^20)
pairs the sample is drawn and measured a chunk at a time into the streaming
statistics of exact mode, so memory does not grow with ``num_pairs`` (its
quantiles then come from the fine histogram, ``quantile_error`` its bin width);
``num_pairs`` is at most ``MAX_NUM_PAIRS`` (10^9).

Example::

    >>> import torch
    >>> from cl_diag.measurement.pairs import pair_statistics
    >>> g = torch.Generator().manual_seed(0)
    >>> z1 = torch.randn(100, 16, generator=g); z2 = z1 + 0.1 * torch.randn(100, 16, generator=g)
    >>> stats = pair_statistics(z1, z2, n_ref=50_000)
    >>> stats["cross_view_negative"]["count"]
    9900
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import torch

from cl_diag.measurement import theory
from cl_diag.measurement.inputs import (
    UnitViews,
    check_int,
    check_n_ref,
    label_codes,
    normalise_views,
)
from cl_diag.result import QUANTILES  # also imported from here by tests/test_pairs.py
from cl_diag.runtime import SINGLE, Ranks, tensor_fingerprint

__all__ = [
    "FINE_BINS_MIN",
    "fine_bins",
    "float32_at_least",
    "pair_statistics",
    "pair_statistics_of",
    "threshold",
    "threshold_float32",
]

#: the fine histogram has at least this many bins on [-1, 1] (bin width <= 3.1e-5)
FINE_BINS_MIN = 1 << 16
#: largest accepted ``hist_bins``: keeps s * B/2 exact in float64 (24 + 21 bits < 53)
MAX_HIST_BINS = 1 << 20
#: largest accepted seed: torch and numpy generators take seeds below 2^63 on every platform
MAX_SEED = 2**63 - 1
#: default working memory of one tile (float32 tile, two float64 copies, int32 bin
#: indices, bool mask: 25 bytes per similarity); CPU tiles stay in the last-level cache
_TILE_BYTES = {"cpu": 7 << 20, "cuda": 512 << 20}
_BYTES_PER_SIMILARITY = 25
#: a tile's one-pass M2 is kept when it is at least this fraction of its sum of squares
_NAIVE_M2_MIN_FRACTION = 1e-3
#: sampled mode draws and measures at most this many pairs of each type at once; a larger
#: --num-pairs is streamed chunk by chunk (memory independent of --num-pairs)
SAMPLE_CHUNK = 1 << 20
#: most pairs of each type sampled mode draws: beyond this exact mode is the better tool
MAX_NUM_PAIRS = 10**9
#: bytes of the rows sampled mode gathers at once
_GATHER_BYTES = 64 << 20


# --------------------------------------------------------------------------- inputs


def threshold(n_ref: int) -> float:
    """delta = -1/(n_ref - 1): the pairwise similarity of a simplex ETF of n_ref points (Thm 5.1);
    :func:`cl_diag.measurement.theory.delta`."""
    return theory.delta(n_ref)


def threshold_float32(n_ref: int) -> float:
    """The smallest float32 value T >= delta, so that for float32 s:  s < delta  <=>  s < T.

    Comparing a float32 tensor with the float64 delta would round delta to the
    nearest float32 and could move the boundary by half a unit in the last place.
    """
    return float32_at_least(threshold(n_ref))


def float32_at_least(value: float) -> float:
    """The smallest float32 T >= ``value``: for float32 s,  s < value  <=>  s < T
    (:func:`threshold_float32` for any threshold, e.g. a VRN delta given as a number)."""
    t32 = np.float32(value)
    if float(t32) < value:
        t32 = np.nextafter(t32, np.float32(np.inf))
    return float(t32)


def fine_bins(hist_bins: int) -> int:
    """Bins of the fine histogram: hist_bins * 2^k, the smallest such number >= 65,536 (k >= 1)."""
    m = 2
    while hist_bins * m < FINE_BINS_MIN:
        m *= 2
    return hist_bins * m


@contextlib.contextmanager
def full_fp32_matmul() -> Iterator[None]:
    """Run float32 matmuls in full float32: TF32 (CUDA) and reduced-precision CPU paths off.

    Similarities near delta are tiny (about -2e-5 for n_ref = 50,000); TF32 keeps
    only 10 mantissa bits and would blur them. The previous settings are restored.
    """
    saved: list[tuple[Any, ...]] = []  # ("precision", value) or (owner, attribute, value)
    with contextlib.suppress(Exception):
        saved.append(("precision", torch.get_float32_matmul_precision()))
        torch.set_float32_matmul_precision("highest")
    for owner, attr in (
        (torch.backends.cuda.matmul, "allow_tf32"),
        (torch.backends.cudnn, "allow_tf32"),
    ):
        with contextlib.suppress(Exception):
            saved.append((owner, attr, getattr(owner, attr)))
            setattr(owner, attr, False)
    try:
        yield
    finally:
        for item in reversed(saved):
            with contextlib.suppress(Exception):
                if item[0] == "precision":
                    torch.set_float32_matmul_precision(item[1])
                else:
                    setattr(item[0], item[1], item[2])


# --------------------------------------------------------------------------- streaming statistics


class _Workspace:
    """Reusable flat buffers, so a tile does not allocate (and page-fault) tens of MB each time."""

    def __init__(self, device):
        self.device = device
        self.buffers: dict[tuple[str, torch.dtype], torch.Tensor] = {}

    def get(self, name: str, numel: int, dtype: torch.dtype) -> torch.Tensor:
        key = (name, dtype)
        buf = self.buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dtype, device=self.device)
            self.buffers[key] = buf
        return buf[:numel]


class _Stream:
    """Running statistics of a stream of float32 similarities (see the module docstring).

    Each tile's partial results (count, float64 sum, M2 about the tile mean, min, max,
    excessive count) are kept under a key, and reduced in key order at the end: the
    result does not depend on which worker thread handled which tile, and a CUDA run
    does not synchronise per tile. Bin counts are integers, summed as they come.
    """

    def __init__(self, bins: int, t32: float, workspace: _Workspace):
        self.bins = bins
        self.half = float(bins // 2)
        # B a power of two: s * B/2 is exact in float32 too, so the bin index needs no float64 copy
        self.dyadic = bins & (bins - 1) == 0
        self.t32 = t32
        self.ws = workspace
        self.parts: list[tuple] = []
        self.hist = torch.zeros(bins, dtype=torch.int64, device=workspace.device)

    def add(self, x: torch.Tensor, key: int) -> None:
        """Add the float32 similarities ``x`` (any shape); ``x`` may be overwritten."""
        n = x.numel()
        if n == 0:
            return
        x = x.reshape(-1)
        mn, mx = torch.aminmax(x)
        mask = self.ws.get("below", n, torch.bool)
        torch.lt(x, self.t32, out=mask)
        below = torch.count_nonzero(mask)
        x64 = self.ws.get("x64", n, torch.float64)
        x64.copy_(x)
        total = x64.sum()
        m2 = self._m2(x64, total, n)
        part = torch.stack([total, m2, mn.double(), mx.double(), below.double()])
        # CPU: plain floats (a 0-d tensor costs ~100x the memory, and n = 100,000 makes 30,000
        # parts); CUDA: stay on the device, no synchronisation per tile
        self.parts.append((key, n, part.tolist() if part.device.type == "cpu" else part))
        # Fine bin k = [-1 + k w, -1 + (k+1) w), w = 2/B, i.e. k = floor(s * B/2) + B/2. In float64
        # s * B/2 is exact (24-bit mantissa times <= 21 significant bits), and so are floor and the
        # integer add, so every float32 similarity lands in its exact bin; s = 1 and float32
        # round-off beyond [-1, 1] go to the end bins.
        y = x if self.dyadic else x64
        y.mul_(self.half).floor_()
        idx = self.ws.get("idx", n, torch.int32)
        idx.copy_(y)
        idx.add_(self.bins // 2).clamp_(0, self.bins - 1)
        self.hist += torch.bincount(idx, minlength=self.bins)

    def _m2(self, x64: torch.Tensor, total: torch.Tensor, n: int) -> torch.Tensor:
        """M2 = sum (s - mean_tile)^2 of one tile, in float64.

        CPU, one pass: sum s^2 - (sum s)^2 / n. Its rounding error is at most about
        gamma * sum s^2 with gamma ~ 2e-12 for a million terms (float64, blocked sums), so it
        is kept when M2 >= 1e-3 * sum s^2 (relative error <= ~2e-9: the tile mean is within
        ~30 standard deviations of 0). Otherwise, and always on CUDA (the test would
        synchronise), the centred two-pass sum (s - mean)^2.
        """
        if x64.device.type == "cpu":
            squares = torch.dot(x64, x64)
            naive = squares - total * total / n
            if float(naive) >= _NAIVE_M2_MIN_FRACTION * float(squares):
                return naive
        dev = self.ws.get("dev", n, torch.float64)
        torch.sub(x64, total / n, out=dev)
        return torch.dot(dev, dev)

    def merge(self, other: _Stream) -> _Stream:
        out = _Stream(self.bins, self.t32, self.ws)
        out.parts = self.parts + other.parts
        out.hist = self.hist + other.hist
        return out

    def portable(self) -> tuple[list[tuple[int, int, list[float]]], torch.Tensor]:
        """The parts as plain floats and the histogram on the CPU, to send to other ranks
        (one device synchronisation on CUDA, where the parts are still device tensors)."""
        on_device = [p for p in self.parts if isinstance(p[2], torch.Tensor)]
        values = torch.stack([p[2] for p in on_device]).cpu().tolist() if on_device else []
        floats = iter(values)
        parts = [
            (key, n, next(floats) if isinstance(vals, torch.Tensor) else vals)
            for key, n, vals in self.parts
        ]
        return parts, self.hist.cpu()

    @classmethod
    def of_ranks(cls, bins: int, t32: float, ws: _Workspace, portables: list) -> _Stream:
        """The stream of all ranks' :meth:`portable` results: their parts (reduced later in
        key order, as one process does) and the integer sum of their histograms."""
        out = cls.__new__(cls)
        out.bins, out.half, out.t32, out.ws = bins, float(bins // 2), t32, ws
        out.dyadic = bins & (bins - 1) == 0
        out.parts = [part for parts, _ in portables for part in parts]
        out.hist = torch.stack([hist for _, hist in portables]).sum(dim=0)
        return out

    def summary(self, hist_bins: int, *, negative: bool, estimate: bool = False) -> dict:
        count = sum(p[1] for p in self.parts)
        if count == 0:
            return _empty_summary(
                hist_bins, negative=negative, estimate=estimate, quantile_error=2.0 / self.bins
            )
        parts = sorted(self.parts, key=lambda p: p[0])
        vals = [p[2] for p in parts]
        if isinstance(vals[0], torch.Tensor):
            vals = torch.stack(vals).cpu().tolist()
        table = torch.tensor(vals, dtype=torch.float64)  # columns: sum, M2, min, max, below
        n_t = torch.tensor([p[1] for p in parts], dtype=torch.float64)
        sums, m2s = table[:, 0], table[:, 1]
        mean = float(sums.sum()) / count
        # Chan et al.: the pooled M2 is the within-tile M2s plus the between-tile spread.
        m2 = float(m2s.sum() + (n_t * (sums / n_t - mean) ** 2).sum())
        var = max(m2 / count, 0.0)
        mn = float(table[:, 2].min())
        mx = float(table[:, 3].max())
        below = int(table[:, 4].sum())
        hist = self.hist.cpu().numpy()
        quantiles = _histogram_quantiles(hist, count, mn, mx)
        return _summary(
            count=count,
            mean=mean,
            var=var,
            mn=mn,
            mx=mx,
            quantiles=quantiles,
            quantile_error=2.0 / self.bins,
            fine_hist=hist,
            hist_bins=hist_bins,
            below=below if negative else None,
            estimate=estimate,
        )


def _fine_index(x: torch.Tensor, bins: int) -> torch.Tensor:
    """Exact fine-bin index of float32 similarities (see _Stream.add), as int64."""
    half = float(bins // 2)
    return x.to(torch.float64).mul_(half).floor_().add_(half).clamp_(0, bins - 1).to(torch.int64)


def _histogram_quantiles(hist: np.ndarray, count: int, mn: float, mx: float) -> dict[str, float]:
    """Quantiles (numpy's linear rule) from a fine histogram on [-1, 1].

    The order statistics x_(lo), x_(lo+1) around h = (count - 1) p are replaced by
    the midpoints of their bins, so |reported - exact| <= w/2 (w the bin width);
    clipping to [min, max] only moves the value towards the exact one.
    """
    bins = hist.shape[0]
    width = 2.0 / bins
    cum = np.cumsum(hist)
    out = {}
    for p in QUANTILES:
        h = (count - 1) * (p / 100.0)
        lo = math.floor(h)
        hi = min(lo + 1, count - 1)
        frac = h - lo
        k_lo, k_hi = np.searchsorted(cum, [lo, hi], side="right")
        m_lo = -1.0 + (int(k_lo) + 0.5) * width
        m_hi = -1.0 + (int(k_hi) + 0.5) * width
        out[str(p)] = float(min(max(m_lo + frac * (m_hi - m_lo), mn), mx))
    return out


def _exact_quantiles(x64_sorted: torch.Tensor) -> dict[str, float]:
    """numpy's default (linear) quantiles of sorted values: x_(lo) + (h - lo)(x_(lo+1) - x_(lo))."""
    count = x64_sorted.numel()
    values = x64_sorted.cpu().numpy()
    out = {}
    for p in QUANTILES:
        h = (count - 1) * (p / 100.0)
        lo = math.floor(h)
        hi = min(lo + 1, count - 1)
        out[str(p)] = float(values[lo] + (h - lo) * (values[hi] - values[lo]))
    return out


def _coarse(fine_hist: np.ndarray, hist_bins: int) -> list[int]:
    return [int(c) for c in fine_hist.reshape(hist_bins, -1).sum(axis=1)]


def _summary(
    *, count, mean, var, mn, mx, quantiles, quantile_error, fine_hist, hist_bins, below, estimate
) -> dict:
    out = {
        "count": int(count),
        "estimate": bool(estimate),
        "mean": float(mean),
        "var": float(var),
        "std": math.sqrt(var),
        "min": float(mn),
        "max": float(mx),
        "quantiles": quantiles,
        "quantile_error": float(quantile_error),
        "histogram": {
            "range": [-1.0, 1.0],
            "bins": int(hist_bins),
            "counts": _coarse(fine_hist, hist_bins),
        },
    }
    if below is not None:
        out["excessive_ratio"] = below / count
        out["excessive_count"] = int(below)
    return out


def _empty_summary(
    hist_bins: int, *, negative: bool, estimate: bool, quantile_error: float
) -> dict:
    """A split with no pairs (e.g. every instance in its own class): count 0, statistics null."""
    out = {
        "count": 0,
        "estimate": bool(estimate),
        "mean": None,
        "var": None,
        "std": None,
        "min": None,
        "max": None,
        "quantiles": {str(p): None for p in QUANTILES},
        "quantile_error": float(quantile_error),
        "histogram": {"range": [-1.0, 1.0], "bins": int(hist_bins), "counts": [0] * hist_bins},
    }
    if negative:
        out["excessive_ratio"] = None
        out["excessive_count"] = 0
    return out


def _sample_summary(
    x: torch.Tensor, *, t32: float, hist_bins: int, negative: bool, estimate: bool
) -> dict:
    """Exact statistics of a 1-D set of float32 similarities (a sample, or the n positives)."""
    bins = fine_bins(hist_bins)
    count = x.numel()
    if count == 0:
        return _empty_summary(hist_bins, negative=negative, estimate=estimate, quantile_error=0.0)
    x64 = x.to(torch.float64)
    mean = float(x64.sum()) / count
    var = float(((x64 - mean) ** 2).sum()) / count
    sorted64 = torch.sort(x64).values
    fine = torch.bincount(_fine_index(x, bins), minlength=bins).cpu().numpy()
    below = int(torch.count_nonzero(x < t32)) if negative else None
    return _summary(
        count=count,
        mean=mean,
        var=var,
        mn=float(sorted64[0]),
        mx=float(sorted64[-1]),
        quantiles=_exact_quantiles(sorted64),
        quantile_error=0.0,
        fine_hist=fine,
        hist_bins=hist_bins,
        below=below,
        estimate=estimate,
    )


# --------------------------------------------------------------------------- exact mode


def _default_tile(n: int, device: torch.device) -> int:
    budget = _TILE_BYTES["cuda" if device.type == "cuda" else "cpu"]
    tile = math.isqrt(budget // _BYTES_PER_SIMILARITY) // 64 * 64
    return max(64, min(tile, n))


def _off_diagonal(s: torch.Tensor) -> torch.Tensor:
    """The k(k-1) off-diagonal entries of a contiguous k x k tile, as a strided view.

    In the flat tile the diagonal sits at multiples of k+1, so after dropping entry 0 the
    rows of a (k-1, k+1) view hold k off-diagonal entries followed by one diagonal entry.
    """
    k = s.shape[0]
    return s.reshape(-1)[1:].view(k - 1, k + 1)[:, :k]


class _UpperIndex:
    """Flat positions of the strict upper triangle (j > i) of a k x k tile, cached per k.

    A precomputed gather (index_select) is ~10x faster than boolean-mask indexing,
    which runs a nonzero() per call.
    """

    def __init__(self, device):
        self.device = device
        self.cache: dict[int, torch.Tensor] = {}

    def get(self, k: int) -> torch.Tensor:
        if k not in self.cache:
            rows, cols = torch.triu_indices(k, k, offset=1, device=self.device)
            self.cache[k] = rows * k + cols
        return self.cache[k]


class _Split:
    """One negative pair type: one stream, or same-class and different-class streams when
    labelled."""

    def __init__(self, bins: int, t32: float, ws: _Workspace, labelled: bool):
        self.labelled = labelled
        self.streams = [_Stream(bins, t32, ws)] + ([_Stream(bins, t32, ws)] if labelled else [])

    def add(self, x: torch.Tensor, same, key: int) -> None:
        """``same``: None (unlabelled), True / False (the whole tile is same- / different-class),
        or a boolean tensor shaped like ``x``."""
        if not self.labelled or same is True:
            self.streams[0].add(x, key)
        elif same is False:
            self.streams[1].add(x, key)
        else:
            self.streams[0].add(torch.masked_select(x, same), key)
            self.streams[1].add(torch.masked_select(x, ~same), key)

    def merge(self, other: _Split) -> _Split:
        out = _Split.__new__(_Split)
        out.labelled = self.labelled
        out.streams = [a.merge(b) for a, b in zip(self.streams, other.streams, strict=True)]
        return out

    def portable(self) -> list:
        return [stream.portable() for stream in self.streams]

    @classmethod
    def of_ranks(cls, bins: int, t32: float, ws: _Workspace, portables: list) -> _Split:
        """The split of all ranks' :meth:`portable` results (see :meth:`_Stream.of_ranks`)."""
        out = cls.__new__(cls)
        out.labelled = len(portables[0]) == 2
        out.streams = [
            _Stream.of_ranks(bins, t32, ws, [p[k] for p in portables])
            for k in range(len(portables[0]))
        ]
        return out

    def summary(self, hist_bins: int, *, estimate: bool = False) -> dict:
        if not self.labelled:
            return self.streams[0].summary(hist_bins, negative=True, estimate=estimate)
        same, diff = self.streams
        out = same.merge(diff).summary(hist_bins, negative=True, estimate=estimate)
        out["by_class"] = {
            "same_class": same.summary(hist_bins, negative=True, estimate=estimate),
            "different_class": diff.summary(hist_bins, negative=True, estimate=estimate),
        }
        return out


def _tiles(n: int, tile: int) -> list[tuple[int, int, int, int, bool]]:
    """Tasks (row0, row1, col0, col1, upper): every tile of the cross-view matrix; ``upper``
    marks the tiles on or above the diagonal, which also carry the within-view pairs i < j."""
    blocks = [(s, min(s + tile, n)) for s in range(0, n, tile)]
    return [
        (r0, r1, c0, c1, b >= a)
        for a, (r0, r1) in enumerate(blocks)
        for b, (c0, c1) in enumerate(blocks)
    ]


def _tile_cost(task: tuple[int, int, int, int, bool]) -> int:
    """Similarities a tile computes: one matmul, three on and above the diagonal."""
    r0, r1, c0, c1, upper = task
    return (r1 - r0) * (c1 - c0) * (3 if upper else 1)


def _class_relation(codes: torch.Tensor, r0: int, r1: int, c0: int, c1: int):
    """For class codes sorted ascending: True if every (row, col) pair of the tile shares one
    class, False if none does, else the boolean same-class matrix."""
    rows, cols = codes[r0:r1], codes[c0:c1]
    r_lo, r_hi, c_lo, c_hi = int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])
    if r_hi < c_lo or c_hi < r_lo:
        return False
    if r_lo == r_hi == c_lo == c_hi:
        return True
    return rows[:, None] == cols[None, :]


def _exact_worker(
    tasks,
    u,
    v,
    codes,
    positives,
    *,
    bins: int,
    t32: float,
    tile: int,
    single_thread: bool,
    sides: tuple[bool, bool] = (True, True),
):
    """Process tasks pulled from the shared iterator ``tasks``; returns this worker's (cross,
    within). ``sides`` says whose within-view pairs the upper tiles add: u's, v's (both by
    default)."""
    if single_thread:
        torch.set_num_threads(1)
    device = u.device
    ws = _Workspace(device)
    upper_index = _UpperIndex(device)
    labelled = codes is not None
    cross = _Split(bins, t32, ws, labelled)
    within = _Split(bins, t32, ws, labelled)
    buf = torch.empty(tile * tile, dtype=torch.float32, device=device)
    with torch.inference_mode():  # grad mode is per thread; the caller set full float32 matmuls
        for key, (r0, r1, c0, c1, upper) in tasks:
            rows, cols = r1 - r0, c1 - c0
            diagonal = r0 == c0
            same = _class_relation(codes, r0, r1, c0, c1) if labelled else None
            s = buf[: rows * cols].view(rows, cols)
            torch.mm(u[r0:r1], v[c0:c1].T, out=s)
            if diagonal:
                positives[r0:r1] = s.diagonal()
                if rows > 1:
                    part = same if not isinstance(same, torch.Tensor) else _off_diagonal(same)
                    cross.add(_off_diagonal(s), part, 3 * key)
            else:
                cross.add(s, same, 3 * key)
            if not upper:
                continue
            for offset, x in ((1, u), (2, v)):
                if not sides[offset - 1]:
                    continue
                torch.mm(x[r0:r1], x[c0:c1].T, out=s)
                if diagonal:
                    pick = upper_index.get(rows)
                    part = (
                        same
                        if not isinstance(same, torch.Tensor)
                        else same.reshape(-1).index_select(0, pick)
                    )
                    within.add(s.reshape(-1).index_select(0, pick), part, 3 * key + offset)
                else:
                    within.add(s, same, 3 * key + offset)
    return cross, within


def _exact(
    u, v, codes, *, t32: float, hist_bins: int, tile: int, workers: int, ranks: Ranks = SINGLE
) -> dict:
    if codes is not None:
        # The statistics are over sets of pairs, so any common reordering of the instances
        # leaves them unchanged; sorted by class, most tiles are wholly same- or different-class.
        order = torch.sort(codes, stable=True).indices
        u, v, codes = u[order], v[order], codes[order]
    bins = fine_bins(hist_bins)
    cross, within, positives = _exact_parts(
        u, v, codes, t32=t32, bins=bins, tile=tile, workers=workers, ranks=ranks
    )
    return {
        "positive": _sample_summary(
            positives, t32=t32, hist_bins=hist_bins, negative=False, estimate=False
        ),
        "cross_view_negative": cross.summary(hist_bins),
        "within_view_negative": within.summary(hist_bins),
    }


def _exact_views(
    views: list[torch.Tensor],
    codes,
    *,
    t32: float,
    hist_bins: int,
    tile: int,
    workers: int,
    ranks: Ranks = SINGLE,
) -> dict:
    """The three pair types over V >= 3 views z^1..z^V of n instances:

    * positives z^i_a . z^j_a for every view pair i < j (n V(V-1)/2 values);
    * cross-view negatives z^i_a . z^j_b, a != b, for every view pair i < j (V(V-1)/2 n(n-1));
    * within-view negatives z^i_a . z^i_b, a < b, in every view (V n(n-1)/2).

    Each view pair (i, j) is the two-view tile pass with keys after the previous pairs' (so the
    parts reduce in one fixed order, as for two views); the within-view pairs of view 1 come
    with the pair (1, 2) and those of view j >= 2 with the pair (1, j), each view once."""
    if codes is not None:
        order = torch.sort(codes, stable=True).indices
        views, codes = [z[order] for z in views], codes[order]
    bins = fine_bins(hist_bins)
    n = views[0].shape[0]
    per_pair = len(_tiles(n, tile))
    cross = within = None
    positives = []
    pairs = [(i, j) for i in range(len(views)) for j in range(i + 1, len(views))]
    for p, (i, j) in enumerate(pairs):
        c, w, pos = _exact_parts(
            views[i],
            views[j],
            codes,
            t32=t32,
            bins=bins,
            tile=tile,
            workers=workers,
            ranks=ranks,
            sides=(p == 0, i == 0),
            key_base=p * per_pair,
        )
        cross = c if cross is None else cross.merge(c)
        within = w if within is None else within.merge(w)
        positives.append(pos)
    assert cross is not None and within is not None
    return {
        "positive": _sample_summary(
            torch.cat(positives), t32=t32, hist_bins=hist_bins, negative=False, estimate=False
        ),
        "cross_view_negative": cross.summary(hist_bins),
        "within_view_negative": within.summary(hist_bins),
    }


def _exact_parts(
    u,
    v,
    codes,
    *,
    t32: float,
    bins: int,
    tile: int,
    workers: int,
    ranks: Ranks = SINGLE,
    sides: tuple[bool, bool] = (True, True),
    key_base: int = 0,
) -> tuple[_Split, _Split, torch.Tensor]:
    """(cross, within, positives) of the views u, v (already in class order): the tile pass.

    A tile's key is ``key_base`` plus its place in the single-process order, whichever rank
    computes it; ``sides`` as for :func:`_exact_worker`."""
    n = u.shape[0]
    positives = torch.empty(n, dtype=torch.float32, device=u.device)
    tiles = _tiles(n, tile)
    mine = ranks.share([_tile_cost(task) for task in tiles])
    tasks = _LockedIter((key_base + key, tiles[key]) for key in mine)
    workers = max(1, min(workers, len(mine)))
    single = u.device.type == "cpu"

    def work(single_thread: bool) -> tuple[_Split, _Split]:
        return _exact_worker(
            tasks,
            u,
            v,
            codes,
            positives,
            bins=bins,
            t32=t32,
            tile=tile,
            single_thread=single_thread,
            sides=sides,
        )

    if workers <= 1:
        cross, within = work(single)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(work, True) for _ in range(workers)]
            results = [f.result() for f in futures]
        cross, within = results[0]
        for c, w in results[1:]:
            cross, within = cross.merge(c), within.merge(w)
    if ranks.distributed:
        diagonal = [tiles[key][:2] for key in mine if tiles[key][0] == tiles[key][2]]
        cross, within, positives = _gather_exact(
            ranks, cross, within, positives, diagonal, bins=bins, t32=t32
        )
    return cross, within, positives


def _gather_exact(ranks: Ranks, cross: _Split, within: _Split, positives, diagonal, *, bins, t32):
    """All ranks' tile parts, histograms and positives, on every rank (see the module
    docstring); ``diagonal`` holds the (row0, row1) of this rank's diagonal tiles, which
    computed the positives of those rows."""
    own = [(r0, positives[r0:r1].cpu()) for r0, r1 in diagonal]
    gathered = ranks.gather((cross.portable(), within.portable(), own))
    ws = _Workspace(torch.device("cpu"))
    cross = _Split.of_ranks(bins, t32, ws, [g[0] for g in gathered])
    within = _Split.of_ranks(bins, t32, ws, [g[1] for g in gathered])
    for _, _, rows in gathered:
        for r0, values in rows:
            positives[r0 : r0 + values.numel()] = values.to(positives.device)
    return cross, within, positives


class _LockedIter:
    """An iterator several worker threads can share."""

    def __init__(self, iterable):
        self._it = iter(iterable)
        self._lock = threading.Lock()

    def __iter__(self):
        return self

    def __next__(self):
        with self._lock:
            return next(self._it)


# --------------------------------------------------------------------------- sampled mode


def _distinct_pairs(n: int, k: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """k ordered pairs (i, j), i != j, uniform over the n(n-1) of them: j' uniform on n-1 values,
    skip i."""
    i = torch.randint(0, n, (k,), generator=gen)
    j = torch.randint(0, n - 1, (k,), generator=gen)
    return i, j + (j >= i).long()


def _dots(a, ia, b, ib, rows: int) -> torch.Tensor:
    """s_k = a[ia_k] . b[ib_k], gathered ``rows`` pairs at a time (each s_k is the same sum
    over d whatever the block, so the blocking never changes a value)."""
    device = a.device
    out = torch.empty(ia.shape[0], dtype=torch.float32, device=device)
    for r0 in range(0, ia.shape[0], rows):
        x, y = ia[r0 : r0 + rows].to(device), ib[r0 : r0 + rows].to(device)
        out[r0 : r0 + rows] = (a[x] * b[y]).sum(dim=1)
    return out


def _within_dots(u, v, view, i, j, rows: int) -> torch.Tensor:
    """Within-view negatives: u_i . u_j where ``view`` is 0, v_i . v_j where it is 1."""
    device = u.device
    out = torch.empty(i.shape[0], dtype=torch.float32, device=device)
    for r0 in range(0, i.shape[0], rows):
        side = view[r0 : r0 + rows].to(device).bool()[:, None]
        x, y = i[r0 : r0 + rows].to(device), j[r0 : r0 + rows].to(device)
        first = torch.where(side, v[x], u[x])
        second = torch.where(side, v[y], u[y])
        out[r0 : r0 + rows] = (first * second).sum(dim=1)
    return out


def _gather_rows(d: int) -> int:
    """Pairs gathered at once: two (rows, d) float32 blocks in about 64 MiB."""
    return max(1, _GATHER_BYTES // (8 * d))


def _draw(n: int, k: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """The pairs of one draw, in the generator's order: positives, cross-view (i, j), then the
    within-view side and (i, j)."""
    i_pos = torch.randint(0, n, (k,), generator=gen)
    i_x, j_x = _distinct_pairs(n, k, gen)
    # within-view: each view holds n(n-1)/2 unordered pairs, so a fair view then a uniform
    # ordered pair i != j (each unordered pair twice) is uniform over all n(n-1) of them
    view = torch.randint(0, 2, (k,), generator=gen)
    i_w, j_w = _distinct_pairs(n, k, gen)
    return i_pos, i_x, j_x, view, i_w, j_w


def _sampled(u, v, codes, *, t32: float, hist_bins: int, num_pairs: int, seed: int) -> dict:
    n = u.shape[0]
    device = u.device
    rows = _gather_rows(u.shape[1])
    # draws on the CPU generator: the same seed gives the same pairs on every device
    gen = torch.Generator().manual_seed(seed)
    if num_pairs > SAMPLE_CHUNK:
        return _sampled_streamed(
            u, v, codes, gen, t32=t32, hist_bins=hist_bins, num_pairs=num_pairs, rows=rows
        )
    i_pos, i_x, j_x, view, i_w, j_w = _draw(n, num_pairs, gen)
    pos = _dots(u, i_pos, v, i_pos, rows)
    xneg = _dots(u, i_x, v, j_x, rows)
    wneg = _within_dots(u, v, view, i_w, j_w, rows)

    def negative(x, i, j):
        out = _sample_summary(x, t32=t32, hist_bins=hist_bins, negative=True, estimate=True)
        if codes is not None:
            same = codes[i.to(device)] == codes[j.to(device)]
            out["by_class"] = {
                "same_class": _sample_summary(
                    x[same], t32=t32, hist_bins=hist_bins, negative=True, estimate=True
                ),
                "different_class": _sample_summary(
                    x[~same], t32=t32, hist_bins=hist_bins, negative=True, estimate=True
                ),
            }
        return out

    return {
        "positive": _sample_summary(
            pos, t32=t32, hist_bins=hist_bins, negative=False, estimate=True
        ),
        "cross_view_negative": negative(xneg, i_x, j_x),
        "within_view_negative": negative(wneg, i_w, j_w),
    }


def _sampled_streamed(
    u, v, codes, gen: torch.Generator, *, t32: float, hist_bins: int, num_pairs: int, rows: int
) -> dict:
    """Sampled mode beyond :data:`SAMPLE_CHUNK` pairs: the pairs are drawn and measured
    ``SAMPLE_CHUNK`` at a time into the streaming statistics of exact mode, so memory does not
    grow with ``num_pairs``. Mean, variance, min, max and the excessive count stay exact for
    the sample; quantiles come from the fine histogram (``quantile_error`` its bin width)."""
    n = u.shape[0]
    device = u.device
    bins = fine_bins(hist_bins)
    ws = _Workspace(device)
    labelled = codes is not None
    positive = _Stream(bins, t32, ws)
    cross, within = _Split(bins, t32, ws, labelled), _Split(bins, t32, ws, labelled)
    for key, start in enumerate(range(0, num_pairs, SAMPLE_CHUNK)):
        k = min(SAMPLE_CHUNK, num_pairs - start)
        i_pos, i_x, j_x, view, i_w, j_w = _draw(n, k, gen)
        positive.add(_dots(u, i_pos, v, i_pos, rows), key)
        for split, x, i, j in (
            (cross, _dots(u, i_x, v, j_x, rows), i_x, j_x),
            (within, _within_dots(u, v, view, i_w, j_w, rows), i_w, j_w),
        ):
            same = codes[i.to(device)] == codes[j.to(device)] if labelled else None
            split.add(x, same, key)
    return {
        "positive": positive.summary(hist_bins, negative=False, estimate=True),
        "cross_view_negative": cross.summary(hist_bins, estimate=True),
        "within_view_negative": within.summary(hist_bins, estimate=True),
    }


# --------------------------------------------------------------------------- public API


def pair_statistics(
    z1,
    z2,
    *,
    n_ref: int | None = None,
    labels=None,
    mode: str = "exact",
    num_pairs: int = 5000,
    seed: int = 0,
    block_size: int | None = None,
    hist_bins: int = 100,
    ranks: Ranks | None = None,
) -> dict:
    """Statistics of positive, cross-view negative and within-view negative cosine similarities.

    Args:
        z1, z2: (n, d) float tensors or arrays, the two views (row i = instance i); need not be
            normalised: rows are L2-normalised once
            (:func:`cl_diag.measurement.inputs.normalise_views`). Work runs on the tensors'
            device (CPU or CUDA).
        n_ref: instances the threshold delta = -1/(n_ref - 1) refers to (default n).
        labels: optional (n,) class labels; adds ``by_class`` (same_class / different_class)
            to each negative type. Same-class "negatives" are instance discrimination's false
            negatives.
        mode: ``"exact"`` (all pairs, streamed) or ``"sampled"`` (``num_pairs`` of each type,
            drawn uniformly with replacement with ``seed``; results marked as estimates).
        block_size: side of the square similarity tiles of exact mode (working memory about
            25 * block_size^2 bytes, independent of n); default from a memory budget
            (7 MiB on CPU, 512 MiB on CUDA).
        hist_bins: bins of the reported histogram on [-1, 1].
        ranks: under ``torchrun``, ``Ranks.of_process_group()``: every rank passes the same
            full views and gets the same result, exact mode's tiles being split over the ranks
            (see the module docstring); None: this process alone.

    Returns:
        ``{"positive": {...}, "cross_view_negative": {...}, "within_view_negative": {...}}``,
        each a plain dict in the order of docs/result-schema.md: count, estimate, mean, var
        (ddof 0), std, min, max, quantiles, quantile_error, histogram, and for the negative
        types excessive_ratio, excessive_count (strictly below delta) and by_class.
    """
    options = _Options.check(mode, num_pairs, seed, block_size, hist_bins)
    with _cpu_workers() as threads:
        views = normalise_views(z1, z2)
        n_ref = check_n_ref(n_ref, views.n)
        codes = label_codes(labels, views.n, views.u.device)
        return _measure(views, n_ref, codes, options, threads, ranks or SINGLE)


def pair_statistics_of(
    views: UnitViews,
    *,
    n_ref: int | None = None,
    codes: torch.Tensor | None = None,
    mode: str = "exact",
    num_pairs: int = 5000,
    seed: int = 0,
    block_size: int | None = None,
    hist_bins: int = 100,
    ranks: Ranks | None = None,
    more_views: Sequence[torch.Tensor] = (),
) -> dict:
    """:func:`pair_statistics` of views already checked and normalised by
    :func:`cl_diag.measurement.inputs.normalise_views` (the rows are used as they are), with
    class ``codes`` from :func:`cl_diag.measurement.inputs.label_codes`. Orchestration
    normalises each layer once and passes the same rows here and to geometry.

    ``more_views``: views 3..V of the same instances (unit rows shaped like ``views.u``, on its
    device), exact mode only: positives over every view pair, cross-view negatives over every
    view pair and within-view negatives in every view (see :func:`_exact_views`); none gives
    the two-view result, computed as before."""
    options = _Options.check(mode, num_pairs, seed, block_size, hist_bins)
    if more_views and options.mode != "exact":
        raise ValueError("more than two views are measured in exact mode only")
    with _cpu_workers() as threads:
        return _measure(views, n_ref, codes, options, threads, ranks or SINGLE, list(more_views))


class _Options(NamedTuple):
    mode: str
    num_pairs: int
    seed: int
    block_size: int | None
    hist_bins: int

    @classmethod
    def check(cls, mode, num_pairs, seed, block_size, hist_bins) -> _Options:
        if mode not in ("exact", "sampled"):
            raise ValueError(f"mode must be 'exact' or 'sampled', got {mode!r}.")
        hist_bins = check_int(hist_bins, "hist_bins", 1, MAX_HIST_BINS)
        seed = check_int(seed, "seed", 0, MAX_SEED)
        if mode == "sampled":
            num_pairs = check_int(num_pairs, "num_pairs", 1, MAX_NUM_PAIRS)
        if block_size is not None:
            block_size = check_int(block_size, "block_size", 1)
        return cls(mode, num_pairs, seed, block_size, hist_bins)


def _measure(
    views: UnitViews,
    n_ref,
    codes,
    options: _Options,
    threads: int,
    ranks: Ranks,
    more: list[torch.Tensor] | None = None,
) -> dict:
    u, v = views
    n = views.n
    n_ref = check_n_ref(n_ref, n)
    t32 = threshold_float32(n_ref)
    hist_bins = options.hist_bins
    with torch.inference_mode(), full_fp32_matmul():
        if options.mode == "sampled":
            num_pairs, seed = options.num_pairs, options.seed
            return _sampled(
                u, v, codes, t32=t32, hist_bins=hist_bins, num_pairs=num_pairs, seed=seed
            )
        tile = min(options.block_size or _default_tile(n, u.device), n)
        workers = 1 if u.device.type != "cpu" else min(threads, len(range(0, n, tile)) ** 2)
        # ranks holding different views (or tiles) would merge into a silently wrong result
        ranks.check_same(
            "views, labels or tile sizes",
            lambda: (tile, t32, tensor_fingerprint(u, v, codes, *(more or []))),
        )
        if more:
            return _exact_views(
                [u, v, *more],
                codes,
                t32=t32,
                hist_bins=hist_bins,
                tile=tile,
                workers=workers,
                ranks=ranks,
            )
        return _exact(
            u, v, codes, t32=t32, hist_bins=hist_bins, tile=tile, workers=workers, ranks=ranks
        )


@contextlib.contextmanager
def _cpu_workers() -> Iterator[int]:
    """Yield torch's thread count, with torch itself single-threaded meanwhile (restored after).

    Exact mode runs that many single-threaded workers on whole tiles instead: no OpenMP
    barrier per small op (which costs milliseconds when other processes share the cores),
    and each tile's arithmetic is the same whatever the number of cores.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield threads
    finally:
        torch.set_num_threads(threads)
