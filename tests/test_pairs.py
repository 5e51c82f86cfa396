"""Pair statistics (cl_diag.measurement.pairs) against independent float64 numpy brute force.

Reference values are computed in numpy from the float64 products of the library's
normalised float32 rows. The library's similarities are float32 matmul outputs, which
differ from those exact products by at most

    eps = gamma_d * sum_k |u_k v_k| <= gamma_d,   gamma_d = d u / (1 - d u),  u = 2^-24

(Higham, Accuracy and Stability of Numerical Algorithms, Thm 3.5, for any summation order;
sum_k |u_k v_k| <= |u| |v| ~ 1). Every tolerance below is derived from eps; counts that could
flip by round-off (values within eps of an edge) are bounded by the number of such values.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from cl_diag.measurement import theory
from cl_diag.measurement.pairs import (
    EXCESS_MARGIN,
    QUANTILES,
    delta_float32,
    fine_bins,
    normalise_views,
    pair_statistics,
)
from cl_diag.result import PairStats

U32 = 2.0**-24


def as_json(stats: dict[str, PairStats]) -> str:
    """The blocks as result.json writes them: equal texts mean bit-identical statistics."""
    return json.dumps({kind: block.to_dict() for kind, block in stats.items()})


SCHEMA_KEYS = [
    "count",
    "estimate",
    "mean",
    "var",
    "std",
    "min",
    "max",
    "quantiles",
    "quantile_error",
    "histogram",
]
NEG_KEYS = [*SCHEMA_KEYS, "excessive_ratio", "excessive_count", "excessive_margin_count"]


def gamma(d: int) -> float:
    # + one unit for the float32 rounding of the normalised entries (each entry relative error <= u,
    # so the exact dot product of the rounded rows moves by <= 2u (1 + u) sum |u_k v_k|)
    return d * U32 / (1 - d * U32) + 2.1 * U32


def reference(z1, z2, labels=None):
    """Exact (float64) similarities of the library's normalised float32 rows, by pair type."""
    u32, v32 = normalise_views(z1, z2)
    u, v = u32.double().numpy(), v32.double().numpy()
    n = u.shape[0]
    cross = u @ v.T
    off = ~np.eye(n, dtype=bool)
    iu = np.triu_indices(n, 1)
    out = {
        "positive": np.diag(cross).copy(),
        "cross_view_negative": cross[off],
        "within_view_negative": np.concatenate([(u @ u.T)[iu], (v @ v.T)[iu]]),
    }
    if labels is not None:
        lab = np.asarray(labels)
        same = lab[:, None] == lab[None, :]
        out["split"] = {
            "cross_view_negative": same[off],
            "within_view_negative": np.concatenate([same[iu], same[iu]]),
        }
    return out


def near(values: np.ndarray, edge: float, eps: float) -> int:
    return int(np.count_nonzero(np.abs(values - edge) <= eps))


def check_against(
    stats: PairStats,
    ref: np.ndarray,
    *,
    eps: float,
    n_ref: int,
    negative: bool,
    hist_bins: int = 100,
):
    """Every statistic of one block against the float64 reference values ``ref``."""
    count = ref.size
    assert stats.count == count
    assert stats.estimate is False
    assert list(stats.to_dict())[: len(SCHEMA_KEYS)] == SCHEMA_KEYS
    # each similarity is within eps of its reference, so are mean, min, max; the population
    # variance moves by at most 2 eps E|x - mean| + eps^2 <= 2 eps std + eps^2
    assert abs(stats.mean - ref.mean()) <= eps
    assert abs(stats.var - ref.var()) <= 2 * eps * ref.std() + eps**2
    assert stats.std == pytest.approx(math.sqrt(stats.var), rel=1e-15)
    assert abs(stats.min - ref.min()) <= eps
    assert abs(stats.max - ref.max()) <= eps
    # quantiles: within w/2 of the float32 values' quantiles, so within w/2 + eps of the reference
    w = 2.0 / fine_bins(hist_bins) if stats.quantile_error else 0.0
    assert stats.quantile_error in (0.0, 2.0 / fine_bins(hist_bins))
    for p in QUANTILES:
        exact = np.quantile(ref, p / 100.0)
        assert abs(stats.quantiles[str(p)] - exact) <= w / 2 + eps + 1e-15, p
        assert abs(stats.quantiles[str(p)] - exact) <= stats.quantile_error + eps + 1e-15
    # histogram on [-1, 1]: exact up to values within eps of a bin edge
    hist = stats.histogram
    assert hist.range == [-1.0, 1.0] and hist.bins == hist_bins
    expected, edges = np.histogram(np.clip(ref, -1.0, 1.0), bins=hist_bins, range=(-1.0, 1.0))
    slack = np.array([near(ref, e, eps) for e in edges])
    diff = np.abs(np.array(hist.counts) - expected)
    assert np.all(diff <= slack[:-1] + slack[1:]), diff.max()
    assert sum(hist.counts) == count
    if negative:
        delta = theory.delta(n_ref)
        exact_below = int(np.count_nonzero(ref < delta))
        assert abs(stats.excessive_count - exact_below) <= near(ref, delta, eps)
        assert stats.excessive_ratio == stats.excessive_count / count
    else:
        assert not stats.negative and "excessive_ratio" not in stats.to_dict()


@pytest.mark.parametrize(
    "n,d,block,hist_bins",
    [
        (2, 3, None, 100),
        (7, 5, 3, 100),
        (61, 16, 8, 128),
        (101, 32, 13, 100),
        (150, 128, 64, 64),
        (257, 24, 100, 100),
    ],
)
def test_every_statistic_matches_brute_force(n, d, block, hist_bins):
    rng = np.random.default_rng(n)
    z1 = rng.standard_normal((n, d)) * rng.uniform(0.5, 3.0, (n, 1))  # unnormalised rows
    z2 = z1 + 0.7 * rng.standard_normal((n, d))
    n_ref = max(n, 3)
    stats = pair_statistics(z1, z2, n_ref=n_ref, block_size=block, hist_bins=hist_bins)
    ref = reference(z1, z2)
    eps = gamma(d)
    assert list(stats) == ["positive", "cross_view_negative", "within_view_negative"]
    assert stats["cross_view_negative"].count == n * (n - 1)
    assert stats["within_view_negative"].count == n * (n - 1)
    assert stats["positive"].quantile_error == 0.0  # n values: exact quantiles
    for kind in ("positive", "cross_view_negative", "within_view_negative"):
        check_against(
            stats[kind],
            ref[kind],
            eps=eps,
            n_ref=n_ref,
            negative=kind != "positive",
            hist_bins=hist_bins,
        )


def test_variance_of_nearly_constant_similarities():
    """A dominant common direction: every similarity is ~0.99 with spread ~1e-3, so a tile's
    one-pass sum s^2 - (sum s)^2/n would cancel; the centred two-pass path must take over."""
    rng = np.random.default_rng(8)
    n, d = 90, 16
    common = np.zeros(d)
    common[0] = 30.0
    z1 = common + rng.standard_normal((n, d))
    z2 = common + rng.standard_normal((n, d))
    stats = pair_statistics(z1, z2, block_size=32)
    ref = reference(z1, z2)
    eps = gamma(d)
    for kind in ("cross_view_negative", "within_view_negative"):
        r = ref[kind]
        assert r.var() < 1e-3 * np.mean(r**2)  # really the cancelling case
        check_against(stats[kind], r, eps=eps, n_ref=n, negative=True)
        assert stats[kind].var == pytest.approx(r.var(), rel=0.02)


def test_threshold_near_the_bulk_counts_exactly():
    """n_ref chosen so that delta = -1/19 sits in the bulk of the negatives (std ~ 1/sqrt(40))."""
    rng = np.random.default_rng(3)
    z = rng.standard_normal((120, 40))
    z2 = z + rng.standard_normal((120, 40))
    stats = pair_statistics(z, z2, n_ref=20, block_size=17)
    ref = reference(z, z2)
    for kind in ("cross_view_negative", "within_view_negative"):
        check_against(stats[kind], ref[kind], eps=gamma(40), n_ref=20, negative=True)
        assert 0.2 < stats[kind].excessive_ratio < 0.5


def lattice_views(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows with entries +-1/4 in d = 16: unit norm exactly, and every dot product is a
    multiple of 1/8 computed without rounding in float32, so the library's similarities
    equal the reference exactly, and many sit exactly on histogram edges and on delta."""
    rng = np.random.default_rng(seed)
    z1 = rng.choice([-0.25, 0.25], size=(n, 16))
    z2 = np.where(rng.random((n, 16)) < 0.2, -z1, z1)
    return z1, z2


@pytest.mark.parametrize("block", [None, 9, 32])
def test_lattice_is_exact_including_edges_and_strict_threshold(block):
    n = 90
    z1, z2 = lattice_views(n, 0)
    n_ref = 9  # delta = -1/8, a value the lattice takes: those pairs are not "strictly below"
    stats = pair_statistics(z1, z2, n_ref=n_ref, block_size=block)
    ref = reference(z1, z2)
    w = 2.0 / fine_bins(100)
    for kind in ("positive", "cross_view_negative", "within_view_negative"):
        s, r = stats[kind], ref[kind]
        assert np.all(np.abs(r * 8 - np.round(r * 8)) == 0)  # the lattice really is exact
        assert s.min == r.min() and s.max == r.max()
        assert s.mean == pytest.approx(r.mean(), rel=0, abs=1e-15)
        assert s.var == pytest.approx(r.var(), rel=1e-13, abs=1e-16)
        # values on an edge belong to the bin above it (numpy's convention); 1.0 to the last bin
        assert s.histogram.counts == np.histogram(r, bins=100, range=(-1, 1))[0].tolist()
        for p in QUANTILES:
            assert abs(s.quantiles[str(p)] - np.quantile(r, p / 100)) <= (
                w / 2 if kind != "positive" else 1e-15
            )
        if kind != "positive":
            assert np.count_nonzero(r == -0.125) > 0
            assert s.excessive_count == int(np.count_nonzero(r < -0.125))


def test_delta_float32_is_the_exact_boundary():
    for n_ref in (2, 3, 9, 10, 50_000, 126_689, 1_281_167):
        delta, t32 = theory.delta(n_ref), delta_float32(n_ref)
        assert t32 >= delta and np.float32(t32) == t32
        below = np.nextafter(np.float32(t32), np.float32(-np.inf))
        assert float(below) < delta  # no float32 value lies in [delta, t32)
    # a float32 similarity equal to the float32 rounding of delta but above delta is not excessive
    n_ref = 50_000
    delta = theory.delta(n_ref)
    r32 = float(np.float32(delta))
    assert r32 != delta
    assert (r32 < delta) == (r32 < delta_float32(n_ref))


# --------------------------------------------------------------------------- closed-form cases


def etf(n: int, seed: int) -> np.ndarray:
    """A simplex ETF of n points in R^n: rows e_i - 1/n (pairwise cosine exactly -1/(n-1) in
    exact arithmetic), randomly rotated so that no coordinate pattern favours the round-off."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    return (np.eye(n) - 1.0 / n) @ q


@pytest.mark.parametrize("n", [3, 20, 64, 100])
def test_simplex_etf_every_negative_at_delta(n):
    z = etf(n, n)
    delta = -1.0 / (n - 1)
    eps = gamma(n)
    stats = pair_statistics(z, z, n_ref=n, block_size=16)
    for kind in ("cross_view_negative", "within_view_negative"):
        s = stats[kind]
        assert s.count == n * (n - 1)
        assert delta - eps <= s.min <= s.max <= delta + eps
        assert abs(s.mean - delta) <= eps
        assert s.var <= eps**2
        # The excessive ratio at exactly n_ref = n is decided by float32 round-off alone: the
        # similarities scatter within ~1e-7 of delta, and anywhere between 0 % and 100 % land below
        # it (measured on ETFs of n = 5..257, rotated or not: 0.0, 0.03, 0.2, 0.48, 1.0). "Ratio 0
        # up to round-off" therefore means: no negative lies below delta - eps. A threshold under
        # that band (n_ref = n - 1, delta' = -1/(n-2) = delta - 1/((n-1)(n-2)), far below
        # delta - eps) must count none, and one above the band (n_ref = n + 1, delta' = -1/n) must
        # count all.
    # At n_ref = n the count is what float32 gives: the same single GEMM, recomputed here.
    one_tile = pair_statistics(z, z, n_ref=n)  # block = n: the whole matrix is one float32 GEMM
    u, _ = normalise_views(z, z)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # the library's workers are single-threaded
        sims = torch.mm(u, u.T).numpy()
    finally:
        torch.set_num_threads(threads)
    t32 = np.float32(delta_float32(n))
    off = ~np.eye(n, dtype=bool)
    assert one_tile["cross_view_negative"].excessive_count == int(np.count_nonzero(sims[off] < t32))
    assert one_tile["within_view_negative"].excessive_count == 2 * int(
        np.count_nonzero(np.triu(sims < t32, 1))
    )
    assert 1.0 / ((n - 1) * (n - 2)) > eps and 1.0 / (n * (n - 1)) > eps
    below = pair_statistics(z, z, n_ref=n - 1)
    above = pair_statistics(z, z, n_ref=n + 1)
    for kind in ("cross_view_negative", "within_view_negative"):
        assert below[kind].excessive_ratio == 0.0 and below[kind].excessive_count == 0
        assert above[kind].excessive_ratio == 1.0
        # below δ − ε (issue 32): the float residue at the ETF never counts, whatever its sign
        assert stats[kind].excessive_margin_count == one_tile[kind].excessive_margin_count == 0
        assert stats[kind].excessive_margin_ratio == 0.0
    pos = stats["positive"]
    assert 1 - eps <= pos.min <= pos.max <= 1 + eps


def test_two_point_etf_is_exact():
    """n = 2: the ETF is an antipodal pair, delta = -1 is exactly representable, nothing is below
    it."""
    z = np.array([[3.0, 0.0], [-0.5, 0.0]])
    stats = pair_statistics(z, z)
    for kind in ("cross_view_negative", "within_view_negative"):
        s = stats[kind]
        assert (s.count, s.mean, s.var, s.min, s.max) == (2, -1.0, 0.0, -1.0, -1.0)
        assert s.excessive_count == 0 and s.excessive_ratio == 0.0
        assert s.histogram.counts[0] == 2
        assert all(q == -1.0 for q in s.quantiles.values())


def antipodal(n: int, k: int, d: int = 4):
    """u_i = sigma_i e, v_i = -sigma_i e with sigma_i = +1 for i < k, -1 otherwise (inputs scaled
    arbitrarily): every similarity is exactly +-1 and the statistics have closed forms."""
    sigma = np.where(np.arange(n) < k, 1.0, -1.0)
    scale = np.linspace(0.5, 4.0, n)
    e = np.zeros(d)
    e[1] = 1.0
    return (sigma * scale)[:, None] * e, (-sigma * scale * 2.0)[:, None] * e, sigma


@pytest.mark.parametrize("n,k,block", [(10, 3, 4), (33, 11, 7), (40, 40, 16)])
def test_antipodal_closed_forms(n, k, block):
    z1, z2, sigma = antipodal(n, k)
    stats = pair_statistics(z1, z2, n_ref=1000, block_size=block, labels=(sigma > 0).astype(int))
    pairs = n * (n - 1)
    same_sign = k * (k - 1) + (n - k) * (n - k - 1)  # ordered i != j with sigma_i = sigma_j
    diff_sign = 2 * k * (n - k)
    # positives u_i.v_i = -1
    pos = stats["positive"]
    assert (pos.mean, pos.var, pos.min, pos.max) == (-1.0, 0.0, -1.0, -1.0)
    # cross-view u_i.v_j = -sigma_i sigma_j: -1 for same sign, +1 otherwise
    c = stats["cross_view_negative"]
    mean = (diff_sign - same_sign) / pairs
    assert c.mean == pytest.approx(mean, abs=1e-15)
    assert c.var == pytest.approx(1 - mean**2, abs=1e-14)
    assert c.excessive_count == same_sign and c.excessive_ratio == same_sign / pairs
    assert c.histogram.counts[0] == same_sign and c.histogram.counts[-1] == diff_sign
    # within-view u_i.u_j = v_i.v_j = sigma_i sigma_j: +1 for same sign (both views)
    w = stats["within_view_negative"]
    mean_w = (same_sign - diff_sign) / pairs
    assert w.mean == pytest.approx(mean_w, abs=1e-15)
    assert w.var == pytest.approx(1 - mean_w**2, abs=1e-14)
    assert w.excessive_count == diff_sign
    # classes are the signs: same-class cross-view pairs are all -1, different-class all +1
    split = c.by_class
    assert split.same_class.count == same_sign and split.same_class.mean in (-1.0, None)
    assert split.different_class.count == diff_sign
    if diff_sign:
        assert split.different_class.mean == 1.0 and split.different_class.var == 0.0
        assert split.different_class.excessive_count == 0
    else:  # one class only: the different-class split is empty
        d = split.different_class
        assert d.mean is None and d.var is None and d.min is None and d.excessive_ratio is None
        assert d.excessive_count == 0 and sum(d.histogram.counts) == 0
        assert all(q is None for q in d.quantiles.values())
    # order statistics of a two-valued population: the sorted values are same_sign times -1, then
    # +1; numpy's linear rule interpolates at h = (count - 1) p. The histogram estimate is within
    # half a fine bin of it.
    w = 2.0 / fine_bins(100)
    for p in QUANTILES:
        h = (pairs - 1) * p / 100
        lo, frac = math.floor(h), h - math.floor(h)
        x_lo = -1.0 if lo < same_sign else 1.0
        x_hi = -1.0 if min(lo + 1, pairs - 1) < same_sign else 1.0
        assert abs(c.quantiles[str(p)] - (x_lo + frac * (x_hi - x_lo))) <= w / 2


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize("classes,block", [(3, 11), (7, None)])
def test_labels_split_matches_brute_force(classes, block):
    rng = np.random.default_rng(classes)
    n, d = 97, 12
    labels = rng.integers(0, classes, n)
    z1 = rng.standard_normal((n, d)) + 2.0 * np.eye(classes, d)[labels]
    z2 = z1 + 0.5 * rng.standard_normal((n, d))
    stats = pair_statistics(z1, z2, n_ref=50_000, labels=labels, block_size=block)
    ref = reference(z1, z2, labels)
    eps = gamma(d)
    for kind in ("cross_view_negative", "within_view_negative"):
        check_against(stats[kind], ref[kind], eps=eps, n_ref=50_000, negative=True)
        same = ref["split"][kind]
        split = stats[kind].by_class
        assert list(split.to_dict()) == ["same_class", "different_class"]
        check_against(split.same_class, ref[kind][same], eps=eps, n_ref=50_000, negative=True)
        check_against(split.different_class, ref[kind][~same], eps=eps, n_ref=50_000, negative=True)
        assert split.same_class.count + split.different_class.count == n * (n - 1)
    assert stats["positive"].by_class is None and "by_class" not in stats["positive"].to_dict()


def test_labels_of_any_kind_and_singleton_classes():
    rng = np.random.default_rng(5)
    z = rng.standard_normal((12, 6))
    names = np.array(list("abcdefghijkl"))  # every instance its own class: no same-class pairs
    stats = pair_statistics(z, z * 2, labels=names)
    split = stats["cross_view_negative"].by_class
    assert split.same_class.count == 0 and split.same_class.mean is None
    assert split.different_class.count == 132
    assert split.different_class.mean == stats["cross_view_negative"].mean
    as_tensor = pair_statistics(z, z * 2, labels=torch.arange(12))
    assert as_tensor == stats


# --------------------------------------------------------------------------- sampled mode


def test_sampled_within_five_standard_errors_of_exact():
    """Tolerances: K iid uniform draws. The sample mean has standard error sigma/sqrt(K); the
    sample (population-form) variance sqrt((mu4 - sigma^4)/K) to first order; the ratio
    sqrt(p(1-p)/K). 5 standard errors bound a normal deviation with probability 1 - 6e-7.
    For quantiles, distribution-free: the sample p-quantile lies between the population
    quantiles at p -+ 5 sqrt(p(1-p)/K) (binomial count of draws below a population quantile)."""
    rng = np.random.default_rng(11)
    n, d, k = 200, 16, 20_000
    z1 = rng.standard_normal((n, d))
    z2 = z1 + rng.standard_normal((n, d))
    n_ref = 10  # delta = -1/9, inside the bulk, so the ratio is a real test
    exact = pair_statistics(z1, z2, n_ref=n_ref)
    sampled = pair_statistics(z1, z2, n_ref=n_ref, mode="sampled", num_pairs=k, seed=7)
    ref = reference(z1, z2)
    for kind in ("positive", "cross_view_negative", "within_view_negative"):
        s, e, r = sampled[kind], exact[kind], ref[kind]
        assert s.estimate is True and e.estimate is False
        assert s.count == k and s.quantile_error == 0.0
        sigma2 = r.var()
        mu4 = np.mean((r - r.mean()) ** 4)
        assert abs(s.mean - e.mean) <= 5 * math.sqrt(sigma2 / k)
        assert abs(s.var - e.var) <= 5 * math.sqrt((mu4 - sigma2**2) / k) + sigma2 / k
        assert r.min() - 1e-6 <= s.min and s.max <= r.max() + 1e-6
        for p in QUANTILES:
            q = p / 100
            band = 5 * math.sqrt(q * (1 - q) / k)
            lo, hi = np.quantile(r, max(q - band, 0)), np.quantile(r, min(q + band, 1))
            assert lo - 1e-6 <= s.quantiles[str(p)] <= hi + 1e-6
        assert sum(s.histogram.counts) == k
        if kind != "positive":
            p = e.excessive_ratio
            assert 0.05 < p < 0.95
            assert abs(s.excessive_ratio - p) <= 5 * math.sqrt(p * (1 - p) / k)
            assert s.excessive_ratio == s.excessive_count / k


def test_sampled_draws_only_distinct_instances():
    """u = v: positives are 1 (up to round-off) and every negative is far below; with only n = 3
    instances a sampler that ever drew i = j for a negative would show a maximum near 1."""
    z = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.6, 0.8, 0.0]])
    s = pair_statistics(z, z, mode="sampled", num_pairs=3000, seed=1)
    assert s["positive"].min > 1 - 1e-6
    for kind in ("cross_view_negative", "within_view_negative"):
        assert s[kind].max < 0.81
        # the three distinct similarities 0, 0.6, 0.8 are equally likely: mean 1.4/3
        assert abs(s[kind].mean - 1.4 / 3) <= 5 * math.sqrt(np.var([0, 0.6, 0.8]) / 3000)


def test_sampled_labels_split():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 50)
    z = rng.standard_normal((50, 8))
    s = pair_statistics(z, z, labels=labels, mode="sampled", num_pairs=4000, seed=3)
    for kind in ("cross_view_negative", "within_view_negative"):
        split = s[kind].by_class
        assert split.same_class.count + split.different_class.count == 4000
        assert split.same_class.estimate is True
        # same-class share of the n(n-1) pairs
        n1 = int(labels.sum())
        share = (n1 * (n1 - 1) + (50 - n1) * (49 - n1)) / (50 * 49)
        assert abs(split.same_class.count / 4000 - share) <= 5 * math.sqrt(
            share * (1 - share) / 4000
        )


def test_deterministic_and_seeded():
    rng = np.random.default_rng(0)
    z1, z2 = rng.standard_normal((80, 10)), rng.standard_normal((80, 10))
    a = pair_statistics(z1, z2, mode="sampled", num_pairs=500, seed=4)
    b = pair_statistics(z1, z2, mode="sampled", num_pairs=500, seed=4)
    c = pair_statistics(z1, z2, mode="sampled", num_pairs=500, seed=5)
    assert as_json(a) == as_json(b)
    assert a["cross_view_negative"].mean != c["cross_view_negative"].mean
    e1 = pair_statistics(z1, z2, block_size=16)
    e2 = pair_statistics(z1, z2, block_size=16)
    assert as_json(e1) == as_json(e2)


def test_exact_result_does_not_depend_on_thread_count():
    rng = np.random.default_rng(1)
    z1, z2 = rng.standard_normal((150, 20)), rng.standard_normal((150, 20))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = pair_statistics(z1, z2, block_size=32)
        torch.set_num_threads(4)
        four = pair_statistics(z1, z2, block_size=32)
    finally:
        torch.set_num_threads(threads)
    assert as_json(one) == as_json(four)
    assert torch.get_num_threads() == threads


def test_block_size_changes_only_rounding():
    """Other tile shapes may take other float32 GEMM kernels (each within eps of exact)."""
    rng = np.random.default_rng(2)
    z1, z2 = rng.standard_normal((120, 20)), rng.standard_normal((120, 20))
    a = pair_statistics(z1, z2, block_size=7)
    b = pair_statistics(z1, z2, block_size=120)
    eps = gamma(20)
    for kind in ("cross_view_negative", "within_view_negative"):
        assert a[kind].count == b[kind].count
        for key in ("mean", "min", "max"):
            assert abs(getattr(a[kind], key) - getattr(b[kind], key)) <= 2 * eps
        assert abs(a[kind].var - b[kind].var) <= 4 * eps


def test_result_is_plain_json():
    rng = np.random.default_rng(0)
    z = torch.tensor(rng.standard_normal((30, 5)), dtype=torch.float32)
    typed = pair_statistics(z, z + 0.1, labels=np.arange(30) % 2, hist_bins=10)
    stats = {kind: block.to_dict() for kind, block in typed.items()}
    text = json.dumps(stats, allow_nan=False)
    assert json.loads(text) == stats
    assert {kind: PairStats.from_dict(block) for kind, block in json.loads(text).items()} == typed

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        else:
            assert x is None or type(x) in (int, float, bool, str), type(x)

    walk(stats)
    assert list(stats["cross_view_negative"]) == [*NEG_KEYS, "by_class"]
    assert len(typed["positive"].histogram.counts) == 10


@pytest.mark.parametrize("hist_bins", [1, 100, 1000])
@pytest.mark.parametrize("mode", ["exact", "sampled", "moments"])
def test_margin_count_is_below_the_grid_edge_under_delta_minus_epsilon(mode, hist_bins):
    # issue 32: "below δ" counted as s < δ − ε, ε = 0.001, to the fine grid's edge at or below
    # T − ε (T the float32 δ): the count of the similarities below that edge, found here with
    # numpy from the same float32 GEMM, never counting one within ε of δ
    rng = np.random.default_rng(3)
    n, d = 120, 8
    z1 = torch.tensor(rng.standard_normal((n, d)), dtype=torch.float32)
    z2 = z1 + torch.tensor(0.7 * rng.standard_normal((n, d)), dtype=torch.float32)
    stats = pair_statistics(z1, z2, mode=mode, num_pairs=4000, seed=1, hist_bins=hist_bins)
    assert EXCESS_MARGIN == 1e-3
    width = 2.0 / fine_bins(hist_bins)
    t32 = delta_float32(n)
    edge = -1.0 + math.floor((t32 - EXCESS_MARGIN + 1.0) / width) * width
    assert t32 - EXCESS_MARGIN - width < edge <= t32 - EXCESS_MARGIN
    cross = stats["cross_view_negative"]
    assert stats["positive"].excessive_margin_count is None
    assert 0 < cross.excessive_margin_count < cross.excessive_count
    assert cross.excessive_margin_ratio == cross.excessive_margin_count / cross.count
    if mode == "exact":
        u, v = normalise_views(z1, z2)
        threads = torch.get_num_threads()
        try:
            torch.set_num_threads(1)  # the library's workers are single-threaded
            sims = torch.mm(u, v.T).numpy()
        finally:
            torch.set_num_threads(threads)
        off = sims[~np.eye(n, dtype=bool)]
        assert cross.excessive_margin_count == int(np.count_nonzero(off < edge))
        # the negatives between δ − ε and δ are what the margin leaves out
        within = np.count_nonzero((off >= edge) & (off < np.float32(t32)))
        assert cross.excessive_count - cross.excessive_margin_count == within > 0


@pytest.mark.parametrize("hist_bins", [1, 7, 64, 100, 128, 1000])
def test_histogram_bins_and_fine_grid(hist_bins):
    assert fine_bins(hist_bins) % hist_bins == 0 and fine_bins(hist_bins) >= 65_536
    assert (fine_bins(hist_bins) // hist_bins) & (
        fine_bins(hist_bins) // hist_bins - 1
    ) == 0  # power of 2
    z1, z2 = lattice_views(40, 1)
    stats = pair_statistics(z1, z2, hist_bins=hist_bins)
    ref = reference(z1, z2)["cross_view_negative"]
    assert (
        stats["cross_view_negative"].histogram.counts
        == np.histogram(ref, hist_bins, (-1, 1))[0].tolist()
    )


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "z1,z2,kwargs,match",
    [
        (np.ones((1, 3)), np.ones((1, 3)), {}, "at least 2"),
        (np.ones((4, 0)), np.ones((4, 0)), {}, "d = 0"),
        (np.ones((4, 3)), np.ones((5, 3)), {}, "same shape"),
        (np.ones(4), np.ones(4), {}, "2-D"),
        (np.array([[1.0, np.nan], [1.0, 2.0]]), np.ones((2, 2)), {}, "NaN or Inf"),
        (np.ones((2, 2)), np.array([[1.0, 2.0], [np.inf, 1.0]]), {}, "NaN or Inf"),
        (np.array([[1.0, 2.0], [0.0, 0.0]]), np.ones((2, 2)), {}, "all zeros"),
        (np.ones((3, 2)), np.ones((3, 2)), {"labels": [0, 1]}, "labels"),
        (np.ones((3, 2)), np.ones((3, 2)), {"n_ref": 1}, "n_ref"),
        (np.ones((3, 2)), np.ones((3, 2)), {"n_ref": 2.5}, "n_ref"),
        (np.ones((3, 2)), np.ones((3, 2)), {"mode": "fast"}, "mode"),
        (np.ones((3, 2)), np.ones((3, 2)), {"mode": "sampled", "num_pairs": 0}, "num_pairs"),
        (np.ones((3, 2)), np.ones((3, 2)), {"block_size": 0}, "block_size"),
        (np.ones((3, 2)), np.ones((3, 2)), {"hist_bins": 0}, "hist_bins"),
        (np.array([["a", "b"], ["c", "d"]]), np.ones((2, 2)), {}, "real numbers"),
    ],
)
def test_bad_input_raises_value_error(z1, z2, kwargs, match):
    with pytest.raises(ValueError, match=match):
        pair_statistics(z1, z2, **kwargs)


def test_bad_rows_found_in_any_normalisation_chunk():
    """Rows are normalised in float64 chunks of ~8 MiB (8 rows at d = 2^17): row numbers are
    global."""
    z = np.ones((20, 1 << 17), dtype=np.float32)
    z[13, 5] = np.nan
    with pytest.raises(ValueError, match="first in row 13"):
        normalise_views(z, np.ones_like(z))
    z[13, 5] = 0.0
    z[17] = 0.0
    with pytest.raises(ValueError, match="z2 row 17 is all zeros"):
        normalise_views(np.ones_like(z), z)


def test_normalisation_is_correctly_rounded():
    rng = np.random.default_rng(9)
    z = rng.standard_normal((20, 7)) * 1e3
    u, _ = normalise_views(z, z)
    expected = (z / np.linalg.norm(z, axis=1, keepdims=True)).astype(np.float32)
    assert u.dtype == torch.float32
    assert np.max(np.abs(u.numpy() - expected)) <= 2 * U32  # at most one float32 ulp apart


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    rng = np.random.default_rng(0)
    z1, z2 = rng.standard_normal((500, 64)), rng.standard_normal((500, 64))
    labels = rng.integers(0, 4, 500)
    cpu = pair_statistics(torch.tensor(z1), torch.tensor(z2), labels=labels, block_size=96)
    gpu = pair_statistics(
        torch.tensor(z1).cuda(), torch.tensor(z2).cuda(), labels=labels, block_size=96
    )
    eps = gamma(64)
    for kind in ("cross_view_negative", "within_view_negative"):
        assert gpu[kind].count == cpu[kind].count
        assert abs(gpu[kind].mean - cpu[kind].mean) <= 2 * eps
        assert abs(gpu[kind].min - cpu[kind].min) <= 2 * eps
        assert abs(gpu[kind].excessive_count - cpu[kind].excessive_count) <= 50
    sampled_cpu = pair_statistics(torch.tensor(z1), torch.tensor(z2), mode="sampled", num_pairs=300)
    sampled_gpu = pair_statistics(
        torch.tensor(z1).cuda(), torch.tensor(z2).cuda(), mode="sampled", num_pairs=300
    )
    assert sampled_gpu["cross_view_negative"].count == sampled_cpu["cross_view_negative"].count
    assert (
        abs(sampled_gpu["cross_view_negative"].mean - sampled_cpu["cross_view_negative"].mean)
        <= 1e-6
    )
