"""cl_diag.measurement.stats: the intervals and tests behind the reports' findings, against
scipy, published values and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from cl_diag.measurement.stats import (
    newcombe_interval,
    pair_mean_se,
    pair_var_se,
    summarize,
    welch_se_df,
    wilson_interval,
    z_value,
)
from cl_diag.report.claims.inference import (
    borderline,
    equivalence_sensitivity,
    far_from_normal,
    holm_levels,
    interval_at,
    margin_p_values,
    power,
    replicate_error,
    replication,
    replication_bootstrap,
    seeds_needed,
    sensitivity,
    trend,
    verdict,
)


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (443, 450), (1, 1000)])
def test_wilson_matches_scipy(k, n):
    expected = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(expected.low, abs=1e-12)
    assert hi == pytest.approx(expected.high, abs=1e-12)


def test_wilson_takes_an_effective_sample_size():
    # half the pairs: the same proportion with n/2 items, a wider interval
    lo_n, hi_n = wilson_interval(0.57 * 1000, 1000)
    lo_h, hi_h = wilson_interval(0.57 * 500, 500)
    assert lo_h < lo_n < 0.57 < hi_n < hi_h
    with pytest.raises(ValueError):
        wilson_interval(1, 0)


def test_newcombe_published_example():
    # Newcombe (1998), Stat. Med. 17:873, Table II example (a): 56/70 - 48/80, method 10
    lo, hi = newcombe_interval(48 / 80, 80, 56 / 70, 70)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)


def test_summarize_is_the_student_t_interval():
    values = [0.1027, 0.0923, 0.0917]
    s = summarize(values)
    x = np.asarray(values)
    expected = stats.t.interval(0.95, 2, loc=x.mean(), scale=stats.sem(x))
    assert s.mean == pytest.approx(x.mean()) and s.sd == pytest.approx(x.std(ddof=1))
    assert s.n == 3 and s.interval == pytest.approx(expected)
    one = summarize([0.5])
    assert (one.mean, one.sd, one.n, one.interval) == (0.5, None, 1, None)
    with pytest.raises(ValueError):
        summarize([])


def test_trend_slope_interval_and_permutation():
    x = np.repeat([4.0, 5.0, 6.0], 3)  # log2 m for m = 16, 32, 64, three seeds each
    noise = np.array([0.01, -0.02, 0.015, 0.0, 0.02, -0.01, -0.015, 0.01, 0.005])
    strong = trend(x, -0.3 * x + noise)
    fit = stats.linregress(x, -0.3 * x + noise)
    half = stats.t.ppf(0.975, 7) * fit.stderr
    assert strong.slope == pytest.approx(fit.slope)
    assert strong.interval == pytest.approx((fit.slope - half, fit.slope + half))
    assert strong.points == 9 and strong.levels == 3
    assert strong.se == pytest.approx(fit.stderr) and strong.df == 7
    resid = (-0.3 * x + noise) - (fit.intercept + fit.slope * x)
    assert strong.resid_sd == pytest.approx(math.sqrt((resid**2).sum() / 7))
    assert strong.p_value is not None and strong.p_value < 0.01
    flat = trend(x, noise)
    assert flat.interval is not None and flat.interval[0] < 0 < flat.interval[1]
    assert flat.p_value is not None and flat.p_value > 0.2
    # the permutation test is seeded: the same data give the same p-value
    assert trend(x, noise).p_value == flat.p_value
    # one level, or two points: no interval
    assert trend([5.0, 5.0, 5.0], [1.0, 2.0, 3.0]).interval is None
    assert trend([4.0, 5.0], [1.0, 0.5]).interval is None


def test_pair_mean_bound_covers_the_simulated_spread():
    # Hoeffding: the mean over all ordered cross-view pairs of n sampled instances has
    # SD <= sqrt(2 Var(pair) / n). Simulate instances drawn iid from one population with a
    # common direction (so pairs sharing an instance are correlated) and check the bound
    # against the spread of the mean over repeated samples of n instances.
    rng = np.random.default_rng(0)
    n, d, reps = 40, 8, 400
    common = 0.7 * rng.standard_normal(d)
    means, variances = [], []
    for _ in range(reps):
        base = rng.standard_normal((n, d)) + common
        u = base + 0.3 * rng.standard_normal((n, d))
        v = base + 0.3 * rng.standard_normal((n, d))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        s = u @ v.T
        neg = s[~np.eye(n, dtype=bool)]
        means.append(neg.mean())
        variances.append(neg.var())
    observed = float(np.std(means, ddof=1))
    bound = pair_mean_se(float(np.mean(variances)), n)
    assert observed <= bound
    assert bound < 5 * observed  # a bound, but not a vacuous one
    assert pair_mean_se(0.1, 1) == math.inf


def test_pair_var_bound_covers_the_simulated_spread():
    rng = np.random.default_rng(1)
    n, d, reps = 40, 8, 300
    variances, stats_ = [], []
    for _ in range(reps):
        u = rng.standard_normal((n, d))
        v = u + 0.5 * rng.standard_normal((n, d))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        neg = (u @ v.T)[~np.eye(n, dtype=bool)]
        variances.append(neg.var())
        stats_.append((neg.mean(), neg.var(), np.abs(neg).max()))
    observed = float(np.std(variances, ddof=1))
    mean, var, largest = (float(np.mean([s[i] for s in stats_])) for i in range(3))
    assert observed <= pair_var_se(mean, var, largest, n)


@pytest.mark.parametrize(
    "effect, interval, expect, minimum, want",
    [
        (-0.6, (-0.7, -0.5), "decrease", 0.05, "supported"),
        (0.6, (0.5, 0.7), "decrease", 0.05, "contradicted"),
        (-0.6, (-1.2, 0.1), "decrease", 0.05, "inconclusive"),  # crosses zero
        # issue 32: consistent but tiny, wholly short of the claimed size: the data reject it
        (-0.01, (-0.02, -0.005), "decrease", 0.05, "not borne out"),
        # issue 21: the point estimate beyond the margin is not enough, the interval must be
        (-0.06, (-0.08, -0.04), "decrease", 0.05, "inconclusive"),
        (-0.05, (-0.08, -0.05), "decrease", 0.05, "supported"),  # the end on the margin counts
        (0.02, (0.01, 0.03), "increase", 0.005, "supported"),
        (0.02, None, "increase", 0.005, "inconclusive"),  # no interval: one run per side
        (-0.02, (-0.03, -0.01), "increase", 0.005, "contradicted"),
        # on the other side of zero, but not by the margin everywhere: short of the claim
        (-0.02, (-0.03, -0.004), "increase", 0.005, "not borne out"),
        (0.004, (0.002, 0.006), "increase", 0.005, "inconclusive"),  # holds the claimed size
        (0.01, (-0.02, 0.04), "agree", 0.05, "supported"),
        (0.09, (0.06, 0.12), "agree", 0.05, "contradicted"),
        (-0.09, (-0.12, -0.06), "agree", 0.05, "contradicted"),
        (0.05, (0.02, 0.08), "agree", 0.05, "inconclusive"),  # inside and outside
        (0.0, (-0.2, 0.2), "agree", 0.05, "inconclusive"),  # wider than the tolerance
    ],
)
def test_verdict_rules(effect, interval, expect, minimum, want):
    assert verdict(effect, interval, expect=expect, minimum=minimum) == want


@pytest.mark.parametrize(
    "interval, expect, want",
    [
        # a source's own number c = 0.07 above a reference, margin 0.05 the other way
        ((0.08, 0.1), "increase", "supported"),
        ((0.03, 0.06), "increase", "not borne out"),
        ((-0.04, 0.06), "increase", "not borne out"),  # crosses zero, still short of c
        ((0.06, 0.09), "increase", "inconclusive"),
        ((-0.09, -0.05), "increase", "contradicted"),
        ((-0.1, -0.08), "decrease", "supported"),
        ((-0.06, -0.03), "decrease", "not borne out"),
        ((0.05, 0.07), "decrease", "contradicted"),
    ],
)
def test_a_claimed_size_sets_supported_and_not_borne_out(interval, expect, want):
    assert verdict(0.0, interval, expect=expect, minimum=0.05, claimed=0.07) == want


def test_a_claimed_size_of_zero_and_its_bounds():
    # the rebuttal's "over 57 %" as share - 57 %: claimed 0, contradicted at one half
    assert verdict(0.0, (0.001, 0.01), expect="increase", minimum=0.07, claimed=0.0) == "supported"
    assert verdict(0.0, (-0.02, -0.01), expect="increase", minimum=0.07, claimed=0.0) == (
        "not borne out"
    )
    assert verdict(0.0, (-0.2, -0.08), expect="increase", minimum=0.07, claimed=0.0) == (
        "contradicted"
    )
    with pytest.raises(ValueError, match="claimed size"):
        verdict(0.0, (0.0, 1.0), expect="increase", minimum=0.07, claimed=-0.07)
    with pytest.raises(ValueError, match="claimed size"):
        verdict(0.0, (0.0, 1.0), expect="agree", minimum=0.07, claimed=0.01)


def test_verdict_rejects_unknown_expectations():
    with pytest.raises(ValueError, match="expect must be one of"):
        verdict(1.0, (0.5, 1.5), expect="bigger", minimum=0.1)


@pytest.mark.parametrize("claimed", [None, 0.0, 0.08])
@pytest.mark.parametrize("expect", ["increase", "decrease", "agree"])
def test_margin_p_values_decide_like_the_interval_at_that_level(expect, claimed):
    # the interval at 1 - 2a clears a bound exactly when that bound's one-sided p <= a
    if expect == "agree" and claimed is not None:
        return
    rng = np.random.default_rng(5)
    seen = set()
    for _ in range(300):
        effect, se, df = rng.normal(0, 0.1), rng.uniform(0.005, 0.08), int(rng.integers(2, 20))
        a = float(rng.choice([0.025, 0.0125, 0.005]))
        interval = interval_at(effect, se, df, 1 - 2 * a)
        decided = verdict(effect, interval, expect=expect, minimum=0.05, claimed=claimed)
        seen.add(decided)
        tests = margin_p_values(effect, se, df, expect=expect, minimum=0.05, claimed=claimed)
        assert (decided == "supported") == (tests.supported <= a), (effect, se, df, a)
        assert (decided == "contradicted") == (tests.contradicted <= a), (effect, se, df, a)
        # not borne out: the claimed size rejected, but not contradicted
        assert (decided == "not borne out") == (
            tests.not_borne_out <= a and tests.contradicted > a
        ), (effect, se, df, a)
        assert (decided == "inconclusive") == (tests.deciding > a)
    assert len(seen) == (3 if expect == "agree" else 4), seen


def test_margin_p_value_is_scipys_one_sided_t_test():
    x = np.array([0.12, 0.09, 0.15, 0.11])
    se = stats.sem(x)
    tests = margin_p_values(x.mean(), se, 3, expect="increase", minimum=0.05)
    assert tests.supported == pytest.approx(
        stats.ttest_1samp(x, 0.05, alternative="greater").pvalue
    )
    # the test of the claimed size the other way: H0 effect >= 0.2 rejected by the smaller mean
    short = margin_p_values(x.mean(), se, 3, expect="increase", minimum=0.05, claimed=0.2)
    assert short.not_borne_out == pytest.approx(
        stats.ttest_1samp(x, 0.2, alternative="less").pvalue
    )


@pytest.mark.parametrize(
    "interval, expect, claimed",
    [
        ((0.06, 0.2), "increase", None),
        ((-0.01, 0.03), "increase", None),
        ((0.01, 0.09), "increase", 0.0),
        ((-0.2, -0.06), "decrease", None),
        ((-0.2, 0.1), "decrease", None),
        ((-0.02, 0.045), "agree", None),
        ((-0.1, 0.1), "agree", None),
        ((0.04, 0.2), "agree", None),
    ],
)
def test_replication_is_the_predictive_probability_of_the_same_verdict(interval, expect, claimed):
    # Monte Carlo of the definition: a replicate's estimate differs by sqrt(2) se T_df and its
    # interval moves with it
    se, df = 0.03, 5
    want = replication(interval, expect=expect, minimum=0.05, se=se, df=df, claimed=claimed)
    shifts = math.sqrt(2) * se * np.random.default_rng(3).standard_t(df, 40_000)
    current = verdict(0.0, interval, expect=expect, minimum=0.05, claimed=claimed)
    same = np.mean(
        [
            verdict(
                0.0,
                (interval[0] + s, interval[1] + s),
                expect=expect,
                minimum=0.05,
                claimed=claimed,
            )
            == current
            for s in shifts
        ]
    )
    assert want == pytest.approx(same, abs=0.01)


def test_replication_of_a_bimodal_seed_set_bootstraps():
    # four seeds shrink tenfold, one does nothing: far from normal; the bootstrap gives the
    # chance that a resample of five seeds is judged the same way
    per_seed = [-2.3, -2.3, -2.31, -2.29, 0.0]
    assert far_from_normal(per_seed)
    assert not far_from_normal([-2.3, -2.1, -2.5, -2.2, -2.4])
    odds = replication_bootstrap(
        per_seed, "supported", expect="decrease", minimum=1.15, confidence=0.95
    )
    # by hand: a resample without the null seed has a tiny spread and is supported; with it,
    # the mean -2.3 + 2.3 k/5 and the t interval decide
    rng = np.random.default_rng(0)
    draws = np.asarray(per_seed)[rng.integers(0, 5, size=(4000, 5))]
    m, s = draws.mean(axis=1), draws.std(axis=1, ddof=1)
    hi = m + stats.t.ppf(0.975, 4) * s / math.sqrt(5)
    assert odds == pytest.approx(float(np.mean(hi <= -1.15)))
    assert 0.3 < odds < 0.7


@pytest.mark.parametrize("design, n, levels", [("one_sample", 6, ()), ("slope", 6, (4, 6))])
def test_sensitivity_is_the_effect_detected_with_80_percent_power(design, n, levels):
    sd, claimed, alpha = 0.1, 0.02, 0.025
    size = sensitivity(design, n, claimed=claimed, sd=sd, alpha=alpha, levels=levels)
    assert size is not None and size > claimed
    # at that true effect the power against the claimed size is 80 %: noncentral t by hand
    if design == "one_sample":
        se, df = sd / math.sqrt(n), n - 1
    else:
        x = np.asarray(levels, dtype=float)
        se, df = sd / math.sqrt(n * ((x - x.mean()) ** 2).sum()), n * x.size - 2
    power = stats.nct.sf(stats.t.ppf(1 - alpha, df), df, (size - claimed) / se)
    assert power == pytest.approx(0.8, abs=1e-6)
    # and it is power()'s margin: a shift of claimed
    assert power_of(design, n, size - claimed, sd, levels) == pytest.approx(0.8, abs=1e-6)
    # an agreement claim: the largest deviation still supported with 80 % power
    dev = equivalence_sensitivity("one_sample", 20, minimum=0.1, sd=0.1)
    assert dev is not None and 0 < dev < 0.1
    se20, t20 = 0.1 / math.sqrt(20), stats.t.ppf(0.975, 19)
    p = stats.t.cdf((0.1 - dev) / se20 - t20, 19) - stats.t.cdf((-0.1 - dev) / se20 + t20, 19)
    assert p == pytest.approx(0.8, abs=1e-6)
    # too few seeds to show agreement at all: None
    assert equivalence_sensitivity("one_sample", 3, minimum=0.1, sd=0.5) is None


def power_of(design, n, margin, sd, levels):
    return power(design, n, margin=margin, sd=sd, levels=levels)


def test_holm_levels_step_down():
    # Holm (1979) on four one-sided p-values at 2.5 %: 0.001 <= 0.025/4, 0.004 <= 0.025/3,
    # 0.02 > 0.025/2 stops; the last is judged at that same level
    levels = holm_levels([0.02, 0.001, 0.3, 0.004], 0.025)
    assert [h.rejected for h in levels] == [False, True, False, True]
    assert [h.rank for h in levels] == [3, 1, 4, 2]
    assert [h.level for h in levels] == pytest.approx([0.0125, 0.025 / 4, 0.0125, 0.025 / 3])
    # adjusted p-values: running max of (K - i + 1) p_(i)
    assert [h.adjusted for h in levels] == pytest.approx([0.04, 0.004, 0.3, 0.012])
    one = holm_levels([0.01], 0.025)[0]
    assert one.level == 0.025 and one.rejected


@pytest.mark.parametrize(
    "interval, expect, reach, want",
    [
        ((0.06, 0.2), "increase", 0.02, True),  # lower end 0.01 above the margin 0.05
        ((0.1, 0.2), "increase", 0.02, False),
        ((-0.3, 0.4), "increase", 0.1, False),  # wide, far from both boundaries
        ((-0.3, -0.04), "increase", 0.02, True),  # upper end near -0.05: could be contradicted
        ((-0.2, -0.06), "decrease", 0.02, True),
        # agreement: supported inside ±0.05 but one end near the edge
        ((-0.02, 0.045), "agree", 0.01, True),
        ((-0.02, 0.02), "agree", 0.01, False),
        # wider than the tolerance: it can never be supported; contradicted needs 0.1 + 0.05
        ((-0.1, 0.1), "agree", 0.14, False),
        ((-0.1, 0.1), "agree", 0.16, True),
    ],
)
def test_borderline_is_a_verdict_change_within_the_prediction_error(interval, expect, reach, want):
    assert borderline(interval, expect=expect, minimum=0.05, reach=reach) is want
    # the brute-force definition: shift the interval across the reach and look
    shifts = np.linspace(-reach, reach, 2001)
    seen = {
        verdict(0.0, (interval[0] + s, interval[1] + s), expect=expect, minimum=0.05)
        for s in shifts
    }
    assert (len(seen) > 1) is want


def test_replicate_error_is_t_sqrt2_se():
    assert replicate_error(0.1, 4) == pytest.approx(stats.t.ppf(0.975, 4) * math.sqrt(2) * 0.1)
    assert replicate_error(0.1, math.inf) == pytest.approx(1.959963984540054 * math.sqrt(2) * 0.1)


def test_power_of_the_paired_design_matches_simulation():
    # 80 % power by the noncentral t: a simulated one-sided t test rejects about that often
    margin, sd, alpha = 0.05, 0.06, 0.025
    n = seeds_needed("one_sample", margin=margin, sd=sd, alpha=alpha)
    assert n is not None
    assert power("one_sample", n, margin=margin, sd=sd, alpha=alpha) >= 0.8
    assert power("one_sample", n - 1, margin=margin, sd=sd, alpha=alpha) < 0.8
    rng = np.random.default_rng(11)
    x = rng.normal(margin, sd, size=(20000, n))
    t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / math.sqrt(n))
    simulated = float((t > stats.t.ppf(1 - alpha, n - 1)).mean())
    assert simulated == pytest.approx(
        power("one_sample", n, margin=margin, sd=sd, alpha=alpha), abs=0.01
    )


@pytest.mark.slow
def test_power_of_the_slope_design_matches_simulation():
    levels, margin, sd, alpha = (4.0, 5.0, 6.0), 0.03, 0.05, 0.025
    n = 4
    rng = np.random.default_rng(12)
    xs = np.repeat(levels, n)
    hits = 0
    reps = 4000
    for _ in range(reps):
        fit = stats.linregress(xs, margin * xs + rng.normal(0, sd, xs.size))
        hits += fit.slope / fit.stderr > stats.t.ppf(1 - alpha, xs.size - 2)
    want = power("slope", n, margin=margin, sd=sd, alpha=alpha, levels=levels)
    assert hits / reps == pytest.approx(want, abs=0.025)
    assert seeds_needed("slope", margin=margin, sd=0.0, levels=levels) == 1
    assert seeds_needed("one_sample", margin=0.05, sd=1e6) is None  # beyond the cap


def test_welch_pieces_are_scipys():
    y, x = [0.5, 0.7, 0.65, 0.4], [0.2, 0.25, 0.3]
    se, df = welch_se_df(y, x)
    ci = stats.ttest_ind(y, x, equal_var=False).confidence_interval(0.95)
    lo, hi = interval_at(float(np.mean(y) - np.mean(x)), se, df)
    assert (lo, hi) == pytest.approx((ci.low, ci.high))


def test_z_value():
    assert z_value() == pytest.approx(1.959963984540054)
    assert z_value(0.9) == pytest.approx(1.6448536269514722)


# ---- the two-segment (hinge) fit --------------------------------------------------------------


def _brute_hinge(x, y, groups, ks):
    """RSS of the offsets-plus-hinge model (b >= 0) at every break in ``ks``, by lstsq."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    codes = np.unique(np.asarray(groups), return_inverse=True)[1]
    g = (codes[:, None] == np.arange(codes.max() + 1)[None, :]).astype(float)
    flat = np.linalg.lstsq(g, y, rcond=None)[1]
    flat_rss = (
        float(flat[0])
        if flat.size
        else float(np.sum((y - g @ np.linalg.lstsq(g, y, rcond=None)[0]) ** 2))
    )
    out = []
    for k in ks:
        h = np.maximum(0.0, x - k)
        if not np.any(h > 0):
            out.append(flat_rss)
            continue
        design = np.column_stack([g, h])
        coef = np.linalg.lstsq(design, y, rcond=None)[0]
        rss = float(np.sum((y - design @ coef) ** 2))
        out.append(rss if coef[-1] > 0 else flat_rss)
    return np.asarray(out)


def test_hinge_fit_recovers_an_exact_break_slope_and_offsets():
    # noise-free: y = a_seed + 2 max(0, x - 0.27), the break between two levels
    from cl_diag.report.claims.inference import hinge_fit, hinge_interval

    x = np.tile([0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.5, 1.0], 3)
    seeds = np.repeat([1, 2, 3], 8)
    y = np.array([0.1, 0.12, 0.09])[seeds - 1] + 2.0 * np.maximum(0.0, x - 0.27)
    fit = hinge_fit(x, y, seeds)
    assert fit.break_ == pytest.approx(0.27, abs=1e-12)
    assert fit.slope == pytest.approx(2.0, abs=1e-12)
    assert fit.rss == pytest.approx(0.0, abs=1e-20)
    assert fit.df == 24 - 3 - 2
    assert hinge_interval(fit) == pytest.approx((0.27, 0.27), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_hinge_fit_is_the_minimum_of_a_brute_force_grid(seed):
    from cl_diag.report.claims.inference import hinge_fit

    rng = np.random.default_rng(seed)
    levels = np.array([0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.5, 1.0])
    x = np.tile(levels, 3)
    groups = np.repeat(["a", "b", "c"], levels.size)
    break_ = rng.uniform(0.05, 0.6)
    y = rng.normal(0, 0.02, 3)[np.repeat([0, 1, 2], levels.size)]
    y = y + 0.8 * np.maximum(0.0, x - break_) + rng.normal(0, 0.03, x.size)
    fit = hinge_fit(x, y, groups)
    ks = np.linspace(0.0, 1.0, 20_001)
    grid = _brute_hinge(x, y, groups, ks)
    # the exact optimum is never worse than any grid point, and the grid's best comes within
    # its step of it
    assert fit.rss <= grid.min() + 1e-12
    assert abs(ks[int(np.argmin(grid))] - fit.break_) <= 1e-4
    assert fit.profile(fit.break_) == pytest.approx(fit.rss, abs=1e-12)


def test_hinge_interval_is_the_level_set_of_the_profile():
    # RSS(k) <= RSS_min (1 + F_{0.95}(1, df) / df) exactly inside, equal at the ends
    from cl_diag.report.claims.inference import hinge_fit, hinge_interval

    rng = np.random.default_rng(11)
    levels = np.array([0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.5, 1.0])
    x = np.tile(levels, 3)
    groups = np.repeat([1, 2, 3], levels.size)
    y = 0.5 * np.maximum(0.0, x - 0.3) + rng.normal(0, 0.02, x.size)
    fit = hinge_fit(x, y, groups)
    lo, hi = hinge_interval(fit, 0.95)
    cut = fit.rss * (1 + stats.f.ppf(0.95, 1, fit.df) / fit.df)
    assert lo < fit.break_ < hi
    assert fit.profile(lo) == pytest.approx(cut, rel=1e-8)
    assert fit.profile(hi) == pytest.approx(cut, rel=1e-8)
    ks = np.linspace(0, 1, 2001)
    profile = _brute_hinge(x, y, groups, ks)
    inside = ks[profile <= cut]
    assert inside.min() >= lo - 1e-3 and inside.max() <= hi + 1e-3
    # a wider confidence gives a wider interval
    lo99, hi99 = hinge_interval(fit, 0.99)
    assert lo99 <= lo and hi <= hi99


def test_hinge_fit_of_the_ssem_curve_breaks_near_alpha_c():
    # the SSEM's exact 1 - beta* at the reference study's alphas (m = n = 10, p = 2,
    # tau = 0.3, alpha_c = 0.2508): the fit's break lies 0.012 above alpha_c, a quarter of the
    # alpha_threshold claim's margin (0.05) -- the fit's bias on the curve it is used on
    from cl_diag.measurement.ssem import ssem_optimum
    from cl_diag.report.claims.inference import hinge_fit

    alphas = [0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.5, 1.0]
    y = [ssem_optimum(a, 0.3, 10, 10, 2).within_class_variance for a in alphas]
    fit = hinge_fit(alphas, y)
    alpha_c = ssem_optimum(0.0, 0.3, 10, 10, 2).alpha_c
    assert fit.break_ - alpha_c == pytest.approx(0.0117, abs=5e-4)


def test_hinge_fit_rejects_too_few_levels_and_a_falling_curve_fits_flat():
    from cl_diag.report.claims.inference import hinge_fit

    with pytest.raises(ValueError, match="3 distinct x"):
        hinge_fit([0.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0])
    # b >= 0: a falling line is fitted flat (the break at the last level, slope 0)
    x = [0.0, 0.25, 0.5, 0.75, 1.0]
    fit = hinge_fit(x, [1.0, 0.75, 0.5, 0.25, 0.0])
    assert fit.slope == 0.0 and fit.rss == pytest.approx(fit.rss_flat)


def test_spread_exceeds_is_the_one_sided_f_test():
    from scipy import stats as sp

    from cl_diag.report.claims.inference import spread_exceeds

    # F = 4 with (2, 20) df: sf 0.0346 < 0.05; F = 3: sf 0.0724
    assert sp.f.sf(4.0, 2, 20) < 0.05 < sp.f.sf(3.0, 2, 20)
    assert spread_exceeds(4.0, 2, 1.0, 20) and not spread_exceeds(3.0, 2, 1.0, 20)
    assert not spread_exceeds(0.5, 10, 1.0, 10)  # smaller: never exceeds
    assert spread_exceeds(1e-9, 2, 0.0, 5) and not spread_exceeds(0.0, 2, 0.0, 5)
