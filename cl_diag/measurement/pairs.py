"""Cosine-similarity statistics of the three pair types of Lee et al. (ICML 2025).

For two views U = (u_i), V = (v_i) of n instances, rows L2-normalised (paper Sec. 3):

* ``positive``              s = u_i . v_i,                      n pairs;
* ``cross_view_negative``   s = u_i . v_j,  i != j,             n(n-1) ordered pairs;
* ``within_view_negative``  s = u_i . u_j and v_i . v_j, i < j, 2 * n(n-1)/2 = n(n-1) pairs.

For each type: count, mean, population variance, std, min, max, quantiles, a histogram on
[-1, 1], and for the negatives the *excessive-separation ratio* (paper Sec. 5, rebuttal
Table 1)::

    excessive_ratio = #{s < delta} / count,     delta = -1 / (n_ref - 1),

the share of negatives more separated than the full-batch optimum (the simplex ETF of Thm
5.1), n_ref the number of training instances; ``excessive_margin_count`` counts those below
δ − :data:`EXCESS_MARGIN`, since at an ETF every negative sits at δ up to float32 residue.

Exact mode (default) streams square tiles of the similarity matrices (never n x n; ~16 bytes
x tile^2 per worker), one float32 matmul each with TF32 off. Each tile feeds a fine histogram
of B = hist_bins * 2^k >= 65,536 bins with δ as one more edge (:class:`_Grid`), so the
excessive count and the report histogram are exact and a quantile is within the bin width w
(``quantile_error``) of the float32 similarities' own; min and max are exact. On CPU one fused
numba loop per tile does it (:mod:`cl_diag.measurement.binning`), on CUDA torch operations.
Mean and variance come in closed form from float64 Gram sums (:mod:`cl_diag.measurement.moments`:
sum s = (sum u).(sum v) - sum u_i.v_i, sum s^2 = <U^T U, V^T V>_F - sum (u_i.v_i)^2), within
:func:`cl_diag.measurement.moments.error_bounds` of the float32 similarities' moments; where
d^2 > 4n the tiles' own float64 sums are cheaper (:func:`_closed_form`). Counts are integers,
extremes exact and tile sums added with math.fsum, so any number of CPU workers or
``torchrun`` ranks (:class:`cl_diag.runtime.Ranks`) gives the same bits.

Sampled mode reports the exact statistics of ``num_pairs`` pairs per type drawn uniformly
with replacement (seeded; the paper measures 5,000, paper-notes 8), marked ``"estimate":
true``; beyond ``SAMPLE_CHUNK`` pairs the sample is measured a chunk at a time into the tile
accumulators. Moments mode (n in the millions) gives the exact count, mean, variance and std
of every negative type over all pairs in O(n d^2), the exact positives, and the rest from
sampled pairs with :data:`CONFIDENCE` intervals (Wilson's for the ratio, order-statistic ones
for the quantiles).

Example::

    >>> import torch
    >>> from cl_diag.measurement.pairs import pair_statistics
    >>> g = torch.Generator().manual_seed(0)
    >>> z1 = torch.randn(100, 16, generator=g); z2 = z1 + 0.1 * torch.randn(100, 16, generator=g)
    >>> stats = pair_statistics(z1, z2, n_ref=50_000)
    >>> stats["cross_view_negative"].count
    9900
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
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
from cl_diag.measurement.moments import MomentPass, Moments, one_blas_thread, pair_moments
from cl_diag.measurement.stats import CONFIDENCE, wilson_interval, z_value
from cl_diag.measurement.tile_parts import ALL, OFF_DIAGONAL, UPPER

# the bounds of hist_bins (s * B/2 exact in float64: 24 + 21 bits < 53), of the seed (what
# torch and numpy generators take) and of num_pairs are declared with the options
from cl_diag.options import MAX_HIST_BINS, MAX_NUM_PAIRS, MAX_SEED, PAIR_MODES
from cl_diag.result import (
    QUANTILES,  # also imported from here by tests/test_pairs.py
    ClassSplit,
    Histogram,
    Interval,
    PairStats,
    Sampling,
)
from cl_diag.runtime import SINGLE, Ranks, tensor_fingerprint
from cl_diag.vocabulary import NEGATIVE_TYPES, PairType

__all__ = [
    "FINE_BINS_MIN",
    "delta_float32",
    "fine_bins",
    "float32_at_least",
    "pair_statistics",
    "pair_statistics_of",
]

#: the fine histogram has at least this many bins on [-1, 1] (bin width <= 3.1e-5)
FINE_BINS_MIN = 1 << 16
#: default working memory of one tile (the float32 tile, its float64 copy and the int32 bin
#: indices: 16 bytes per similarity); CPU tiles stay in the last-level cache
_TILE_BYTES = {"cpu": 7 << 20, "cuda": 512 << 20}
_BYTES_PER_SIMILARITY = 16
#: a tile's one-pass M2 is kept when it is at least this fraction of its sum of squares
_NAIVE_M2_MIN_FRACTION = 1e-3
#: sampled mode draws and measures at most this many pairs of each type at once; a larger
#: --num-pairs is streamed chunk by chunk (memory independent of --num-pairs)
SAMPLE_CHUNK = 1 << 20
#: CPU tiles through the fused loop of :mod:`cl_diag.measurement.binning` (False: the torch
#: operations CUDA runs, which tests compare it with)
_USE_KERNEL = True
#: similarities the fused loop counts into int32 bins before they are added to the int64 ones
_INT32_PENDING = 2**31 - 1 - (1 << 24)
#: what ``mode`` takes (declared with the option --pairs): every pair; ``num_pairs`` sampled
#: pairs of each type; the exact mean and variance of every pair in closed form with the rest
#: estimated from ``num_pairs`` pairs
MODES = PAIR_MODES
#: bytes of the rows sampled mode gathers at once
_GATHER_BYTES = 64 << 20


# --------------------------------------------------------------------------- inputs


def delta_float32(n_ref: int) -> float:
    """The smallest float32 value T >= delta, so that for float32 s:  s < delta  <=>  s < T.

    Comparing a float32 tensor with the float64 delta would round delta to the
    nearest float32 and could move the boundary by half a unit in the last place.
    """
    return float32_at_least(theory.delta(n_ref))


def float32_at_least(value: float) -> float:
    """The smallest float32 T >= ``value``: for float32 s,  s < value  <=>  s < T
    (:func:`delta_float32` for any threshold, e.g. a VRN delta given as a number)."""
    t32 = np.float32(value)
    if float(t32) < value:
        t32 = np.nextafter(t32, np.float32(np.inf))
    return float(t32)


#: ε of "below δ − ε": the margin count (``excessive_margin_count``) takes a negative as
#: over-separated only when it lies at least this far below δ. float32 rounding of a dot product
#: of unit vectors is ~1e-6 at d ≤ 1000, and a run stopped at a flat loss leaves its simplex ETF
#: up to ~3e-4 from δ (the free sigmoid study's within-view runs): whether such a negative is
#: "below δ" is residue, not separation. The strict count (s < δ) stays the paper's measure.
EXCESS_MARGIN = 1e-3


def margin_bin(t32: float, bins: int) -> int:
    """The fine bin index k whose lower edge -1 + k w (w = 2/bins) is the last grid edge at or
    below T − :data:`EXCESS_MARGIN` (T = :func:`delta_float32`): a similarity counts in the margin
    count iff its fine bin is below k, i.e. s < -1 + k w, an edge within w of T − ε (w ≤ 3.1e-5
    for the fine grid of :func:`fine_bins`), so the count is exact for that edge."""
    half = bins // 2
    return min(max(math.floor((t32 - EXCESS_MARGIN) * half) + half, 0), bins)


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


# --------------------------------------------------------------------------- the tile pass


class _Workspace:
    """Reusable flat buffers, so a tile does not allocate (and page-fault) tens of MB each time."""

    def __init__(self, device):
        self.device = device
        self.buffers: dict[tuple[str, torch.dtype], torch.Tensor] = {}
        self.upper = _UpperIndex(device)

    def get(self, name: str, numel: int, dtype: torch.dtype) -> torch.Tensor:
        key = (name, dtype)
        buf = self.buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dtype, device=self.device)
            self.buffers[key] = buf
        return buf[:numel]


class _Grid:
    """The bins the tile pass counts into: the fine grid on [-1, 1] with delta as one more edge.

    Fine bin k = [-1 + k w, -1 + (k+1) w), w = 2/B, is k = floor(s B/2) + B/2 for a float32
    similarity s: s * B/2 is exact in float64 (24-bit mantissa times <= 21 significant bits), and
    in float32 too when B is a power of two, so floor and the integer add are exact and every s
    lands in its exact bin. delta is made an edge by adding [s >= T], T the smallest float32 >=
    delta (:func:`delta_float32`), read off the sign bit of the float32 difference s - T
    (exact: a difference of two floats is zero only when they are equal and never changes sign):

        e(s) = floor(s B/2) + B/2 + 1 + [s >= T]

    so fine bins below the one holding T keep their index + 1, that bin splits in two (below /
    above T) and the bins above shift by 2; e = 0 and e = B + 2 are guards for float32 round-off
    beyond -1 and 1 (folded into the end bins, as numpy's histogram puts s = 1 in the last bin).
    The count below delta is the sum of the bins up to the split, the fine histogram the bins
    with the split merged: both exact, from one bincount.
    """

    def __init__(self, hist_bins: int, t32: float):
        self.hist_bins = hist_bins
        self.fine = fine_bins(hist_bins)
        self.half = self.fine // 2
        self.t32 = t32
        #: bins of the extended grid
        self.size = self.fine + 3
        #: fine bin holding T (t32 * B/2 is exact in float64)
        self.k_delta = math.floor(t32 * self.half) + self.half
        #: B/2 a power of two: the bin index is exact in float32 (no float64 copy)
        self.float32 = self.half & (self.half - 1) == 0

    def floor_index(self, x: torch.Tensor, ws: _Workspace, out: torch.Tensor) -> None:
        """``out`` (int32, x.numel()) = floor(s B/2) of the float32 similarities ``x`` (any
        shape or strides; ``x`` is left as it is)."""
        if self.float32:
            q = ws.get("q32", x.numel(), torch.float32).view(x.shape)
            torch.mul(x, float(self.half), out=q)
        else:
            q = ws.get("q64", x.numel(), torch.float64).view(x.shape)
            q.copy_(x)
            q.mul_(float(self.half))
        q.floor_()
        out.view(x.shape).copy_(q)

    def finish_index(self, idx: torch.Tensor, x: torch.Tensor, *, clamp: bool) -> None:
        """Turn floor(s B/2) in ``idx`` into the extended index e(s); overwrites ``x``."""
        if clamp:
            idx.clamp_(-self.half - 1, self.half)
        x.sub_(self.t32)  # sign bit set exactly where s < T
        bits = x.view(torch.int32).bitwise_right_shift_(31)  # -1 where s < T, else 0
        idx.view(x.shape).add_(bits)
        idx.add_(self.half + 2)

    def fold(self, ext: np.ndarray) -> tuple[np.ndarray, int]:
        """(fine histogram, count below delta) of an extended histogram."""
        k = self.k_delta
        fine = np.empty(self.fine, dtype=np.int64)
        fine[:k] = ext[1 : k + 1]
        fine[k] = ext[k + 1] + ext[k + 2]
        fine[k + 1 :] = ext[k + 3 : self.fine + 2]
        fine[0] += ext[0]
        fine[-1] += ext[self.fine + 2]
        return fine, int(ext[: k + 2].sum())

    def bin_of(self, s: float) -> int:
        """floor(s B/2) of a float32 value (exact in float64)."""
        return math.floor(s * self.half)


class _Acc:
    """What the tile pass gathers for one set of pairs (a pair type, or one class split of it):
    the extended histogram, the exact min and max, and with ``sums`` the per-tile float64 sum
    and sum of squares of the float32 similarities (key, count, sum, sum of squares)."""

    def __init__(self, grid: _Grid, device, sums: bool):
        self.hist = torch.zeros(grid.size, dtype=torch.int64, device=device)
        self.lo = math.inf
        self.hi = -math.inf
        #: floor(s B/2) of lo and hi: a tile whose bins stay strictly inside cannot change them
        self.lo_bin = math.inf
        self.hi_bin = -math.inf
        self.device_extremes: list[torch.Tensor] = []  # CUDA: (min, max) per tile, no sync
        self.sums = sums
        self.parts: list[tuple[int, int, Any, Any]] = []

    def extremes(self, mn: float, mx: float, grid: _Grid) -> None:
        if mn < self.lo:
            self.lo, self.lo_bin = mn, grid.bin_of(mn)
        if mx > self.hi:
            self.hi, self.hi_bin = mx, grid.bin_of(mx)

    def merge(self, other: _Acc, grid: _Grid) -> None:
        self.hist += other.hist.to(self.hist.device)
        self.extremes(other.lo, other.hi, grid)
        self.device_extremes += other.device_extremes
        self.parts += other.parts

    def settle(self, grid: _Grid) -> None:
        """Reduce the CUDA per-tile extremes (one device synchronisation)."""
        if self.device_extremes:
            both = torch.stack(self.device_extremes).cpu()
            self.device_extremes = []
            self.extremes(float(both[:, 0].min()), float(both[:, 1].max()), grid)

    def portable(self) -> tuple:
        values = [(k, n, float(a), float(b)) for k, n, a, b in self.parts]
        return self.hist.cpu(), self.lo, self.hi, values

    @classmethod
    def of_ranks(cls, grid: _Grid, sums: bool, portables: list) -> _Acc:
        out = cls(grid, torch.device("cpu"), sums)
        for hist, lo, hi, parts in portables:
            out.hist += hist
            out.extremes(lo, hi, grid)
            out.parts += parts
        return out

    def moments(self) -> tuple[int, float, float]:
        """(count, sum, sum of squares) of the tiles' float32 similarities: math.fsum, so the
        value does not depend on the order the tiles were done in, nor on the ranks."""
        values = [(n, float(a), float(b)) for _, n, a, b in self.parts]
        return (
            sum(n for n, _, _ in values),
            math.fsum(a for _, a, _ in values),
            math.fsum(b for _, _, b in values),
        )


class _Split:
    """One negative pair type: one accumulator, or same-class and different-class ones when
    labelled (a tile that mixes both counts into one bincount, the different-class indices
    offset by the grid size)."""

    def __init__(
        self, grid: _Grid, ws: _Workspace, labelled: bool, sums: bool, kernel: bool | None = None
    ):
        self.grid, self.ws, self.labelled, self.sums = grid, ws, labelled, sums
        device = ws.device
        self.accs = [_Acc(grid, device, sums)] + ([_Acc(grid, device, sums)] if labelled else [])
        self.cpu = device.type == "cpu"
        #: CPU tiles through the fused loop of :mod:`cl_diag.measurement.binning`
        self.kernel = (_USE_KERNEL if kernel is None else kernel) and self.cpu
        if self.kernel:
            splits = len(self.accs)
            # int32 counts (half the cache of int64), added into the accumulators' int64
            # histograms before they could overflow
            self.counts = np.zeros((splits, grid.size), dtype=np.int32)
            self.pending = 0
            self.bounds = np.array([[math.inf, -math.inf]] * splits)
            self.tile_sums = np.zeros((splits, 3))

    def _sync(self) -> None:
        """The fused loop's counts and extremes into the accumulators (before they are read)."""
        if self.kernel:
            for acc, counts, (lo, hi) in zip(self.accs, self.counts, self.bounds, strict=True):
                acc.hist += torch.from_numpy(counts)
                acc.extremes(float(lo), float(hi), self.grid)
            self.counts[:] = 0
            self.pending = 0

    def add_tile(self, s: torch.Tensor, same, key: int, part: int) -> None:
        """Add the pairs of the float32 tile ``s`` (2-D, contiguous; overwritten on CUDA):
        every entry (``binning.ALL``), those off the diagonal (``OFF_DIAGONAL``) or strictly
        above it (``UPPER``); ``same`` as for :meth:`add`, a matrix shaped like ``s``."""
        if not self.kernel:
            if part == OFF_DIAGONAL:
                s = _off_diagonal(s)
                same = same if not isinstance(same, torch.Tensor) else _off_diagonal(same)
            elif part == UPPER:
                pick = self.ws.upper.get(s.shape[0])
                s = s.reshape(-1).index_select(0, pick)
                if isinstance(same, torch.Tensor):
                    same = same.reshape(-1).index_select(0, pick)
            self.add(s, same, key)
            return
        from cl_diag.measurement import binning

        if s.numel() == 0 or (part != ALL and s.shape[0] < 2):
            return
        grid = self.grid
        args = (grid.half, np.float32(grid.t32), grid.half + 1, grid.size - 1)
        if self.pending + s.numel() > _INT32_PENDING:
            self._sync()
        self.pending += s.numel()
        sums = self.tile_sums
        sums[:] = 0.0
        x = s.numpy()
        if isinstance(same, torch.Tensor):
            mask = same.numpy()
            binning.bin_tile_masked(x, part, mask, *args, self.counts, self.bounds, sums, self.sums)
            splits = [0, 1]
        else:
            split = 1 if (self.labelled and same is False) else 0
            binning.bin_tile(x, part, split, *args, self.counts, self.bounds, sums, self.sums)
            splits = [split]
        if self.sums:
            for k in splits:
                if sums[k, 2]:
                    self.accs[k].parts.append(
                        (key, int(sums[k, 2]), float(sums[k, 0]), float(sums[k, 1]))
                    )

    def add(self, x: torch.Tensor, same, key: int) -> None:
        """Add the float32 similarities ``x`` (any shape; overwritten). ``same``: None
        (unlabelled), True / False (the whole tile is same- / different-class), or a boolean
        tensor shaped like ``x``."""
        n = x.numel()
        if n == 0:
            return
        grid, ws = self.grid, self.ws
        if not self.labelled or same is True:
            members: list[tuple[_Acc, Any]] = [(self.accs[0], None)]
        elif same is False:
            members = [(self.accs[1], None)]
        else:
            members = [(self.accs[0], same), (self.accs[1], ~same)]
        idx = ws.get("idx", n, torch.int32)
        grid.floor_index(x, ws, idx)
        if self.cpu:
            low, high = (int(t) for t in torch.aminmax(idx))
            for acc, mask in members:
                # the exact extremes only where this tile reaches the bins of the ones so far
                if low <= acc.lo_bin or high >= acc.hi_bin:
                    mn, mx = _extremes(x, mask)
                    acc.extremes(mn, mx, grid)
            clamp = low < -grid.half - 1 or high > grid.half
        else:
            for acc, mask in members:
                acc.device_extremes.append(torch.stack(_device_extremes(x, mask)))
            clamp = True
        if self.sums:
            x64 = ws.get("x64", n, torch.float64).view(x.shape)
            x64.copy_(x)
            for acc, mask in members:
                part = x64 if mask is None else x64 * mask
                count = n if mask is None else int(mask.sum())
                total = part.sum()
                squares = torch.dot(part.reshape(-1), part.reshape(-1))
                if self.cpu:  # plain floats; CUDA: device scalars, read once at the end
                    acc.parts.append((key, count, float(total), float(squares)))
                else:
                    acc.parts.append((key, count, total, squares))
        grid.finish_index(idx, x, clamp=clamp)
        if len(members) == 1:
            members[0][0].hist += torch.bincount(idx, minlength=grid.size)
            return
        # one bincount for both splits: different-class pairs counted grid.size bins further
        idx.view(x.shape).add_(members[1][1].to(torch.int32), alpha=grid.size)
        both = torch.bincount(idx, minlength=2 * grid.size)
        self.accs[0].hist += both[: grid.size]
        self.accs[1].hist += both[grid.size :]

    def merge(self, other: _Split) -> _Split:
        self._sync()
        other._sync()
        for mine, theirs in zip(self.accs, other.accs, strict=True):
            mine.merge(theirs, self.grid)
        if self.kernel:
            self.bounds = np.array([[acc.lo, acc.hi] for acc in self.accs])
        return self

    def portable(self) -> list:
        self._sync()
        for acc in self.accs:
            acc.settle(self.grid)
        return [acc.portable() for acc in self.accs]

    @classmethod
    def of_ranks(cls, grid: _Grid, sums: bool, portables: list) -> _Split:
        """The split of all ranks' :meth:`portable` results: integer histograms summed, exact
        extremes, the moment parts of every tile (summed with math.fsum, order-free)."""
        out = cls(grid, _Workspace(torch.device("cpu")), len(portables[0]) == 2, sums, False)
        out.accs = [
            _Acc.of_ranks(grid, sums, [p[k] for p in portables]) for k in range(len(portables[0]))
        ]
        return out

    def summaries(
        self,
        moments: Sequence[Moments] | None,
        *,
        estimate: bool = False,
        negative: bool = True,
        intervals: bool = False,
    ) -> PairStats:
        """The statistics of this pair type; ``moments``: closed-form moments (whole, same,
        different), or None to take them from the tiles' sums; ``intervals``: add the
        ``sampling`` block of moments mode."""
        self._sync()
        for acc in self.accs:
            acc.settle(self.grid)

        def one(accs: list[_Acc], k: int) -> PairStats:
            closed = moments[k] if moments else None
            out = _acc_summary(self.grid, accs, closed, estimate=estimate, negative=negative)
            if intervals:
                hist = np.sum([acc.hist.cpu().numpy() for acc in accs], axis=0)
                fine, below = self.grid.fold(hist)
                sampling = _sampling_intervals(int(fine.sum()), below, fine_hist=fine)
                out = replace(out, sampling=sampling)
            return out

        if not self.labelled:
            return one(self.accs, 0)
        return replace(
            one(self.accs, 0),
            by_class=ClassSplit(
                same_class=one([self.accs[0]], 1), different_class=one([self.accs[1]], 2)
            ),
        )


def _extremes(x: torch.Tensor, mask) -> tuple[float, float]:
    """Exact (min, max) of ``x``, or of its entries where ``mask`` (inf / -inf if none)."""
    if mask is None:
        mn, mx = torch.aminmax(x)
        return float(mn), float(mx)
    if not bool(mask.any()):
        return math.inf, -math.inf
    picked = torch.masked_select(x, mask)
    mn, mx = torch.aminmax(picked)
    return float(mn), float(mx)


def _device_extremes(x: torch.Tensor, mask) -> tuple[torch.Tensor, torch.Tensor]:
    """(min, max) of ``x`` (where ``mask``) as float64 device scalars (+-inf if empty)."""
    if mask is not None:
        low = torch.where(mask, x, torch.full_like(x, math.inf)).min()
        high = torch.where(mask, x, torch.full_like(x, -math.inf)).max()
        return low.double(), high.double()
    low, high = torch.aminmax(x)
    return low.double(), high.double()


def _acc_summary(
    grid: _Grid, accs: list[_Acc], moments, *, estimate: bool = False, negative: bool = True
) -> PairStats:
    """The summary of one or more accumulators' pairs (several: a labelled pair type's two
    splits, merged): histogram, extremes, below-delta count from the tiles; mean and variance
    from ``moments`` (closed form) or, when None, from the tiles' sums."""
    hist = accs[0].hist.cpu().numpy().copy()
    for acc in accs[1:]:
        hist += acc.hist.cpu().numpy()
    fine, below = grid.fold(hist)
    count = int(fine.sum())
    if count == 0:
        return _empty_summary(
            grid.hist_bins, negative=negative, estimate=estimate, quantile_error=2.0 / grid.fine
        )
    mn = min(acc.lo for acc in accs)
    mx = max(acc.hi for acc in accs)
    if moments is not None:
        if moments.count != count:
            raise AssertionError(f"{moments.count} pairs in closed form, {count} in the tiles")
        mean, var = moments.mean, moments.var
    else:
        sums = [acc.moments() for acc in accs]
        total = math.fsum(s[1] for s in sums)
        squares = math.fsum(s[2] for s in sums)
        mean = total / count
        var = max((squares - total * total / count) / count, 0.0)
    return _summary(
        count=count,
        mean=mean,
        var=var,
        mn=mn,
        mx=mx,
        quantiles=_histogram_quantiles(fine, count, mn, mx),
        quantile_error=2.0 / grid.fine,
        fine_hist=fine,
        hist_bins=grid.hist_bins,
        below=below if negative else None,
        margin=margin_bin(grid.t32, grid.fine) if negative else None,
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
    *,
    count,
    mean,
    var,
    mn,
    mx,
    quantiles,
    quantile_error,
    fine_hist,
    hist_bins,
    below,
    margin,
    estimate,
) -> PairStats:
    """``below``: the count of s < δ; ``margin``: the fine bin index of :func:`margin_bin`
    (None for positives)."""
    return PairStats(
        count=int(count),
        estimate=bool(estimate),
        mean=float(mean),
        var=float(var),
        std=math.sqrt(var),
        min=float(mn),
        max=float(mx),
        quantiles=quantiles,
        quantile_error=float(quantile_error),
        histogram=Histogram(bins=int(hist_bins), counts=_coarse(fine_hist, hist_bins)),
        excessive_ratio=None if below is None else below / count,
        excessive_count=None if below is None else int(below),
        excessive_margin_count=None if margin is None else int(fine_hist[:margin].sum()),
    )


def _empty_summary(
    hist_bins: int, *, negative: bool, estimate: bool, quantile_error: float
) -> PairStats:
    """A split with no pairs (e.g. every instance in its own class): count 0, statistics null."""
    return PairStats(
        count=0,
        estimate=bool(estimate),
        mean=None,
        var=None,
        std=None,
        min=None,
        max=None,
        quantiles={str(p): None for p in QUANTILES},
        quantile_error=float(quantile_error),
        histogram=Histogram(bins=int(hist_bins), counts=[0] * hist_bins),
        excessive_count=0 if negative else None,
        excessive_margin_count=0 if negative else None,
    )


def _sample_summary(
    x: torch.Tensor,
    *,
    t32: float,
    hist_bins: int,
    negative: bool,
    estimate: bool,
    intervals: bool = False,
) -> PairStats:
    """Exact statistics of a 1-D set of float32 similarities (a sample, or the n positives);
    with ``intervals`` the ``sampling`` block of moments mode too."""
    bins = fine_bins(hist_bins)
    count = x.numel()
    if count == 0:
        out = _empty_summary(hist_bins, negative=negative, estimate=estimate, quantile_error=0.0)
        return replace(out, sampling=_sampling_intervals(0, None)) if intervals else out
    x64 = x.to(torch.float64)
    mean = float(x64.sum()) / count
    var = float(((x64 - mean) ** 2).sum()) / count
    sorted64 = torch.sort(x64).values
    fine = torch.bincount(_fine_index(x, bins), minlength=bins).cpu().numpy()
    below = int(torch.count_nonzero(x < t32)) if negative else None
    out = _summary(
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
        margin=margin_bin(t32, bins) if negative else None,
        estimate=estimate,
    )
    if intervals:
        out = replace(out, sampling=_sampling_intervals(count, below, sorted_values=sorted64))
    return out


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
    grid: _Grid,
    sums: bool,
    tile: int,
    single_thread: bool,
    sides: tuple[bool, bool] = (True, True),
):
    """Process tasks pulled from the shared iterator ``tasks``: (key, tile), or (None, a
    callable) for a job of the moments (:class:`cl_diag.measurement.moments.MomentPass`).
    Returns this worker's (cross, within). ``sides`` says whose within-view pairs the upper
    tiles add: u's, v's (both by default)."""
    if single_thread:
        torch.set_num_threads(1)
    device = u.device
    ws = _Workspace(device)
    labelled = codes is not None
    cross = _Split(grid, ws, labelled, sums)
    within = _Split(grid, ws, labelled, sums)
    buf = torch.empty(tile * tile, dtype=torch.float32, device=device)
    with torch.inference_mode():  # grad mode is per thread; the caller set full float32 matmuls
        for key, task in tasks:
            if key is None:  # a job of the closed-form moments
                task()
                continue
            r0, r1, c0, c1, upper = task
            rows, cols = r1 - r0, c1 - c0
            diagonal = r0 == c0
            same = _class_relation(codes, r0, r1, c0, c1) if labelled else None
            s = buf[: rows * cols].view(rows, cols)
            torch.mm(u[r0:r1], v[c0:c1].T, out=s)
            if diagonal:
                positives[r0:r1] = s.diagonal()
            cross.add_tile(s, same, 3 * key, OFF_DIAGONAL if diagonal else ALL)
            if not upper:
                continue
            for offset, x in ((1, u), (2, v)):
                if not sides[offset - 1]:
                    continue
                torch.mm(x[r0:r1], x[c0:c1].T, out=s)
                within.add_tile(s, same, 3 * key + offset, UPPER if diagonal else ALL)
    return cross, within


def _closed_form(n: int, d: int) -> bool:
    """Moments from the d x d Gram matrices (O(n d^2), :mod:`cl_diag.measurement.moments`)
    rather than from the tiles' sums: when d^2 <= 4n, where the float64 Grams cost less than
    summing the n^2 similarities (at d = 128 from n = 4,096 on; a 2,048-wide backbone layer
    needs n >= 1,048,576)."""
    return d * d <= 4 * n


def _sorted_by_class(views: list[torch.Tensor], codes):
    """The views and codes in class order (the statistics are over sets of pairs, so any common
    reordering of the instances leaves them unchanged; sorted by class, most tiles are wholly
    same- or different-class)."""
    if codes is None:
        return views, None
    order = torch.sort(codes, stable=True).indices
    return [z[order] for z in views], codes[order]


def _exact(
    u, v, codes, *, t32: float, hist_bins: int, tile: int, workers: int, ranks: Ranks = SINGLE
) -> dict[str, PairStats]:
    return _exact_views(
        [u, v], codes, t32=t32, hist_bins=hist_bins, tile=tile, workers=workers, ranks=ranks
    )


def _exact_views(
    views: list[torch.Tensor],
    codes,
    *,
    t32: float,
    hist_bins: int,
    tile: int,
    workers: int,
    ranks: Ranks = SINGLE,
) -> dict[str, PairStats]:
    """The three pair types over V >= 2 views z^1..z^V of n instances:

    * positives z^i_a . z^j_a for every view pair i < j (n V(V-1)/2 values);
    * cross-view negatives z^i_a . z^j_b, a != b, for every view pair i < j (V(V-1)/2 n(n-1));
    * within-view negatives z^i_a . z^i_b, a < b, in every view (V n(n-1)/2).

    Each view pair (i, j) is the two-view tile pass with keys after the previous pairs'; the
    within-view pairs of view 1 come with the pair (1, 2) and those of view j >= 2 with the pair
    (1, j), each view once. The mean and variance come in closed form from the views' Gram
    matrices (:func:`_closed_form`), else from the tiles' sums."""
    views, codes = _sorted_by_class(views, codes)
    grid = _Grid(hist_bins, t32)
    n, d = views[0].shape
    closed = _closed_form(n, d)
    per_pair = len(_tiles(n, tile))
    # the closed form's chunks run in the tile workers, before the first view pair's tiles:
    # the O(n d^2) pass shares the cores with the tiles (and their tail) instead of following
    moments = MomentPass(views, codes) if closed else None
    cross: _Split | None = None
    within: _Split | None = None
    positives = []
    pairs = [(i, j) for i in range(len(views)) for j in range(i + 1, len(views))]
    for p, (i, j) in enumerate(pairs):
        c, w, pos = _exact_parts(
            views[i],
            views[j],
            codes,
            grid=grid,
            sums=not closed,
            tile=tile,
            workers=workers,
            ranks=ranks,
            sides=(p == 0, i == 0),
            key_base=p * per_pair,
            jobs=moments.jobs() if moments is not None and p == 0 else (),
        )
        cross = c if cross is None else cross.merge(c)
        within = w if within is None else within.merge(w)
        positives.append(pos)
    assert cross is not None and within is not None
    closed_form = moments.result() if moments is not None else None
    cross_view, within_view = PairType.CROSS_VIEW_NEGATIVE, PairType.WITHIN_VIEW_NEGATIVE
    return {
        PairType.POSITIVE: _sample_summary(
            torch.cat(positives), t32=t32, hist_bins=hist_bins, negative=False, estimate=False
        ),
        cross_view: cross.summaries(closed_form[cross_view] if closed_form else None),
        within_view: within.summaries(closed_form[within_view] if closed_form else None),
    }


def _exact_parts(
    u,
    v,
    codes,
    *,
    grid: _Grid,
    sums: bool,
    tile: int,
    workers: int,
    ranks: Ranks = SINGLE,
    sides: tuple[bool, bool] = (True, True),
    key_base: int = 0,
    jobs: Sequence[Callable[[], None]] = (),
) -> tuple[_Split, _Split, torch.Tensor]:
    """(cross, within, positives) of the views u, v (already in class order): the tile pass.

    A tile's key is ``key_base`` plus its place in the single-process order, whichever rank
    computes it; ``sides`` as for :func:`_exact_worker`. ``jobs`` run in the same workers,
    before the tiles."""
    n = u.shape[0]
    positives = torch.empty(n, dtype=torch.float32, device=u.device)
    tiles = _tiles(n, tile)
    mine = ranks.share([_tile_cost(task) for task in tiles])
    tasks = _LockedIter(
        itertools.chain(
            ((None, job) for job in jobs), ((key_base + key, tiles[key]) for key in mine)
        )
    )
    workers = max(1, min(workers, len(mine) + len(jobs)))
    single = u.device.type == "cpu"

    def work(single_thread: bool) -> tuple[_Split, _Split]:
        return _exact_worker(
            tasks,
            u,
            v,
            codes,
            positives,
            grid=grid,
            sums=sums,
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
            ranks, cross, within, positives, diagonal, grid=grid, sums=sums
        )
    return cross, within, positives


def _gather_exact(ranks: Ranks, cross: _Split, within: _Split, positives, diagonal, *, grid, sums):
    """All ranks' histograms, extremes, tile sums and positives, on every rank (see the module
    docstring); ``diagonal`` holds the (row0, row1) of this rank's diagonal tiles, which
    computed the positives of those rows."""
    own = [(r0, positives[r0:r1].cpu()) for r0, r1 in diagonal]
    gathered = ranks.gather((cross.portable(), within.portable(), own))
    cross = _Split.of_ranks(grid, sums, [g[0] for g in gathered])
    within = _Split.of_ranks(grid, sums, [g[1] for g in gathered])
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


def _sampled(
    u,
    v,
    codes,
    *,
    t32: float,
    hist_bins: int,
    num_pairs: int,
    seed: int,
    intervals: bool = False,
) -> dict[str, PairStats]:
    """``num_pairs`` pairs of each type drawn uniformly with ``seed``; with ``intervals`` each
    negative block also carries its ``sampling`` intervals (moments mode)."""
    n = u.shape[0]
    device = u.device
    rows = _gather_rows(u.shape[1])
    # draws on the CPU generator: the same seed gives the same pairs on every device
    gen = torch.Generator().manual_seed(seed)
    if num_pairs > SAMPLE_CHUNK:
        return _sampled_streamed(
            u,
            v,
            codes,
            gen,
            t32=t32,
            hist_bins=hist_bins,
            num_pairs=num_pairs,
            rows=rows,
            intervals=intervals,
        )
    i_pos, i_x, j_x, view, i_w, j_w = _draw(n, num_pairs, gen)
    pos = _dots(u, i_pos, v, i_pos, rows)
    xneg = _dots(u, i_x, v, j_x, rows)
    wneg = _within_dots(u, v, view, i_w, j_w, rows)

    def negative(x, i, j) -> PairStats:
        def summary(values) -> PairStats:
            return _sample_summary(
                values,
                t32=t32,
                hist_bins=hist_bins,
                negative=True,
                estimate=True,
                intervals=intervals,
            )

        out = summary(x)
        if codes is None:
            return out
        same = codes[i.to(device)] == codes[j.to(device)]
        split = ClassSplit(same_class=summary(x[same]), different_class=summary(x[~same]))
        return replace(out, by_class=split)

    return {
        PairType.POSITIVE: _sample_summary(
            pos, t32=t32, hist_bins=hist_bins, negative=False, estimate=True
        ),
        PairType.CROSS_VIEW_NEGATIVE: negative(xneg, i_x, j_x),
        PairType.WITHIN_VIEW_NEGATIVE: negative(wneg, i_w, j_w),
    }


def _sampled_streamed(
    u,
    v,
    codes,
    gen: torch.Generator,
    *,
    t32: float,
    hist_bins: int,
    num_pairs: int,
    rows: int,
    intervals: bool = False,
) -> dict[str, PairStats]:
    """Sampled mode beyond :data:`SAMPLE_CHUNK` pairs: the pairs are drawn and measured
    ``SAMPLE_CHUNK`` at a time into the tile pass's accumulators (with the chunks' float64
    sums), so memory does not grow with ``num_pairs``. Mean, variance, min, max and the
    excessive count stay exact for the sample; quantiles come from the fine histogram
    (``quantile_error`` its bin width)."""
    n = u.shape[0]
    device = u.device
    grid = _Grid(hist_bins, t32)
    ws = _Workspace(device)
    labelled = codes is not None
    positive = _Split(grid, ws, False, True)
    cross, within = _Split(grid, ws, labelled, True), _Split(grid, ws, labelled, True)
    for key, start in enumerate(range(0, num_pairs, SAMPLE_CHUNK)):
        k = min(SAMPLE_CHUNK, num_pairs - start)
        i_pos, i_x, j_x, view, i_w, j_w = _draw(n, k, gen)
        positive.add(_dots(u, i_pos, v, i_pos, rows), None, key)
        for split, x, i, j in (
            (cross, _dots(u, i_x, v, j_x, rows), i_x, j_x),
            (within, _within_dots(u, v, view, i_w, j_w, rows), i_w, j_w),
        ):
            same = codes[i.to(device)] == codes[j.to(device)] if labelled else None
            split.add(x, same, key)
    return {
        PairType.POSITIVE: positive.summaries(None, estimate=True, negative=False),
        PairType.CROSS_VIEW_NEGATIVE: cross.summaries(None, estimate=True, intervals=intervals),
        PairType.WITHIN_VIEW_NEGATIVE: within.summaries(None, estimate=True, intervals=intervals),
    }


# --------------------------------------------------------------------------- moments mode

#: the standard normal quantile of (1 + CONFIDENCE) / 2, the confidence of moments mode's
#: sampling intervals (the reports' one confidence level)
_Z = z_value(CONFIDENCE)
#: the statistics of a moments-mode negative block that are exact (the rest are estimates)
EXACT_IN_MOMENTS_MODE = ("count", "mean", "var", "std")


def _quantile_ranks(k: int, p: float) -> tuple[int, int]:
    """0-based ranks (r, s) of the order statistics X_(r) <= X_(s) of k iid draws that cover
    the population p-quantile with probability about :data:`CONFIDENCE`, whatever the
    distribution: the count of draws below the quantile is Binomial(k, p)."""
    spread = _Z * math.sqrt(k * p * (1 - p))
    r = min(max(math.floor(k * p - spread), 1), k)
    s = min(max(math.ceil(k * p + spread), 1), k)
    return r - 1, s - 1


def _sampling_intervals(
    k: int, below: int | None, *, sorted_values=None, fine_hist=None
) -> Sampling:
    """The ``sampling`` block of a moments-mode estimate from k sampled pairs: their number,
    the confidence, the Wilson interval of the excessive ratio and distribution-free intervals
    of the quantiles, from the sorted sample or (streamed samples) conservatively from the
    fine histogram's bin edges."""
    if k == 0:
        empty: dict[str, Interval | None] = {str(q): None for q in QUANTILES}
        return Sampling(pairs=0, confidence=CONFIDENCE, quantiles=empty)
    quantiles: dict[str, Interval | None] = {}
    if sorted_values is not None:
        values = sorted_values.cpu().numpy()
        for q in QUANTILES:
            r, t = _quantile_ranks(k, q / 100)
            quantiles[str(q)] = (float(values[r]), float(values[t]))
    else:
        assert fine_hist is not None
        cum = np.cumsum(fine_hist)
        width = 2.0 / fine_hist.shape[0]
        for q in QUANTILES:
            r, t = _quantile_ranks(k, q / 100)
            lo_bin, hi_bin = np.searchsorted(cum, [r, t], side="right")
            quantiles[str(q)] = (-1.0 + int(lo_bin) * width, -1.0 + (int(hi_bin) + 1) * width)
    return Sampling(
        pairs=int(k),
        confidence=CONFIDENCE,
        excessive_ratio=wilson_interval(below, k, CONFIDENCE) if below is not None else None,
        quantiles=quantiles,
    )


def _moments_mode(
    u, v, codes, *, t32: float, hist_bins: int, num_pairs: int, seed: int, workers: int
) -> dict[str, PairStats]:
    """Exact mean and variance of every negative pair type over all n(n-1) pairs (closed form,
    O(n d^2) time, O(d^2) memory besides the views), exact statistics of the n positives, and
    the rest (min, max, quantiles, histogram, excessive ratio) estimated from ``num_pairs``
    pairs of each type drawn as in sampled mode, with their :data:`CONFIDENCE` intervals."""
    n = u.shape[0]
    sample = _sampled(
        u, v, codes, t32=t32, hist_bins=hist_bins, num_pairs=num_pairs, seed=seed, intervals=True
    )
    # the rows in class order, read a chunk at a time (no sorted copy of the views)
    order = None if codes is None else torch.sort(codes, stable=True).indices
    ordered = None if order is None else codes[order]
    closed = pair_moments([u, v], ordered, workers=workers, order=order)
    every = torch.arange(n)
    positives = _dots(u, every, v, every, _gather_rows(u.shape[1]))
    out: dict[str, PairStats] = {
        PairType.POSITIVE: _sample_summary(
            positives, t32=t32, hist_bins=hist_bins, negative=False, estimate=False
        )
    }
    for kind in NEGATIVE_TYPES:
        block = _with_moments(sample[kind], closed[kind][0])
        split = sample[kind].by_class
        if codes is not None and split is not None:
            block = replace(
                block,
                by_class=ClassSplit(
                    same_class=_with_moments(split.same_class, closed[kind][1]),
                    different_class=_with_moments(split.different_class, closed[kind][2]),
                ),
            )
        out[kind] = block
    return out


def _with_moments(block: PairStats, moments: Moments) -> PairStats:
    """A sampled block with its count, mean, variance and std replaced by the exact ones (its
    class split, if any, is the caller's to put back)."""
    mean, var = moments.mean, moments.var
    return replace(
        block,
        count=moments.count,
        estimate=True,
        mean=mean,
        var=var,
        std=None if var is None else math.sqrt(var),
        exact=EXACT_IN_MOMENTS_MODE,
        by_class=None,
    )


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
) -> dict[str, PairStats]:
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
        mode: ``"exact"`` (all pairs, streamed), ``"sampled"`` (``num_pairs`` of each type,
            drawn uniformly with replacement with ``seed``; results marked as estimates) or
            ``"moments"`` (exact means and variances over all pairs in closed form, the rest
            estimated from ``num_pairs`` sampled pairs; see the module docstring).
        block_size: side of the square similarity tiles of exact mode (working memory about
            16 * block_size^2 bytes, independent of n); default from a memory budget
            (7 MiB on CPU, 512 MiB on CUDA).
        hist_bins: bins of the reported histogram on [-1, 1].
        ranks: under ``torchrun``, ``Ranks.of_process_group()``: every rank passes the same
            full views and gets the same result, exact mode's tiles being split over the ranks
            (see the module docstring); None: this process alone.

    Returns:
        A :class:`~cl_diag.result.PairStats` per :class:`~cl_diag.vocabulary.PairType`, in
        that order (``stats[PairType.CROSS_VIEW_NEGATIVE]``, or by its key
        ``stats["cross_view_negative"]``): count, estimate, mean, var (ddof 0), std, min, max,
        quantiles, quantile_error, histogram, and for the negative types excessive_ratio,
        excessive_count (strictly below delta), the fields of moments mode and by_class.
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
) -> dict[str, PairStats]:
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
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}.")
        hist_bins = check_int(hist_bins, "hist_bins", 1, MAX_HIST_BINS)
        seed = check_int(seed, "seed", 0, MAX_SEED)
        if mode != "exact":
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
) -> dict[str, PairStats]:
    u, v = views
    n = views.n
    n_ref = check_n_ref(n_ref, n)
    t32 = delta_float32(n_ref)
    hist_bins = options.hist_bins
    with torch.inference_mode(), full_fp32_matmul():
        num_pairs, seed = options.num_pairs, options.seed
        if options.mode == "sampled":
            return _sampled(
                u, v, codes, t32=t32, hist_bins=hist_bins, num_pairs=num_pairs, seed=seed
            )
        if options.mode == "moments":
            # every rank computes the whole (O(n d^2) and the seeded sample): the same bits
            return _moments_mode(
                u,
                v,
                codes,
                t32=t32,
                hist_bins=hist_bins,
                num_pairs=num_pairs,
                seed=seed,
                workers=threads,
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
    """Yield torch's thread count, with torch itself (and numpy's BLAS, which computes the
    moments' Grams) single-threaded meanwhile (restored after).

    Exact mode runs that many single-threaded workers on whole tiles instead: no OpenMP
    barrier per small op (which costs milliseconds when other processes share the cores),
    and each tile's arithmetic is the same whatever the number of cores.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with one_blas_thread():
            yield threads
    finally:
        torch.set_num_threads(threads)
