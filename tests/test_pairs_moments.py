"""Closed-form moments (cl_diag.measurement.moments), the lean tile pass and moments mode.

References are independent: numpy float64 brute force over every pair of the library's
float32 rows (their products are exact in float64, so the reference is exact up to its own
float64 sums), and the float32 similarities of the previous implementation (the same tiles'
float32 GEMMs summed in float64), which the closed form must match within the float32
rounding of a similarity: eps = gamma_d rho^2 (Higham Thm 3.5, unit 2^-24) moves a mean by
<= eps and a variance by <= 2 eps std + eps^2; the closed form's own float64 error is bounded
by :func:`cl_diag.measurement.moments.error_bounds` (derived in that module's docstring).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import cl_diag.measurement.pairs as pairs
from cl_diag.measurement.moments import error_bounds, pair_moments
from cl_diag.measurement.pairs import (
    QUANTILES,
    _Grid,
    _Split,
    _Workspace,
    delta_float32,
    fine_bins,
    normalise_views,
    pair_statistics,
)
from cl_diag.measurement.tile_parts import ALL, OFF_DIAGONAL, UPPER


def as_json(stats) -> str:
    """The blocks as result.json writes them: equal texts mean bit-identical statistics."""
    return json.dumps({kind: block.to_dict() for kind, block in stats.items()})


def gamma32(d: int) -> float:
    unit = 2.0**-24
    return d * unit / (1 - d * unit) * (1 + 2.0**-22) ** 2


def brute(views, labels=None):
    """float64 similarities of every negative pair (cross over view pairs i < j, within per
    view, a < b) and the same-class masks."""
    z = [x.double().numpy() for x in views]
    n = z[0].shape[0]
    off = ~np.eye(n, dtype=bool)
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    same = None if labels is None else labels[:, None] == labels[None, :]
    cross, within, cross_same, within_same = [], [], [], []
    for i in range(len(z)):
        for j in range(i + 1, len(z)):
            cross.append((z[i] @ z[j].T)[off])
            if same is not None:
                cross_same.append(same[off])
        within.append((z[i] @ z[i].T)[upper])
        if same is not None:
            within_same.append(same[upper])
    out = {
        "cross_view_negative": np.concatenate(cross),
        "within_view_negative": np.concatenate(within),
    }
    masks = None
    if same is not None:
        masks = {
            "cross_view_negative": np.concatenate(cross_same),
            "within_view_negative": np.concatenate(within_same),
        }
    return out, masks


@pytest.mark.parametrize("views,classes", [(2, None), (2, 4), (3, 3), (4, None)])
def test_closed_form_matches_float64_brute_force(views, classes):
    rng = np.random.default_rng(views * 10 + (classes or 0))
    n, d = 240, 12
    z = [rng.standard_normal((n, d)) + 0.8 * rng.standard_normal((1, d)) for _ in range(views)]
    rows = [normalise_views(x, z[0]).u for x in z]
    labels = None if classes is None else np.sort(rng.integers(0, classes, n))
    codes = None if labels is None else torch.as_tensor(labels)
    got = pair_moments(rows, codes, workers=2)
    ref, masks = brute(rows, labels)
    for kind, values in ref.items():
        parts = [values] if masks is None else [values, values[masks[kind]], values[~masks[kind]]]
        assert len(got[kind]) == len(parts)
        for moments, r in zip(got[kind], parts, strict=True):
            assert moments.count == r.size
            mean_bound, var_bound = error_bounds(n, d, r.size, r.mean(), np.mean(r**2))
            # the brute-force reference's own float64 sums: ~ r.size u relative, far inside
            assert abs(moments.mean - r.mean()) <= mean_bound + 1e-13
            assert abs(moments.var - r.var()) <= var_bound + 1e-13


def test_closed_form_is_exact_on_a_lattice_and_empty_splits_are_none():
    """Entries +-1/4 in d = 16: every sum is a small multiple of 1/16, exact in float64."""
    rng = np.random.default_rng(0)
    z1 = rng.choice([-0.25, 0.25], size=(50, 16))
    z2 = np.where(rng.random((50, 16)) < 0.3, -z1, z1)
    u, v = normalise_views(z1, z2)
    codes = torch.arange(50)  # every instance its own class: no same-class pair
    got = pair_moments([u, v], codes)
    ref, _ = brute([u, v])
    for kind, r in ref.items():
        whole, same, different = got[kind]
        assert whole.mean == r.mean() and whole.var == pytest.approx(r.var(), abs=1e-16)
        assert same.count == 0 and same.mean is None and same.var is None
        assert different.count == whole.count and different.mean == whole.mean


def test_closed_form_does_not_depend_on_workers_or_chunks(monkeypatch):
    rng = np.random.default_rng(3)
    u, v = normalise_views(rng.standard_normal((700, 9)), rng.standard_normal((700, 9)))
    codes = torch.as_tensor(np.sort(rng.integers(0, 5, 700)))
    one = pair_moments([u, v], codes, workers=1)
    import cl_diag.measurement.moments as moments

    monkeypatch.setattr(moments, "_MIN_CHUNK_ROWS", 16)
    monkeypatch.setattr(moments, "_CHUNK_BYTES", 16 * 9 * 2 * 8)
    assert len(moments._chunks(700, 9, 2, moments.class_runs(codes, 700))) > 40
    many = pair_moments([u, v], codes, workers=3)
    again = pair_moments([u, v], codes, workers=1)
    assert many == again  # chunks reduced in row order whatever the workers
    for kind in one:
        for a, b in zip(one[kind], many[kind], strict=True):
            assert a.count == b.count
            assert a.mean == pytest.approx(b.mean, rel=1e-12, abs=1e-15)


def _both_paths(z1, z2, monkeypatch, **kwargs):
    """pair_statistics with the moments in closed form and from the tiles' float32 sums (the
    previous implementation's moments)."""
    monkeypatch.setattr(pairs, "_closed_form", lambda n, d: True)
    closed = pair_statistics(z1, z2, **kwargs)
    monkeypatch.setattr(pairs, "_closed_form", lambda n, d: False)
    tiles = pair_statistics(z1, z2, **kwargs)
    monkeypatch.undo()
    return closed, tiles


def test_closed_form_and_tile_moments_agree_within_the_float32_bound(monkeypatch):
    rng = np.random.default_rng(4)
    n, d = 300, 64
    z1 = rng.standard_normal((n, d))
    z2 = z1 + 0.6 * rng.standard_normal((n, d))
    labels = rng.integers(0, 3, n)
    closed, tiles = _both_paths(z1, z2, monkeypatch, labels=labels, block_size=70)
    eps = gamma32(d)
    for kind in ("cross_view_negative", "within_view_negative"):
        blocks = [(closed[kind], tiles[kind])]
        blocks += [
            (getattr(closed[kind].by_class, k), getattr(tiles[kind].by_class, k))
            for k in ("same_class", "different_class")
        ]
        for a, b in blocks:
            # everything but the moments is the tiles' in both
            for key in ("count", "min", "max", "quantiles", "histogram", "excessive_count"):
                assert getattr(a, key) == getattr(b, key), key
            e1, e2 = error_bounds(n, d, a.count, a.mean, a.var + a.mean**2)
            assert abs(a.mean - b.mean) <= eps + e1
            assert abs(a.var - b.var) <= 2 * eps * math.sqrt(b.var) + eps**2 + e2
            assert a.mean != b.mean  # really two computations


@pytest.mark.slow
def test_closed_form_at_n_20000_against_exact_float64_and_previous_moments():
    """n = 20,000, d = 128 (bench_pairs's data), 10 classes: the closed form against float64
    brute force over all 4e8 pairs of each type on the same float32 rows (within error_bounds),
    and against the previous implementation's moments, those of the float32 similarities of
    the same products (within the float32 bound). The brute force sums every block of
    similarities (diagonal terms taken out exactly), the same-class ones from each class's
    own block (rows sorted by class)."""
    rng = np.random.default_rng(0)
    n, d = 20_000, 128
    z1 = rng.standard_normal((n, d), dtype=np.float32)
    z2 = z1 + 0.7 * rng.standard_normal((n, d), dtype=np.float32)
    labels = np.sort(rng.integers(0, 10, n))
    u, v = normalise_views(z1, z2)
    got = pair_moments([u, v], torch.as_tensor(labels), workers=torch.get_num_threads())

    def off_diagonal_sums(a, b) -> tuple[float, float]:
        """(sum s, sum s^2) of s = a_i . b_j over i != j, in float64 (a, b float64 rows for
        the exact reference, float32 rows for the float32 similarities), by blocks of rows;
        the diagonal terms taken out of the very block they are in."""
        totals, squares = [], []
        for r0 in range(0, a.shape[0], 4000):
            x = (a[r0 : r0 + 4000] @ b.T).double()
            rows = torch.arange(x.shape[0])
            diag = x[rows, r0 + rows]
            totals += [float(x.sum()), -float(diag.sum())]
            squares += [float((x * x).sum()), -float((diag * diag).sum())]
        return math.fsum(totals), math.fsum(squares)

    eps = gamma32(d)
    for kind, pairs_of in (
        ("cross_view_negative", [(u, v, 1.0)]),
        ("within_view_negative", [(u, u, 0.5), (v, v, 0.5)]),
    ):
        ref = {}
        for float32 in (False, True):
            total = squares = 0.0
            for a, b, scale in pairs_of:
                t, q = (
                    off_diagonal_sums(a, b)
                    if float32
                    else off_diagonal_sums(a.double(), b.double())
                )
                total += scale * t
                squares += scale * q
            ref[float32] = (total, squares)
        count = n * (n - 1)
        m = got[kind][0]
        assert m.count == count
        mean, second = ref[False][0] / count, ref[False][1] / count
        e1, e2 = error_bounds(n, d, count, mean, second)
        # the reference's own float64 error: sums of 4,000 x 20,000 blocks, ~1e-13 relative
        assert abs(m.mean - mean) <= e1 + 1e-12
        assert abs(m.var - (second - mean**2)) <= e2 + 1e-12
        p_mean = ref[True][0] / count
        p_var = ref[True][1] / count - p_mean**2
        assert abs(m.mean - p_mean) <= eps + e1
        assert abs(m.var - p_var) <= 2 * eps * math.sqrt(p_var) + eps**2 + e2
        # same class: each class's own block
        total = squares = 0.0
        count_same = 0
        for c in np.unique(labels):
            rows = torch.as_tensor(np.flatnonzero(labels == c))
            for a, b, scale in pairs_of:
                t, q = off_diagonal_sums(a.double()[rows], b.double()[rows])
                total += scale * t
                squares += scale * q
            count_same += len(rows) * (len(rows) - 1)
        same = got[kind][1]
        assert same.count == count_same
        mean_s, second_s = total / count_same, squares / count_same
        e1, e2 = error_bounds(int(np.bincount(labels).max()), d, count_same, mean_s, second_s)
        assert abs(same.mean - mean_s) <= e1 + 1e-12
        assert abs(same.var - (second_s - mean_s**2)) <= e2 + 1e-12


# --------------------------------------------------------------------------- the tile pass


def _through(values, *, t32, hist_bins=100, kernel=True, labelled=False, same=None):
    """Run float32 values (one row) through one split of the tile pass; its summary."""
    grid = _Grid(hist_bins, t32)
    split = _Split(grid, _Workspace(torch.device("cpu")), labelled, True, kernel)
    x = torch.tensor(values, dtype=torch.float32).reshape(1, -1)
    split.add_tile(x.clone(), same, 0, ALL)
    return split.summaries(None)


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("hist_bins", [100, 128, 7])
def test_bins_delta_edge_and_guards_are_exact(kernel, hist_bins):
    """Every fine edge, delta and values just around them, 1, and round-off beyond +-1: each
    value's bin is decided against the exact edges (float32 values, exact rationals)."""
    t32 = delta_float32(50_000)
    fine = fine_bins(hist_bins)
    f32 = np.float32
    values = [t32, float(np.nextafter(f32(t32), f32(-1))), float(np.nextafter(f32(t32), f32(1)))]
    for k in range(0, fine + 1, fine // hist_bins):
        edge = f32(-1 + 2 * k / fine)
        values += [
            float(edge),
            float(np.nextafter(edge, f32(-2))),
            float(np.nextafter(edge, f32(2))),
        ]
    values += [1.0, -1.0, -1.25, 1.25, -1.0000001, 1.0000001, 0.0, -0.0, -1e-30, 1e-30]
    stats = _through(values, t32=t32, hist_bins=hist_bins, kernel=kernel)
    exact = np.array(values, dtype=np.float64)
    expected, _ = np.histogram(np.clip(exact, -1, 1), bins=hist_bins, range=(-1, 1))
    # numpy's float64 edges are not the exact rationals -1 + 2k/bins: count exactly
    from fractions import Fraction

    exact_counts = [0] * hist_bins
    for value in values:
        q = Fraction(min(max(value, -1.0), 1.0))
        k = min(math.floor((q + 1) * hist_bins / 2), hist_bins - 1)
        exact_counts[k] += 1
    assert stats.histogram.counts == exact_counts
    assert stats.excessive_count == sum(Fraction(x) < Fraction(-1, 49_999) for x in values)
    assert stats.min == -1.25 and stats.max == 1.25
    assert stats.count == len(values)
    del expected


def test_the_fused_loop_equals_the_torch_operations(monkeypatch):
    """The CPU loop (binning.py) and the torch operations CUDA runs give the same result: the
    same bits where the moments are in closed form; from the tiles' sums only the float64
    summation order differs (last bits of the variance)."""
    rng = np.random.default_rng(6)
    for n, d, classes, hist_bins, block, n_ref in (
        (300, 16, 3, 100, 64, 50),
        (257, 128, None, 128, 100, 20),
        (400, 8, 5, 7, None, 1000),
        (150, 128, 2, 100, 40, 3),
    ):
        z1 = rng.standard_normal((n, d))
        z2 = z1 + 0.5 * rng.standard_normal((n, d))
        labels = None if classes is None else rng.integers(0, classes, n)
        kwargs = dict(labels=labels, hist_bins=hist_bins, block_size=block, n_ref=n_ref)
        monkeypatch.setattr(pairs, "_USE_KERNEL", True)
        fused = pair_statistics(z1, z2, **kwargs)
        monkeypatch.setattr(pairs, "_USE_KERNEL", False)
        ops = pair_statistics(z1, z2, **kwargs)
        closed = pairs._closed_form(n, d)
        for kind in fused:
            a, b = fused[kind].to_dict(), ops[kind].to_dict()
            for key in a:
                if key in ("var", "std") and not closed:
                    assert a[key] == pytest.approx(b[key], rel=1e-12)
                elif key == "by_class" and not closed:
                    for split in a[key]:
                        for k2 in a[key][split]:
                            if k2 not in ("var", "std"):
                                assert a[key][split][k2] == b[key][split][k2]
                else:
                    assert a[key] == b[key], (n, kind, key)


def test_int32_counts_are_flushed_before_they_could_overflow(monkeypatch):
    rng = np.random.default_rng(7)
    z1, z2 = rng.standard_normal((200, 10)), rng.standard_normal((200, 10))
    labels = rng.integers(0, 3, 200)
    once = pair_statistics(z1, z2, labels=labels, block_size=30)
    monkeypatch.setattr(pairs, "_INT32_PENDING", 1000)  # a flush every tile or two
    again = pair_statistics(z1, z2, labels=labels, block_size=30)
    assert as_json(again) == as_json(once)


@pytest.mark.parametrize("part", [ALL, OFF_DIAGONAL, UPPER])
def test_tile_parts_count_the_right_entries(part):
    rng = np.random.default_rng(8)
    s = torch.tensor(rng.uniform(-0.9, 0.9, (9, 9)), dtype=torch.float32)
    same = torch.tensor(rng.random((9, 9)) < 0.4)
    keep = {
        ALL: np.ones((9, 9), bool),
        OFF_DIAGONAL: ~np.eye(9, dtype=bool),
        UPPER: np.triu(np.ones((9, 9), bool), 1),
    }[part]
    grid = _Grid(100, delta_float32(10))
    for kernel in (True, False):
        split = _Split(grid, _Workspace(torch.device("cpu")), True, True, kernel)
        split.add_tile(s.clone(), same, 0, part)
        out = split.summaries(None).by_class
        assert out is not None
        for name, mask in (("same_class", same.numpy()), ("different_class", ~same.numpy())):
            values = s.numpy()[keep & mask].astype(np.float64)
            block = getattr(out, name)
            assert block.count == values.size
            assert block.min == values.min() and block.max == values.max()
            assert block.mean == pytest.approx(values.mean(), rel=1e-12)


@pytest.mark.parametrize("labelled", [False, True])
def test_tile_pass_extremes_and_counts_without_sums(labelled):
    """The fused loop without tile sums (closed-form moments) reads the exact min and max off
    the bins, scanning only rows whose bins reach the running extremes: over a stream of tiles
    whose extremes arrive late (a later row, a later tile, a tie in the extreme bin, the +-1
    guards) every count and extreme equals numpy's, for each tile part and class split."""
    rng = np.random.default_rng(9)
    grid = _Grid(100, delta_float32(1000))
    split = _Split(grid, _Workspace(torch.device("cpu")), labelled, False, True)
    kept = {0: [], 1: []}
    # values in the middle of a fine bin: their float32 neighbours share the bin
    low = np.float32((-48_640 + 0.5) / (grid.fine // 2))
    high = np.float32((46_080 + 0.5) / (grid.fine // 2))
    keep = {
        ALL: lambda k: np.ones((k, k), bool),
        OFF_DIAGONAL: lambda k: ~np.eye(k, dtype=bool),
        UPPER: lambda k: np.triu(np.ones((k, k), bool), 1),
    }
    for t in range(12):
        k = 13
        s = rng.uniform(-0.3, 0.3, (k, k)).astype(np.float32)
        if t == 4:  # a new minimum in a late row, after a larger value of the same bin
            s[5, 9] = np.nextafter(low, np.float32(1))
            s[11, 2] = low
        if t == 5:  # a smaller value in the minimum's bin, in a later tile
            s[2, 3] = np.nextafter(low, np.float32(-2))
        if t == 7:  # the max likewise
            s[3, 10] = high
            s[12, 0] = np.nextafter(high, np.float32(2))
        if t == 8:
            s[1, 12] = np.nextafter(np.nextafter(high, np.float32(2)), np.float32(2))
        if t == 10:
            s[8, 4], s[6, 7] = np.float32(-1.0000001), np.float32(1.0000001)  # the guards
        part = (ALL, OFF_DIAGONAL, UPPER)[t % 3]
        same = rng.random((k, k)) < 0.5 if labelled else None
        split.add_tile(
            torch.from_numpy(s.copy()),
            None if same is None else torch.from_numpy(same),
            t,
            part,
        )
        mask = keep[part](k)
        kept[0].append(s[mask & (same if labelled else True)])
        if labelled:
            kept[1].append(s[mask & ~same])
        split._sync()  # the extremes so far, after every tile
        for k, acc in enumerate(split.accs):
            values = np.concatenate(kept[k]).astype(np.float64)
            assert (acc.lo, acc.hi) == (values.min(), values.max()), (t, k)
    for k, acc in enumerate(split.accs):
        values = np.concatenate(kept[k]).astype(np.float64)
        fine, below = grid.fold(acc.hist.numpy())
        half = grid.fine // 2  # float32 values times half: exact in float64
        index = np.clip(np.floor(values * half) + half, 0, grid.fine - 1).astype(int)
        assert fine.tolist() == np.bincount(index, minlength=grid.fine).tolist()
        assert below == int(np.sum(values.astype(np.float32) < np.float32(grid.t32)))


# --------------------------------------------------------------------------- moments mode


def test_moments_mode_exact_moments_exact_positives_and_sampled_rest():
    rng = np.random.default_rng(9)
    n, d = 600, 8  # d^2 <= 4n: exact mode's moments are in closed form too
    z1 = rng.standard_normal((n, d))
    z2 = z1 + rng.standard_normal((n, d))
    labels = rng.integers(0, 4, n)
    exact = pair_statistics(z1, z2, labels=labels, n_ref=20)
    est = pair_statistics(z1, z2, labels=labels, n_ref=20, mode="moments", num_pairs=3000)
    u, v = normalise_views(z1, z2)
    pos = est["positive"]
    assert pos.estimate is False and pos.count == n
    assert pos.mean == pytest.approx(float((u.double() * v.double()).sum(1).mean()), abs=1e-7)
    assert pos.sampling is None and "sampling" not in pos.to_dict()
    for kind in ("cross_view_negative", "within_view_negative"):
        blocks = [(est[kind], exact[kind])] + [
            (getattr(est[kind].by_class, k), getattr(exact[kind].by_class, k))
            for k in ("same_class", "different_class")
        ]
        for e, x in blocks:
            assert (e.count, e.mean, e.var, e.std) == (x.count, x.mean, x.var, x.std)
            assert e.estimate is True and e.exact == ("count", "mean", "var", "std")
            assert e.to_dict()["exact"] == ["count", "mean", "var", "std"]
            k = e.sampling.pairs
            assert sum(e.histogram.counts) == k and e.excessive_ratio == (e.excessive_count / k)
            assert e.sampling.confidence == 0.95
            lo, hi = e.sampling.excessive_ratio
            assert lo <= e.excessive_ratio <= hi
            for q in QUANTILES:
                lo, hi = e.sampling.quantiles[str(q)]
                assert lo <= e.quantiles[str(q)] <= hi
        assert est[kind].sampling.pairs == 3000


def test_moments_mode_intervals_cover_the_exact_values():
    """Over 40 seeds, the 95 % intervals of the excessive ratio and of the median hold the
    exact (all-pairs) values in at least 33 (the binomial 0.1 % lower tail at p = 0.95)."""
    rng = np.random.default_rng(10)
    z1 = rng.standard_normal((150, 6))
    z2 = z1 + rng.standard_normal((150, 6))
    exact = pair_statistics(z1, z2, n_ref=8)["cross_view_negative"]
    ratio_hits = median_hits = 0
    for seed in range(40):
        est = pair_statistics(z1, z2, n_ref=8, mode="moments", num_pairs=1500, seed=seed)
        block = est["cross_view_negative"].sampling
        lo, hi = block.excessive_ratio
        ratio_hits += lo <= exact.excessive_ratio <= hi
        lo, hi = block.quantiles["50"]
        median_hits += lo - exact.quantile_error <= exact.quantiles["50"] <= hi
    assert ratio_hits >= 33 and median_hits >= 33


def test_moments_mode_beyond_one_sample_chunk(monkeypatch):
    """Past SAMPLE_CHUNK pairs the sample is streamed: the intervals come from the fine
    histogram's bin edges (one bin wider on each side)."""
    monkeypatch.setattr(pairs, "SAMPLE_CHUNK", 1000)
    rng = np.random.default_rng(11)
    z1 = rng.standard_normal((120, 5))
    z2 = z1 + rng.standard_normal((120, 5))
    est = pair_statistics(z1, z2, labels=np.arange(120) % 3, mode="moments", num_pairs=2500)
    block = est["within_view_negative"]
    assert block.sampling.pairs == 2500 and block.quantile_error > 0
    w = block.quantile_error
    for q in QUANTILES:
        lo, hi = block.sampling.quantiles[str(q)]
        assert lo - w <= block.quantiles[str(q)] <= hi + w
        assert (lo + 1) / w == pytest.approx(round((lo + 1) / w))  # a bin edge
    split = block.by_class
    assert split.same_class.sampling.pairs + split.different_class.sampling.pairs == 2500


def test_moments_mode_result_round_trips_and_estimates_uniformity():
    import cl_diag
    from cl_diag.measurement.geometry import geometry

    rng = np.random.default_rng(12)
    z1 = rng.standard_normal((500, 16)).astype(np.float32)
    z2 = z1 + rng.standard_normal((500, 16)).astype(np.float32)
    result = cl_diag.measure(z1, z2, labels=np.arange(500) % 5, pairs="moments", num_pairs=4000)
    assert result.mode == "moments" and result.num_pairs == 4000 and result.estimate
    layer = result.layers["embedding"]
    cross = layer.pairs["cross_view_negative"]
    assert cross.exact == ("count", "mean", "var", "std") and cross.sampling is not None
    assert cross.sampling.pairs == 4000 and cross.count == 500 * 499
    sampling = layer.geometry.uniformity_sampling
    assert sampling is not None and sampling.pairs == 4000
    exact = geometry(z1, z2, n_ref=500).uniformity
    for view in ("u", "v"):
        lo, hi = getattr(sampling, view)
        estimate = getattr(layer.geometry.uniformity, view)
        assert lo < estimate < hi
        # the interval is +-1.96 standard errors: the all-pairs value within 4 of them
        assert abs(estimate - getattr(exact, view)) <= (hi - lo) * 4 / 3.92
    again = type(result).from_dict(json.loads(result.to_json()))
    assert again.to_json() == result.to_json()
    exact_result = cl_diag.measure(z1, z2)
    assert exact_result.layers["embedding"].geometry.uniformity_sampling is None
    text = exact_result.to_json()  # exact mode's bytes keep their keys
    assert '"sampling":' not in text and '"uniformity_sampling"' not in text
    assert '"exact": [' not in text


def test_geometry_at_data_set_scale_from_the_grams_equals_the_svds():
    """Moments mode's geometry (Gram eigenvalues, O(d^2) memory) against exact mode's SVDs."""
    from cl_diag.measurement.geometry import geometry_of

    rng = np.random.default_rng(13)
    z1 = rng.standard_normal((800, 12)) + 2.0 * rng.standard_normal((1, 12))
    views = normalise_views(z1, z1 + rng.standard_normal((800, 12)))
    exact = geometry_of(views, n_ref=1000)
    grams = geometry_of(views, n_ref=1000, uniformity_pairs=5000, seed=1)
    assert grams.alignment == pytest.approx(exact.alignment, rel=1e-12)
    assert grams.frontier_gap == pytest.approx(exact.frontier_gap, rel=1e-12, abs=1e-14)
    assert grams.alignment_ceiling.value == pytest.approx(exact.alignment_ceiling.value, rel=1e-12)
    assert grams.alignment_ceiling.below_one == exact.alignment_ceiling.below_one
    assert grams.uniformity_sampling is not None
    for view in ("u", "v"):
        assert getattr(grams.effective_rank, view) == pytest.approx(
            getattr(exact.effective_rank, view), rel=1e-10
        )
        assert getattr(grams.spectrum, view) == pytest.approx(
            getattr(exact.spectrum, view), rel=1e-9
        )
        lo, hi = getattr(grams.uniformity_sampling, view)
        assert lo < getattr(grams.uniformity, view) < hi
    assert exact.uniformity_sampling is None and "uniformity_sampling" not in exact.to_dict()


def test_analyze_moments_mode_refuses_more_views(run_cli, tmp_path):
    path = tmp_path / "x.pt"
    path.write_bytes(b"")
    done = run_cli("analyze", path, "--pairs", "moments", "--views", "3", "--out", tmp_path / "o")
    assert done.code == 2
    assert "drop --pairs moments" in done.err
