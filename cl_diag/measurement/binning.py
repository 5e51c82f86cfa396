"""The CPU tile pass of exact pair statistics in one fused loop (numba), per float32 tile.

For each similarity s of a tile it does what :class:`cl_diag.measurement.pairs._Grid` defines,
in one read of the tile instead of a dozen elementwise passes and a bincount::

    e(s) = clamp(floor(s * B/2) + B/2 + 1 + [s >= T], 0, B + 2);    hist[split, e] += 1

with s * B/2 exact in float64 and T the float32 threshold of delta, plus the exact min and max
of each split (and, when the moments are not in closed form, the float64 sums in row-major
order). A tile's pairs are all entries (``ALL``), those off the diagonal (``OFF_DIAGONAL``) or
strictly above it (``UPPER``); ``split`` is 0 (same class or unlabelled), 1 (different class)
or per entry from a same-class matrix. Each row is read twice while in L1: once to compute e(s)
(vectorised) and once to increment the bins; the extremes are read off the bins (e(s) is
monotone), so only rows reaching the running extreme's bin are scanned. Compiled on first use
(cached), releasing the GIL; every count and extreme is exact, so the result equals the torch
operations' (:meth:`pairs._Split.add`, which CUDA runs) bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from cl_diag.measurement.tile_parts import OFF_DIAGONAL, UPPER

__all__ = ["bin_tile", "bin_tile_masked"]


@njit(inline="always")
def _index(s, half, t32, offset, top):
    """e(s) of the module docstring, in int32 (``half`` float64, ``offset`` and ``top`` int32:
    :func:`_int32_args`): 0 <= e(s) <= B + 2 <= 2^21 + 2 for |s| <= 1 + 2^-20, and AVX2 has
    the 32-bit integer min and max of the clamp and of the running lowest and highest e(s),
    but no 64-bit ones (emulated, they cost a quarter of the loop). Every step is cast back to
    int32: numba widens a sum of int32s to int64, and the loop would be 64-bit again."""
    e = np.int32(np.floor(np.float64(s) * half))
    e = np.int32(e + offset)
    e = np.int32(e + np.int32(s >= t32))
    e = np.int32(max(e, np.int32(0)))
    return np.int32(min(e, top))


@njit(inline="always")
def _int32_args(half, offset, top):
    """The grid's constants as :func:`_index` takes them."""
    return np.float64(half), np.int32(offset), np.int32(top)


@njit(inline="always")
def _segment_sums(row, a, b, half, t32, offset, top, h, lo, hi, total, squares):
    """:func:`_segment` with the float64 sum and sum of squares."""
    for j in range(a, b):
        s = row[j]
        lo = min(lo, s)
        hi = max(hi, s)
        h[_index(s, half, t32, offset, top)] += 1
        value = np.float64(s)
        total += value
        squares += value * value
    return lo, hi, total, squares


@njit(inline="always")
def _bin_values(values, half, t32, offset, top, h, idx):
    """Count the 1-D ``values`` into ``h``; (lowest, highest) e(s) among them.

    Two loops: the first computes e(s) into ``idx`` with no dependency from one entry to the
    next (the compiler vectorises it), the second only increments the bins. A running float
    min/max in the same loop would chain every entry to the previous one and cost as much as
    all the rest. (``values`` is a slice starting at 0: with a loop offset, the loop is not
    vectorised; ``idx`` is unsigned, 0 <= e(s) <= top: a signed index costs a wraparound
    check per increment, 20 % of the loop.)"""
    m = values.shape[0]
    low = top
    high = np.int32(0)
    for j in range(m):
        e = _index(values[j], half, t32, offset, top)
        low = min(low, e)
        high = max(high, e)
        idx[j] = e
    for j in range(m):
        h[idx[j]] += 1
    return low, high


@njit(inline="always")
def _segment(values, half, t32, offset, top, h, idx, lo, hi, lo_e, hi_e):
    """:func:`_bin_values`, and the running exact (lo, hi) and their bins (lo_e, hi_e): e(s) is
    non-decreasing in s, so ``values`` whose lowest e(s) lies above lo_e hold nothing below lo
    and are not scanned for it (hi likewise)."""
    if values.shape[0] == 0:
        return lo, hi, lo_e, hi_e
    low, high = _bin_values(values, half, t32, offset, top, h, idx)
    if low <= lo_e:
        for s in values:
            lo = min(lo, s)
        lo_e = _index(lo, half, t32, offset, top)
    if high >= hi_e:
        for s in values:
            hi = max(hi, s)
        hi_e = _index(hi, half, t32, offset, top)
    return lo, hi, lo_e, hi_e


@njit(inline="always")
def _bound_index(value, half, t32, offset, top, empty):
    """e(value) of a running extreme; ``empty`` while there is none (+-inf)."""
    if math.isinf(value):
        return empty
    return _index(np.float32(value), half, t32, offset, top)


@njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
def bin_tile(x, part, split, half, t32, offset, top, hist, extremes, sums, with_sums):
    """Count the pairs of the float32 tile ``x`` (2-D) into ``hist[split]``; update
    ``extremes[split]`` = (min, max) and, ``with_sums``, ``sums[split]`` += (sum, sum of
    squares, count) in float64 (summed in row-major order).

    Without sums the exact extremes come from the bins: e(s) is non-decreasing in s, so a row
    whose lowest e(s) lies above e(min so far) holds nothing below the min so far and is not
    scanned for it (the max likewise); only the rare rows that reach the extreme bins are."""
    rows, cols = x.shape
    h = hist[split]
    half, offset, top = _int32_args(half, offset, top)
    lo = np.float32(extremes[split, 0])
    hi = np.float32(extremes[split, 1])
    lo_e = _bound_index(lo, half, t32, offset, top, top + np.int32(1))
    hi_e = _bound_index(hi, half, t32, offset, top, np.int32(-1))
    idx = np.empty(cols, dtype=np.uint32)
    total = 0.0
    squares = 0.0
    count = 0
    for i in range(rows):
        row = x[i]
        # the column ranges of row i that hold pairs
        a0, b0, a1, b1 = 0, cols, 0, 0
        if part == UPPER:
            a0 = i + 1
        elif part == OFF_DIAGONAL:
            a0, b0, a1, b1 = 0, i, i + 1, cols
        if with_sums:
            for a, b in ((a0, b0), (a1, b1)):
                if a < b:
                    lo, hi, total, squares = _segment_sums(
                        row, a, b, half, t32, offset, top, h, lo, hi, total, squares
                    )
                    count += b - a
            continue
        lo, hi, lo_e, hi_e = _segment(
            row[a0:b0], half, t32, offset, top, h, idx, lo, hi, lo_e, hi_e
        )
        lo, hi, lo_e, hi_e = _segment(
            row[a1:b1], half, t32, offset, top, h, idx, lo, hi, lo_e, hi_e
        )
    extremes[split, 0] = lo
    extremes[split, 1] = hi
    if with_sums:
        sums[split, 0] += total
        sums[split, 1] += squares
        sums[split, 2] += count


@njit(inline="always")
def _segment_masked(values, same, half, t32, offset, top, hist, idx, lo, hi, lo_e, hi_e):
    """:func:`_segment` with the split per entry (0 where ``same``, else 1) and the running
    extremes and their bins in 2-arrays."""
    m = values.shape[0]
    if m == 0:
        return
    for j in range(m):
        idx[j] = _index(values[j], half, t32, offset, top)
    h0 = hist[0]
    h1 = hist[1]
    low0, high0, low1, high1 = top, np.int32(0), top, np.int32(0)
    for j in range(m):
        bin_ = idx[j]
        e = np.int32(bin_)
        if same[j]:  # same-class columns form runs (rows in class order): well predicted
            h0[bin_] += 1
            low0, high0 = min(low0, e), max(high0, e)
        else:
            h1[bin_] += 1
            low1, high1 = min(low1, e), max(high1, e)
    for k in range(2):
        low, high = (low0, high0) if k == 0 else (low1, high1)
        if low > high:  # no entry of split k here
            continue
        member = k == 0
        if low <= lo_e[k]:
            for j in range(m):
                if same[j] == member:
                    lo[k] = min(lo[k], values[j])
            lo_e[k] = _index(lo[k], half, t32, offset, top)
        if high >= hi_e[k]:
            for j in range(m):
                if same[j] == member:
                    hi[k] = max(hi[k], values[j])
            hi_e[k] = _index(hi[k], half, t32, offset, top)


@njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
def bin_tile_masked(x, part, same, half, t32, offset, top, hist, extremes, sums, with_sums):
    """:func:`bin_tile` with the split per entry: 0 where ``same`` (a boolean matrix shaped
    like ``x``), else 1 (``hist``, ``extremes``, ``sums`` with two rows)."""
    rows, cols = x.shape
    half, offset, top = _int32_args(half, offset, top)
    lo = np.array([np.float32(extremes[0, 0]), np.float32(extremes[1, 0])])
    hi = np.array([np.float32(extremes[0, 1]), np.float32(extremes[1, 1])])
    if not with_sums:
        lo_e = np.empty(2, dtype=np.int32)
        hi_e = np.empty(2, dtype=np.int32)
        for k in range(2):
            lo_e[k] = _bound_index(lo[k], half, t32, offset, top, top + np.int32(1))
            hi_e[k] = _bound_index(hi[k], half, t32, offset, top, np.int32(-1))
        idx = np.empty(cols, dtype=np.uint32)
        for i in range(rows):
            row, mask = x[i], same[i]
            a0, b0, a1, b1 = 0, cols, 0, 0
            if part == UPPER:
                a0 = i + 1
            elif part == OFF_DIAGONAL:
                a0, b0, a1, b1 = 0, i, i + 1, cols
            _segment_masked(
                row[a0:b0], mask[a0:b0], half, t32, offset, top, hist, idx, lo, hi, lo_e, hi_e
            )
            _segment_masked(
                row[a1:b1], mask[a1:b1], half, t32, offset, top, hist, idx, lo, hi, lo_e, hi_e
            )
        for k in range(2):
            extremes[k, 0] = lo[k]
            extremes[k, 1] = hi[k]
        return
    acc = np.zeros((2, 3))
    for i in range(rows):
        a = i + 1 if part == UPPER else 0
        for j in range(a, cols):
            if part == OFF_DIAGONAL and j == i:
                continue
            s = x[i, j]
            k = 0 if same[i, j] else 1
            lo[k] = min(lo[k], s)
            hi[k] = max(hi[k], s)
            hist[k, _index(s, half, t32, offset, top)] += 1
            if with_sums:
                value = np.float64(s)
                acc[k, 0] += value
                acc[k, 1] += value * value
                acc[k, 2] += 1
    for k in range(2):
        extremes[k, 0] = lo[k]
        extremes[k, 1] = hi[k]
        if with_sums:
            for m in range(3):
                sums[k, m] += acc[k, m]
