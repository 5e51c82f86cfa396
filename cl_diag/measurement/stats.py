"""Uncertainty of the numbers the reports print: intervals and standard errors (pure numpy /
scipy; nothing here reads a result). The claims' verdicts, power and replication are made
from these in :mod:`cl_diag.report.claims.inference`.

Proportions get Wilson's (1927) score interval (:func:`wilson_interval`), their differences
Newcombe's (1998, method 10) hybrid (:func:`newcombe_interval`), a share of k in n the exact
Clopper-Pearson interval (:func:`share_interval`); replicate values the Student-t interval
(:func:`summarize`) and two unpaired conditions Welch's (:func:`welch_interval`). A mean or
variance over all pairs of n sampled instances gets a conservative standard error from
Hoeffding's variance of a U-statistic (:func:`pair_mean_se`, :func:`pair_var_se`): for a
degree-2 kernel h, Var(U) = 4(n-2)/(n(n-1)) zeta_1 + 2/(n(n-1)) zeta_2 with zeta_1 <=
zeta_2 / 2, so Var(U) <= 2 Var(h) / n. A statistic counted on a grid (an accuracy on N
images moves in steps of 1/N) has at least the spread of its rounding, :func:`rounding_sd` =
step/sqrt(12), the floor of a replicate spread.

Example::

    >>> from cl_diag.measurement.stats import wilson_interval
    >>> lo, hi = wilson_interval(443, 450)          # 98.4 % of 450 test images
    >>> round(lo, 4), round(hi, 4)
    (0.9682, 0.9924)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "CONFIDENCE",
    "Summary",
    "mean_sd",
    "newcombe_interval",
    "pair_mean_se",
    "pair_var_se",
    "rounding_sd",
    "share_interval",
    "summarize",
    "t_half_width",
    "t_quantile",
    "welch_df",
    "welch_interval",
    "welch_se_df",
    "wilson_interval",
    "z_value",
]

#: the confidence level of every interval the reports print
CONFIDENCE = 0.95


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
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


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


def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """The two-sided quantile t_{(1 + confidence)/2, df}; the normal one for df = inf."""
    if not math.isfinite(df):
        return z_value(confidence)
    return float(stats.t.ppf(0.5 + confidence / 2, df))


def share_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Clopper-Pearson interval of a share k/n at ``confidence`` (two-sided, exact: the
    beta quantiles B(a/2; k, n-k+1) and B(1-a/2; k+1, n-k), 0 and 1 at the ends), the
    interval :meth:`scipy.stats.binomtest(k, n).proportion_ci` gives."""
    if not (0 <= k <= n and n >= 1):
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k!r}, n={n!r}")
    a = 1.0 - confidence
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def welch_se_df(
    y: Sequence[float] | np.ndarray, x: Sequence[float] | np.ndarray
) -> tuple[float, float]:
    """Standard error sqrt(s_y^2/n_y + s_x^2/n_x) of mean(y) - mean(x) and its
    Welch-Satterthwaite degrees of freedom (two or more values each); the pieces of
    :func:`welch_interval`."""
    a, b = np.asarray(y, dtype=np.float64), np.asarray(x, dtype=np.float64)
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    se = math.sqrt(va + vb)
    if va + vb == 0:
        return 0.0, float(a.size + b.size - 2)
    return se, welch_df(math.sqrt(va), a.size - 1, math.sqrt(vb), b.size - 1)


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


def rounding_sd(step: float) -> float:
    """step / sqrt(12): the standard deviation of a continuous quantity's rounding to a grid of
    ``step`` (uniform over one step), the smallest spread a statistic counted on that grid can
    show (an accuracy on N images: step 1/N). 0 for a continuous statistic (step 0)."""
    return step / math.sqrt(12.0)
