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
    trend,
    verdict,
    wilson_interval,
    z_value,
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
        (-0.01, (-0.02, -0.005), "decrease", 0.05, "inconclusive"),  # consistent but tiny
        (0.02, (0.01, 0.03), "increase", 0.005, "supported"),
        (0.02, None, "increase", 0.005, "inconclusive"),  # no interval: one run per side
        (-0.005, (-0.008, -0.002), "not_below", 0.01, "supported"),  # no relevant drop
        (-0.1, (-0.13, -0.07), "not_below", 0.01, "contradicted"),
        (-0.02, (-0.05, 0.01), "not_below", 0.01, "inconclusive"),
        (0.0, (0.0, 0.0), "within", 0.05, "supported"),
        (1.5, (1.1, 1.9), "within", 0.05, "contradicted"),
        (0.0, (-0.2, 0.3), "within", 0.05, "inconclusive"),
    ],
)
def test_verdict_rules(effect, interval, expect, minimum, want):
    assert verdict(effect, interval, expect=expect, minimum=minimum) == want


def test_verdict_rejects_unknown_expectations():
    with pytest.raises(ValueError, match="expect must be one of"):
        verdict(1.0, (0.5, 1.5), expect="bigger", minimum=0.1)


def test_z_value():
    assert z_value() == pytest.approx(1.959963984540054)
    assert z_value(0.9) == pytest.approx(1.6448536269514722)
