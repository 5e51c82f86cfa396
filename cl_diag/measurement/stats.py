"""Uncertainty for the reports' findings: the intervals and tests behind every claimed
difference (pure numpy / scipy; nothing here reads a result).

- :func:`wilson_interval`: the Wilson (1927) score interval of a proportion, e.g. a probe's
  accuracy on a test split of n images.
- :func:`newcombe_interval`: Newcombe's (1998, method 10) hybrid score interval of the
  difference of two proportions measured on n1 and n2 items.
- :func:`summarize`: mean, sample standard deviation (ddof 1), n and the Student-t
  interval of the mean of replicate values (e.g. one value per training seed);
  :func:`mean_sd` and :func:`t_half_width`, the parts the comparison's over-seed tables print.
- :func:`welch_interval`: Welch's interval of the difference of two means (unequal
  variances), for two conditions whose replicates cannot be paired.
- :func:`pair_mean_se`, :func:`pair_var_se`: conservative standard errors of a mean (and
  a variance) taken over all pairs of n sampled instances, from Hoeffding's variance of a
  U-statistic: for a symmetric kernel h of degree 2,
  Var(U) = 4(n-2)/(n(n-1)) zeta_1 + 2/(n(n-1)) zeta_2 with zeta_1 <= zeta_2 / 2, so
  Var(U) <= 2 Var(h) / n. The n(n-1) ordered cross-view pairs (u_i, v_j) average the
  symmetric kernel (u_i.v_j + u_j.v_i)/2, whose variance is at most that of one pair.
- :func:`trend`: the least-squares slope of y on x with its Student-t interval and a
  permutation test of "no trend" (:func:`scipy.stats.permutation_test`, pairings).
- :func:`verdict`: the rule that turns an effect, its interval and a minimum relevant
  effect into *supported*, *contradicted* or *inconclusive*.
- :func:`agreement`, :func:`welch_df`, :func:`holm`: whether two estimates of one quantity
  (an original and its reproduction) agree within their replicate prediction interval
  |e1 - e2| <= t sqrt(se1^2 + se2^2), with the Welch-Satterthwaite degrees of freedom, and
  Holm's step-down correction over the many quantities a reproduction compares.

Every random draw takes a fixed seed, so a report rendered twice has the same bytes.

Example::

    >>> from cl_diag.measurement.stats import wilson_interval, verdict
    >>> lo, hi = wilson_interval(443, 450)          # 98.4 % of 450 test images
    >>> round(lo, 4), round(hi, 4)
    (0.9682, 0.9924)
    >>> verdict(-0.6, (-0.7, -0.5), expect="decrease", minimum=0.05)
    'supported'
    >>> verdict(-0.01, (-0.02, -0.005), expect="decrease", minimum=0.05)  # consistent, tiny
    'inconclusive'
    >>> verdict(0.09, (0.06, 0.12), expect="equivalent", minimum=0.05)  # disagrees beyond 0.05
    'contradicted'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "CONFIDENCE",
    "EXPECTATIONS",
    "VERDICTS",
    "Agreement",
    "Summary",
    "Trend",
    "agreement",
    "holm",
    "mean_sd",
    "newcombe_interval",
    "pair_mean_se",
    "pair_var_se",
    "summarize",
    "t_half_width",
    "trend",
    "verdict",
    "welch_df",
    "welch_interval",
    "wilson_interval",
    "z_value",
]

#: the confidence level of every interval the reports print
CONFIDENCE = 0.95
#: the three verdicts a finding can have
VERDICTS = ("supported", "contradicted", "inconclusive")
#: what a claim expects of its effect (see :func:`verdict`)
EXPECTATIONS = ("increase", "decrease", "not_below", "within", "equivalent")
#: permutations of the trend test: enough for a p-value to +-0.005 near 0.05
PERMUTATIONS = 9999


def z_value(confidence: float = CONFIDENCE) -> float:
    """The two-sided standard-normal quantile: 1.96 for 95 %."""
    return float(stats.norm.ppf(0.5 + confidence / 2))


def wilson_interval(
    successes: float, n: float, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Wilson score interval of a proportion p = successes / n:

        (p + z^2/(2n) +- z sqrt(p(1-p)/n + z^2/(4n^2))) / (1 + z^2/n).

    ``n`` may be an effective sample size (not an integer): the interval is the closed form,
    as :meth:`scipy.stats.binomtest(...).proportion_ci(method="wilson")` computes for integers.
    """
    if not n > 0:
        raise ValueError(f"n must be > 0, got {n!r}")
    p = min(1.0, max(0.0, successes / n))
    z = z_value(confidence)
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - half) / scale), min(1.0, (centre + half) / scale)


def newcombe_interval(
    p1: float, n1: float, p2: float, n2: float, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Interval of p2 - p1 from the two Wilson intervals (Newcombe 1998, method 10):

        [d - sqrt((p2 - l2)^2 + (u1 - p1)^2),  d + sqrt((u2 - p2)^2 + (p1 - l1)^2)],  d = p2 - p1.

    It treats the proportions as independent; for two probes scored on the same test images
    (positively correlated) it is conservative."""
    l1, u1 = wilson_interval(p1 * n1, n1, confidence)
    l2, u2 = wilson_interval(p2 * n2, n2, confidence)
    d = p2 - p1
    return d - math.hypot(p2 - l2, u1 - p1), d + math.hypot(u2 - p2, p1 - l1)


@dataclass(frozen=True)
class Summary:
    """Replicates of one quantity: mean, sample sd (ddof 1), n and the t interval of the mean
    (None when n < 2: one value has no spread)."""

    mean: float
    sd: float | None
    n: int
    interval: tuple[float, float] | None


def summarize(values: Sequence[float], confidence: float = CONFIDENCE) -> Summary:
    """Mean, sample standard deviation (ddof 1), n and the Student-t interval
    mean +- t_{n-1} sd / sqrt(n) of replicate values (e.g. one per training seed)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError("summarize needs at least one finite value")
    mean = float(x.mean())
    if x.size < 2:
        return Summary(mean, None, int(x.size), None)
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1)) * sd / math.sqrt(x.size)
    return Summary(mean, sd, int(x.size), (mean - half, mean + half))


def mean_sd(values: np.ndarray) -> tuple[float, float] | None:
    """(mean, sample sd with ddof 1) of one quantity over replicates; None with fewer than two
    or when any is missing (NaN): a mean over a subset would pass for the whole group's."""
    if len(values) < 2 or bool(np.isnan(values).any()):
        return None
    return float(values.mean()), float(values.std(ddof=1))


def t_half_width(sd: float, n: int, confidence: float = CONFIDENCE) -> float:
    """Half the Student-t interval of a mean of n replicates with sample sd ``sd``:
    t_{n-1} sd / sqrt(n)."""
    return float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)


def welch_interval(
    y: Sequence[float] | np.ndarray, x: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Welch's interval of mean(y) - mean(x) (unequal variances, Welch-Satterthwaite degrees
    of freedom; :func:`scipy.stats.ttest_ind` with ``equal_var=False``). Two or more values
    each."""
    ci = stats.ttest_ind(
        np.asarray(y, dtype=np.float64), np.asarray(x, dtype=np.float64), equal_var=False
    ).confidence_interval(confidence)
    return float(ci.low), float(ci.high)


def pair_mean_se(var: float, n: int) -> float:
    """Conservative standard error of a mean over all pairs of n sampled instances (a
    U-statistic): sqrt(2 Var(pair) / n) (Hoeffding; see the module docstring)."""
    if n < 2:
        return math.inf
    return math.sqrt(2.0 * max(0.0, var) / n)


def pair_var_se(mean: float, var: float, largest: float, n: int) -> float:
    """Conservative standard error of the variance of similarities s over all pairs of n
    sampled instances. var = E[s^2] - E[s]^2; E[s^2] is a U-statistic of the kernel s^2,
    whose variance is at most E[s^4] <= largest^2 E[s^2] (|s| <= largest), so
    SE(E[s^2]) <= sqrt(2 largest^2 E[s^2] / n), and by the delta method
    SE(var) <= SE(E[s^2]) + 2 |E[s]| SE(E[s])."""
    if n < 2:
        return math.inf
    second = max(0.0, var) + mean * mean
    se_second = math.sqrt(2.0 * largest * largest * second / n)
    return se_second + 2.0 * abs(mean) * pair_mean_se(var, n)


@dataclass(frozen=True)
class Trend:
    """The least-squares slope of y on x, its Student-t interval (df = points - 2) and the
    two-sided permutation p-value of "y does not depend on x"."""

    slope: float
    interval: tuple[float, float] | None
    p_value: float | None
    points: int
    levels: int


def _slope(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Least-squares slope of b on a along ``axis`` (vectorised over resamples)."""
    a = a - a.mean(axis=axis, keepdims=True)
    b = b - b.mean(axis=axis, keepdims=True)
    return (a * b).sum(axis=axis) / (a * a).sum(axis=axis)


def trend(x: Sequence[float], y: Sequence[float], confidence: float = CONFIDENCE) -> Trend:
    """Slope of y on x over every replicate (e.g. ln variance on log2 batch size, one point per
    run, seeds included), with

    * the interval slope +- t_{N-2} SE from :func:`scipy.stats.linregress` (N points, at
      least three, at least two distinct x), and
    * the permutation p-value: y re-paired with x at random (:data:`PERMUTATIONS` times, a
      fixed seed) and the share of |slope| at least the observed one.

    With fewer than three points or one distinct x there is no interval (and no p-value)."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError("x and y must be 1-d and of the same length")
    levels = int(np.unique(xs).size)
    if xs.size < 2 or levels < 2:
        return Trend(math.nan, None, None, int(xs.size), levels)
    fit = stats.linregress(xs, ys)
    slope = float(fit.slope)
    if xs.size < 3:
        return Trend(slope, None, None, int(xs.size), levels)
    half = float(stats.t.ppf(0.5 + confidence / 2, xs.size - 2)) * float(fit.stderr)
    result = stats.permutation_test(
        (xs, ys),
        _slope,
        vectorized=True,
        permutation_type="pairings",
        n_resamples=PERMUTATIONS,
        alternative="two-sided",
        random_state=np.random.default_rng(0),
    )
    return Trend(slope, (slope - half, slope + half), float(result.pvalue), int(xs.size), levels)


def verdict(
    effect: float | None,
    interval: tuple[float, float] | None,
    *,
    expect: str,
    minimum: float,
) -> str:
    """*supported*, *contradicted* or *inconclusive* for a measured ``effect`` with its
    ``interval`` and the claim's ``minimum`` relevant effect (same units, >= 0).

    * ``"increase"`` / ``"decrease"``: supported when the interval lies entirely on the
      expected side of 0 and |effect| >= minimum; contradicted when it lies entirely on the
      other side and |effect| >= minimum; otherwise inconclusive -- the interval crosses 0,
      or the difference is consistent but smaller than the minimum relevant size.
    * ``"not_below"`` (no relevant loss, e.g. no alignment cost; or a bound that must hold,
      effect = its slack): supported when the interval excludes a drop of ``minimum`` (lower
      end > -minimum); contradicted when the interval lies below 0 and effect <= -minimum.
    * ``"within"`` (effect = relative distance outside a predicted band, 0 inside):
      supported when the interval is [0, 0] (entirely inside); contradicted when the interval
      excludes 0 and |effect| >= minimum.
    * ``"equivalent"`` (effect = measured - predicted; the claim is that they agree within
      ``minimum``): supported when the interval lies inside [-minimum, minimum] (an
      equivalence test, as two one-sided tests at the 2.5 % level each); contradicted when it
      lies entirely outside it, on one side (|measured - predicted| > minimum beyond error).

    No interval (a single run where replicates are needed) is always inconclusive.
    """
    if expect not in EXPECTATIONS:
        raise ValueError(f"expect must be one of {EXPECTATIONS}, got {expect!r}")
    if effect is None or interval is None or not all(map(math.isfinite, (effect, *interval))):
        return "inconclusive"
    lo, hi = interval
    relevant = abs(effect) >= minimum
    if expect in ("increase", "decrease"):
        sign = 1.0 if expect == "increase" else -1.0
        if relevant and sign * lo > 0 and sign * hi > 0:
            return "supported"
        if relevant and sign * lo < 0 and sign * hi < 0:
            return "contradicted"
        return "inconclusive"
    if expect == "not_below":
        if lo > -minimum:
            return "supported"
        if hi < 0 and effect <= -minimum:
            return "contradicted"
        return "inconclusive"
    if expect == "equivalent":
        if -minimum <= lo and hi <= minimum:
            return "supported"
        if lo > minimum or hi < -minimum:
            return "contradicted"
        return "inconclusive"
    # within a band
    if lo == 0.0 and hi == 0.0:
        return "supported"
    if relevant and (lo > 0 or hi < 0):
        return "contradicted"
    return "inconclusive"


# ---- agreement of an original and its reproduction ---------------------------------------------


def welch_df(se1: float, df1: float, se2: float, df2: float) -> float:
    """Welch-Satterthwaite degrees of freedom of se1^2 + se2^2, where se_i^2 is an estimate
    with df_i degrees of freedom (inf: known, e.g. a normal-approximation sampling error):

        df = (se1^2 + se2^2)^2 / (se1^4 / df1 + se2^4 / df2).
    """
    a, b = se1 * se1, se2 * se2
    if a + b == 0:
        return math.inf
    denominator = (a * a / df1 if math.isfinite(df1) else 0.0) + (
        b * b / df2 if math.isfinite(df2) else 0.0
    )
    return math.inf if denominator == 0 else (a + b) ** 2 / denominator


@dataclass(frozen=True)
class Agreement:
    """|e1 - e2| against its standard error ``se`` = sqrt(se1^2 + se2^2) with ``df`` degrees
    of freedom: the half-width ``tolerance`` of the 95 % replicate prediction interval
    t_{0.975, df} se, and the two-sided ``p_value`` of "both estimate the same quantity"."""

    difference: float
    se: float
    df: float
    tolerance: float
    p_value: float

    @property
    def within(self) -> bool:
        """Inside the (unadjusted) 95 % prediction interval."""
        return abs(self.difference) <= self.tolerance


def agreement(
    e1: float, e2: float, se: float, df: float = math.inf, confidence: float = CONFIDENCE
) -> Agreement:
    """Whether two estimates of one quantity agree: the prediction interval
    |e1 - e2| <= t_{(1+confidence)/2, df} se (t from the normal distribution for df = inf) and
    the p-value 2 P(T_df > |e1 - e2| / se). ``se`` = sqrt(s1^2/n1 + s2^2/n2) for two means of
    n1 and n2 replicates with sample sds s1, s2; sqrt(2) s for one new replicate against one
    old; 0 makes any difference significant (p = 0) and equality p = 1."""
    difference = float(e2 - e1)
    q = (
        z_value(confidence)
        if not math.isfinite(df)
        else float(stats.t.ppf(0.5 + confidence / 2, df))
    )
    if se <= 0:
        p = 1.0 if difference == 0 else 0.0
        return Agreement(difference, 0.0, df, 0.0, p)
    t = abs(difference) / se
    p = float(2 * (stats.norm.sf(t) if not math.isfinite(df) else stats.t.sf(t, df)))
    return Agreement(difference, float(se), float(df), q * se, p)


def holm(p_values: Sequence[float], alpha: float = 1 - CONFIDENCE) -> list[bool]:
    """Holm's (1979) step-down rejections at family-wise level ``alpha``: sort the m p-values,
    reject the i-th smallest (i = 1..m) while p_(i) <= alpha / (m - i + 1), stop at the first
    that is not. Returns, in the given order, whether each is rejected."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    m = len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (m - rank):
            break
        rejected[i] = True
    return rejected
