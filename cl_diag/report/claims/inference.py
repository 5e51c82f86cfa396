"""The inference of the claims (issue 21): verdicts, their multiplicity, replication and power,
the agreement of two estimates, trends and the threshold fit (pure numpy / scipy, on the
estimators of :mod:`cl_diag.measurement.stats`).

A verdict (:func:`verdict`) is made from an effect e (the claim's quantity on its analysis
scale), its standard error se with df degrees of freedom, and the claim's margin m > 0. For
an expected increase with claimed size c (the source's own number, else m): *supported* when
the whole interval lies at or beyond c, *not borne out* when it lies wholly below c,
*contradicted* when it lies at or beyond -m, else *inconclusive*; a decrease mirrors it. For an
expected agreement (e = measured - predicted): *supported* when the interval lies within
[-m, m] (equivalence), *contradicted* when wholly beyond ±m, else inconclusive. The tests behind
them give one-sided p-values (:func:`margin_p_values`) for Holm's step-down over a report's
findings (:func:`holm_levels`); :func:`replication`, :func:`borderline`, :func:`power` and
:func:`sensitivity` say how stable a verdict is and what a design can detect;
:func:`agreement` compares an original and its reproduction; :func:`trend` and
:func:`hinge_fit` fit slopes and thresholds. Every random draw takes a fixed seed, so a report
rendered twice has the same bytes.

Example::

    >>> from cl_diag.report.claims.inference import verdict
    >>> verdict(-0.6, (-0.7, -0.5), expect="decrease", minimum=0.05)
    'supported'
    >>> verdict(-0.01, (-0.02, -0.005), expect="decrease", minimum=0.05)  # wholly short of it
    'not borne out'
    >>> verdict(-0.04, (-0.08, 0.0), expect="decrease", minimum=0.05)  # holds the margin
    'inconclusive'
    >>> verdict(0.09, (0.06, 0.12), expect="agree", minimum=0.05)  # disagrees beyond 0.05
    'contradicted'
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from cl_diag.measurement.stats import CONFIDENCE, t_quantile

__all__ = [
    "BOOTSTRAP",
    "EXPECTATIONS",
    "FRAGILE",
    "MAX_SEEDS",
    "NORMALITY",
    "PERMUTATIONS",
    "POWER",
    "VERDICTS",
    "Agreement",
    "HingeFit",
    "HolmLevel",
    "Trend",
    "VerdictTests",
    "agreement",
    "borderline",
    "equivalence_sensitivity",
    "far_from_normal",
    "hinge_fit",
    "hinge_interval",
    "holm_levels",
    "interval_at",
    "margin_p_values",
    "power",
    "replicate_error",
    "replication",
    "replication_bootstrap",
    "seeds_needed",
    "sensitivity",
    "spread_exceeds",
    "trend",
    "verdict",
]

#: the verdicts of a prediction (an agreement claim has all but *not borne out*)
VERDICTS = ("supported", "not borne out", "contradicted", "inconclusive")


#: what a claim expects of its effect (see :func:`verdict`)
EXPECTATIONS = ("increase", "decrease", "agree")


#: the power a study should have to detect a claim's minimum relevant effect
POWER = 0.8


#: the most seeds :func:`seeds_needed` searches
MAX_SEEDS = 10_000


#: permutations of the trend test: enough for a p-value to +-0.005 near 0.05
PERMUTATIONS = 9999


@dataclass(frozen=True)
class Trend:
    """The least-squares slope of y on x, its standard error ``se`` and Student-t interval
    (df = points - 2), the two-sided permutation p-value of "y does not depend on x", and the
    residual standard deviation ``resid_sd`` (sqrt(SSR / (points - 2)), the spread a power
    calculation for more points takes)."""

    slope: float
    interval: tuple[float, float] | None
    p_value: float | None
    points: int
    levels: int
    se: float | None = None
    resid_sd: float | None = None

    @property
    def df(self) -> int:
        return self.points - 2


def _slope(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Least-squares slope of b on a along ``axis`` (vectorised over resamples)."""
    a = a - a.mean(axis=axis, keepdims=True)
    b = b - b.mean(axis=axis, keepdims=True)
    return (a * b).sum(axis=axis) / (a * a).sum(axis=axis)


def trend(
    x: Sequence[float],
    y: Sequence[float],
    confidence: float = CONFIDENCE,
    *,
    permutations: bool = True,
) -> Trend:
    """Slope of y on x over every replicate (e.g. ln variance on log2 batch size, one point per
    run, seeds included), with

    * its standard error and the interval slope +- t_{N-2} SE from
      :func:`scipy.stats.linregress` (N points, at least three, at least two distinct x), and
    * the permutation p-value (``permutations``): y re-paired with x at random
      (:data:`PERMUTATIONS` times, a fixed seed) and the share of |slope| at least the
      observed one.

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
    se = float(fit.stderr)
    half = float(stats.t.ppf(0.5 + confidence / 2, xs.size - 2)) * se
    resid_sd = se * math.sqrt(float(((xs - xs.mean()) ** 2).sum()))
    p_value = None
    if permutations:
        result = stats.permutation_test(
            (xs, ys),
            _slope,
            vectorized=True,
            permutation_type="pairings",
            n_resamples=PERMUTATIONS,
            alternative="two-sided",
            random_state=np.random.default_rng(0),
        )
        p_value = float(result.pvalue)
    return Trend(slope, (slope - half, slope + half), p_value, int(xs.size), levels, se, resid_sd)


def interval_at(
    effect: float, se: float, df: float, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """effect +- t_{(1 + confidence)/2, df} se."""
    half = t_quantile(df, confidence) * se
    return effect - half, effect + half


def _regions(
    lo: float, hi: float, *, expect: str, minimum: float, claimed: float | None
) -> dict[str, list[tuple[float, float]]]:
    """The shifts s of the interval [lo + s, hi + s] at which each verdict holds, as unions of
    closed spans (the boundaries have measure zero, so open or closed does not matter to a
    probability). With c the claimed size and m the margin, for an expected increase:
    supported on s >= c - lo, contradicted on s <= -m - hi, not borne out between them while
    hi + s < c, inconclusive on the rest (the interval holds c); a decrease mirrors it. For an
    agreement: supported on [-m - lo, m - hi] (empty when the interval is wider than 2m),
    contradicted beyond m - lo or below -m - hi, inconclusive on the rest."""
    m, inf = minimum, math.inf
    if expect == "agree":
        return {
            "supported": [(-m - lo, m - hi)],
            "contradicted": [(m - lo, inf), (-inf, -m - hi)],
            "inconclusive": [(-m - hi, -m - lo), (m - hi, m - lo)],
        }
    c = m if claimed is None else claimed
    if expect == "decrease":  # mirror: the interval of -effect
        lo, hi = -hi, -lo
    spans = {
        "supported": [(c - lo, inf)],
        "contradicted": [(-inf, -m - hi)],
        "not borne out": [(-m - hi, c - hi)],
        "inconclusive": [(c - hi, c - lo)],
    }
    if expect == "decrease":
        spans = {k: [(-b, -a) for a, b in v] for k, v in spans.items()}
    return spans


def _merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-empty spans, overlapping or touching ones joined (a verdict's set as disjoint
    spans, so that a probability over them counts no shift twice)."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(span for span in spans if span[0] <= span[1]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _check_expectation(expect: str, minimum: float, claimed: float | None) -> None:
    if expect not in EXPECTATIONS:
        raise ValueError(f"expect must be one of {EXPECTATIONS}, got {expect!r}")
    if claimed is not None and (expect == "agree" or not claimed > -minimum):
        raise ValueError("a claimed size is for a directional claim and must exceed -minimum")


def verdict(
    effect: float | None,
    interval: tuple[float, float] | None,
    *,
    expect: str,
    minimum: float,
    claimed: float | None = None,
) -> str:
    """The verdict of an ``effect`` with its ``interval``, the claim's ``minimum`` relevant
    effect m >= 0 and, for a directional claim, the size the source claims c (``claimed``,
    default m; c > -m), all on one scale:

    * ``"increase"``: *supported* when the whole interval lies at or above c (beyond the
      claimed size); *contradicted* when it lies at or below -m (on the other side of zero by
      at least the margin); *not borne out* when it lies wholly below c otherwise (the
      one-sided test of "effect >= c" rejects: the data show a smaller effect than the
      source claims, or none); *inconclusive* when it holds c.
    * ``"decrease"``: the mirror image (supported at or below -c, contradicted at or above
      +m, not borne out wholly above -c).
    * ``"agree"`` (effect = measured - predicted; the claim is that they agree within m):
      supported when the interval lies inside [-m, m] (two one-sided tests); contradicted
      when it lies entirely above +m or entirely below -m; otherwise inconclusive.

    No interval (a single run where replicates are needed) is always inconclusive.
    """
    _check_expectation(expect, minimum, claimed)
    if effect is None or interval is None or not all(map(math.isfinite, (effect, *interval))):
        return "inconclusive"
    lo, hi = interval
    m = minimum
    if expect == "agree":
        if -m <= lo and hi <= m:
            return "supported"
        if lo > m or hi < -m:
            return "contradicted"
        return "inconclusive"
    c = m if claimed is None else claimed
    if expect == "decrease":
        lo, hi = -hi, -lo
    if lo >= c:
        return "supported"
    if hi <= -m:
        return "contradicted"
    if hi < c:
        return "not borne out"
    return "inconclusive"


def _sf(x: float, df: float) -> float:
    """P(T_df >= x) (normal for df = inf)."""
    return float(stats.norm.sf(x) if not math.isfinite(df) else stats.t.sf(x, df))


def _cdf(x: float, df: float) -> float:
    """P(T_df <= x) (normal for df = inf), exact at +-inf."""
    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    return float(stats.norm.cdf(x) if not math.isfinite(df) else stats.t.cdf(x, df))


@dataclass(frozen=True)
class VerdictTests:
    """The one-sided p-values of the tests behind the decided verdicts of :func:`verdict`:
    the interval at confidence 1 - 2a is supported (not borne out, contradicted) exactly when
    ``supported`` (``not_borne_out``, ``contradicted``) <= a. ``not_borne_out`` is 1 for an
    agreement (it has three outcomes)."""

    supported: float
    not_borne_out: float
    contradicted: float

    @property
    def deciding(self) -> float:
        """The smallest: the p-value of the test that would decide the verdict (a
        contradiction is also a rejection of the claimed size, so its p is never the
        smallest)."""
        return min(self.supported, self.not_borne_out, self.contradicted)


def margin_p_values(
    effect: float,
    se: float,
    df: float,
    *,
    expect: str,
    minimum: float,
    claimed: float | None = None,
) -> VerdictTests:
    """The one-sided p-values of the tests behind :func:`verdict`'s decided verdicts.

    For an expected increase with claimed size c (default m): *supported* tests
    H0: effect <= c, *not borne out* H0: effect >= c, *contradicted* H0: effect >= -m; a
    decrease mirrors them. For an agreement, *supported* is the larger of the two one-sided
    p-values of H0: effect <= -m and H0: effect >= +m (TOST), *contradicted* the smaller of
    those of H0: effect <= +m and H0: effect >= -m. With se = 0 each p is 0 when its bound
    is cleared and 1 otherwise."""
    _check_expectation(expect, minimum, claimed)
    m = minimum
    c = m if claimed is None else claimed

    def above(bound: float) -> float:  # H0: effect <= bound
        if se <= 0:
            return 0.0 if effect >= bound else 1.0
        return _sf((effect - bound) / se, df)

    def below(bound: float) -> float:  # H0: effect >= bound
        if se <= 0:
            return 0.0 if effect <= bound else 1.0
        return _sf((bound - effect) / se, df)

    if expect == "increase":
        return VerdictTests(above(c), below(c), below(-m))
    if expect == "decrease":
        return VerdictTests(below(-c), above(-c), above(m))
    return VerdictTests(max(above(-m), below(m)), 1.0, min(above(m), below(-m)))


@dataclass(frozen=True)
class HolmLevel:
    """One hypothesis of a Holm family: its ``rank`` (1 = smallest p), the one-sided
    ``level`` a it is judged at (its interval is printed at confidence 1 - 2a), whether it
    is ``rejected`` and its Holm-adjusted p-value."""

    rank: int
    level: float
    rejected: bool
    adjusted: float


def holm_levels(p_values: Sequence[float], alpha: float = (1 - CONFIDENCE) / 2) -> list[HolmLevel]:
    """Holm's (1979) step-down over K one-sided p-values at family-wise level ``alpha``
    (2.5 % one-sided: each verdict's two-sided interval is at 95 % when K = 1).

    The i-th smallest p is judged at a_i = alpha / (K - i + 1) while every smaller one was
    rejected; from the first that is not, every later hypothesis is judged at that first
    level a* (so its interval, printed at 1 - 2a*, does not clear its bound either: the
    printed intervals and the decisions agree). Adjusted p-values:
    max_{j <= i} min(1, (K - j + 1) p_(j)). Returns the levels in the given order."""
    k = len(p_values)
    order = sorted(range(k), key=lambda i: (p_values[i], i))
    out: list[HolmLevel | None] = [None] * k
    stopped: float | None = None
    running = 0.0
    for rank, i in enumerate(order, start=1):
        level = alpha / (k - rank + 1)
        running = max(running, min(1.0, (k - rank + 1) * p_values[i]))
        if stopped is None and p_values[i] > level:
            stopped = level
        judged = level if stopped is None else stopped
        out[i] = HolmLevel(rank, judged, stopped is None, running)
    return [h for h in out if h is not None]


def replicate_error(se: float, df: float, confidence: float = CONFIDENCE) -> float:
    """The replicate prediction error w = t_{(1 + confidence)/2, df} sqrt(2) se: the half-width
    of the range in which the estimate of a new, independent replicate study of the same
    design (same seeds' count, same spread, standard error se) falls about this one with
    probability ``confidence`` (the difference of two such estimates has sd sqrt(2) se)."""
    return t_quantile(df, confidence) * math.sqrt(2.0) * se


def borderline(
    interval: tuple[float, float] | None,
    *,
    expect: str,
    minimum: float,
    reach: float,
    claimed: float | None = None,
) -> bool:
    """Whether moving ``interval`` by some amount within +-``reach`` (the replicate prediction
    error, :func:`replicate_error`) changes :func:`verdict` (the verdicts' sets of shifts are
    :func:`_regions`'). No interval: not borderline (inconclusive whatever a replicate
    gives)."""
    if interval is None or not all(map(math.isfinite, interval)):
        return False
    current = verdict(0.0, interval, expect=expect, minimum=minimum, claimed=claimed)
    spans = _merged(_regions(*interval, expect=expect, minimum=minimum, claimed=claimed)[current])
    return not any(a <= -reach and reach <= b for a, b in spans)


#: below this probability of being repeated by an independent replicate study, a verdict is
#: *fragile*
FRAGILE = 0.8


#: resamples of the bootstrap over seeds (:func:`replication`)
BOOTSTRAP = 4000


#: Shapiro-Wilk's p below which per-seed effects count as far from normal (:func:`replication`)
NORMALITY = 0.05


def replication(
    interval: tuple[float, float] | None,
    *,
    expect: str,
    minimum: float,
    se: float,
    df: float,
    claimed: float | None = None,
) -> float | None:
    """The probability that an independent replicate study of the same design gets the same
    verdict as ``interval``, from the predictive distribution of its estimate: the replicate's
    estimate differs from this one by sqrt(2) se T_df (both have standard error se) and its
    interval is this one moved by that difference, so the probability is that of the shift
    landing in the verdict's set (:func:`_regions`). None without an interval or spread."""
    if interval is None or not all(map(math.isfinite, interval)) or not math.isfinite(se):
        return None
    current = verdict(0.0, interval, expect=expect, minimum=minimum, claimed=claimed)
    spans = _merged(_regions(*interval, expect=expect, minimum=minimum, claimed=claimed)[current])
    spread = math.sqrt(2.0) * se
    if spread <= 0:
        return 1.0
    total = math.fsum(
        max(0.0, _cdf(b / spread, df) - _cdf(a / spread, df)) for a, b in spans if a < b
    )
    return min(1.0, total)


def replication_bootstrap(
    per_seed: Sequence[float],
    current: str,
    *,
    expect: str,
    minimum: float,
    confidence: float,
    claimed: float | None = None,
    resamples: int = BOOTSTRAP,
) -> float:
    """The probability that a replicate study of the same seeds' count gets the verdict
    ``current``, by a bootstrap over seeds: the per-seed effects drawn with replacement
    (``resamples`` times, a fixed seed), each resample's mean and t interval at
    ``confidence`` judged like the original; for per-seed effects far from normal (e.g. two
    modes), where the t predictive distribution of :func:`replication` does not hold."""
    x = np.asarray(per_seed, dtype=np.float64)
    n = x.size
    draws = x[np.random.default_rng(0).integers(0, n, size=(resamples, n))]
    means = draws.mean(axis=1)
    half = t_quantile(n - 1, confidence) * draws.std(axis=1, ddof=1) / math.sqrt(n)
    same = sum(
        verdict(
            float(e), (float(e - h), float(e + h)), expect=expect, minimum=minimum, claimed=claimed
        )
        == current
        for e, h in zip(means, half, strict=True)
    )
    return same / resamples


def far_from_normal(values: Sequence[float]) -> bool:
    """Whether Shapiro-Wilk rejects normality at :data:`NORMALITY` (needs 3 or more distinct
    values; fewer: False)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 3 or np.unique(x).size < 3:
        return False
    return float(stats.shapiro(x).pvalue) < NORMALITY


def _unit_se(design: str, n: int, sd: float, levels: Sequence[float]) -> tuple[float, float]:
    """(standard error of the estimate, its df) of a design with n seeds at replicate spread
    sd (the designs of :func:`power`)."""
    if design == "one_sample":
        return sd / math.sqrt(n), n - 1
    if design == "two_sample":
        return sd * math.sqrt(2.0 / n), 2 * n - 2
    if design == "slope":
        xs = np.asarray(levels, dtype=np.float64)
        sxx = float(((xs - xs.mean()) ** 2).sum())
        return sd / math.sqrt(n * sxx), n * xs.size - 2
    raise ValueError(f"unknown design {design!r}")


def power(
    design: str,
    n: int,
    *,
    margin: float,
    sd: float,
    alpha: float = (1 - CONFIDENCE) / 2,
    levels: Sequence[float] = (),
    agree: bool = False,
) -> float:
    """Power of the one-sided t test at level ``alpha`` of "no effect" against a true effect of
    ``margin`` with replicate spread ``sd``, for ``n`` seeds (scipy's noncentral t):

    * ``"one_sample"`` (one value or one paired difference per seed): df = n - 1,
      noncentrality m sqrt(n) / sd;
    * ``"two_sample"`` (n seeds per condition, unpaired, sd pooled): df = 2n - 2,
      noncentrality m / (sd sqrt(2 / n));
    * ``"slope"`` (n seeds at each of the x ``levels``, sd the residual sd): df = nk - 2,
      noncentrality m sqrt(n Sxx) / sd with Sxx = sum (x_l - mean x)^2 over the k levels.

    power = P(T'_{df, ncp} > t_{1 - alpha, df}). The same number is the power to call a true
    effect of 2m *supported* (interval beyond m). With ``agree`` (an agreement claim whose
    true deviation is 0), 2 power - 1, floored at 0: a lower bound on the power of the two
    one-sided tests together."""
    se, df = _unit_se(design, n, sd, levels)
    ncp = margin / se
    if df < 1:
        return 0.0
    critical = float(stats.t.ppf(1 - alpha, df))
    p = float(stats.nct.sf(critical, df, ncp))
    return max(0.0, 2 * p - 1) if agree else p


def seeds_needed(
    design: str,
    *,
    margin: float,
    sd: float,
    alpha: float = (1 - CONFIDENCE) / 2,
    levels: Sequence[float] = (),
    agree: bool = False,
    target: float = POWER,
) -> int | None:
    """The smallest number of seeds (per condition, or per level of a slope) whose
    :func:`power` reaches ``target`` (80 %) at the observed ``sd``; 2 when sd is 0 (the
    fewest that give a spread), None beyond :data:`MAX_SEEDS`."""
    if not (margin > 0 and math.isfinite(sd) and sd >= 0):
        return None
    low = 2 if design != "slope" or len(levels) < 3 else 1
    if sd == 0:
        return low

    def enough(n: int) -> bool:
        return (
            power(design, n, margin=margin, sd=sd, alpha=alpha, levels=levels, agree=agree)
            >= target
        )

    if not enough(MAX_SEEDS):
        return None
    # power grows with n: bisect between the fewest seeds and the cap
    lo, hi = low, MAX_SEEDS
    if enough(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


def sensitivity(
    design: str,
    n: int,
    *,
    claimed: float,
    sd: float,
    alpha: float = (1 - CONFIDENCE) / 2,
    levels: Sequence[float] = (),
    target: float = POWER,
) -> float | None:
    """The design's sensitivity: the smallest true effect (beyond the claimed size ``claimed``,
    in the expected direction, as a magnitude) that ``n`` seeds call *supported* with power
    ``target`` at replicate spread ``sd``: claimed + ncp* se, where ncp* solves
    P(T'_{df, ncp*} > t_{1 - alpha, df}) = target (scipy's noncentral t) and se, df are the
    design's (:func:`power`). None without a spread or degrees of freedom."""
    if not (math.isfinite(sd) and sd >= 0 and n >= 1):
        return None
    se, df = _unit_se(design, n, sd, levels)
    if df < 1:
        return None
    if se == 0:
        return claimed
    critical = float(stats.t.ppf(1 - alpha, df))
    ncp = optimize.brentq(
        lambda k: float(stats.nct.sf(critical, df, k)) - target, 0.0, critical + 50.0
    )
    return claimed + ncp * se


def equivalence_sensitivity(
    design: str,
    n: int,
    *,
    minimum: float,
    sd: float,
    alpha: float = (1 - CONFIDENCE) / 2,
    levels: Sequence[float] = (),
    target: float = POWER,
) -> float | None:
    """For an agreement claim: the largest true deviation |e| that ``n`` seeds still call
    *supported* (the interval at 1 - 2 alpha inside +-``minimum``) with power ``target`` at
    spread ``sd``, taking the estimate as e + se T_df; None when even exact agreement falls
    short (then more seeds are needed: :func:`seeds_needed`)."""
    if not (math.isfinite(sd) and sd >= 0 and n >= 1):
        return None
    se, df = _unit_se(design, n, sd, levels)
    if df < 1:
        return None
    if se == 0:
        return minimum
    reach = minimum / se - float(stats.t.ppf(1 - alpha, df))

    def supported(e: float) -> float:
        return _cdf(reach - e / se, df) - _cdf(-reach - e / se, df)

    if reach <= 0 or supported(0.0) < target:
        return None
    return float(optimize.brentq(lambda e: supported(e) - target, 0.0, minimum))


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
    |e1 - e2| <= t_{(1+confidence)/2, df} se (:func:`t_quantile`) and the p-value
    2 P(T_df > |e1 - e2| / se). ``se`` = sqrt(s1^2/n1 + s2^2/n2) for two means of n1 and n2
    replicates with sample sds s1, s2; sqrt(2) s for one new replicate against one old (the
    :func:`replicate_error` of s); 0 makes any difference significant (p = 0) and equality
    p = 1."""
    difference = float(e2 - e1)
    if se <= 0:
        p = 1.0 if difference == 0 else 0.0
        return Agreement(difference, 0.0, df, 0.0, p)
    p = 2 * _sf(abs(difference) / se, df)
    return Agreement(difference, float(se), float(df), t_quantile(df, confidence) * se, p)


def spread_exceeds(
    variance: float, df: float, reference: float, reference_df: float, level: float = 0.05
) -> bool:
    """Whether a sample variance is larger than a reference variance beyond chance: the
    one-sided F test of variance / reference at ``level`` (True when the reference is 0 and
    the variance is not). Used to pool a spread over groups unless one group is noisier."""
    if reference <= 0:
        return variance > 0
    return bool(stats.f.sf(variance / reference, df, reference_df) < level)


@dataclass(frozen=True)
class HingeFit:
    """The least-squares fit of y_i = a_{g(i)} + b max(0, x_i - k), b >= 0, k in
    [min x, max x] (flat below the break k, rising linearly above it; one offset a_g per
    replicate group g, e.g. a training seed): the ``break_`` k, the ``slope`` b above it, the
    residual sum of squares ``rss`` at the optimum and ``rss_flat`` of the offsets alone
    (b = 0, no break), ``df`` = points - groups - 2 and the ``profile`` RSS(k) (offsets and
    b >= 0 refitted at each k), whose level set gives :func:`hinge_interval`."""

    break_: float
    slope: float
    rss: float
    rss_flat: float
    df: int
    x: tuple[float, ...]
    y: tuple[float, ...]
    groups: tuple[int, ...]

    @property
    def lo(self) -> float:
        return min(self.x)

    @property
    def hi(self) -> float:
        return max(self.x)

    def profile(self, k: float) -> float:
        """RSS at the break k: the offsets and b >= 0 refitted (b = 0 when the free fit's
        slope is negative: then the flat fit, ``rss_flat``)."""
        return _hinge_rss(
            np.asarray(self.x), np.asarray(self.y), np.asarray(self.groups), float(k)
        )[0]


def _offsets(groups: np.ndarray) -> np.ndarray:
    """The 0/1 indicator columns of the replicate groups (codes 0..G-1)."""
    return (groups[:, None] == np.arange(int(groups.max()) + 1)[None, :]).astype(np.float64)


def _lstsq_rss(design: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    return float(resid @ resid), coef


def _hinge_profile(
    x: np.ndarray, y: np.ndarray, groups: np.ndarray, ks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(RSS, b) of the offsets-plus-hinge fit with b >= 0 at each break in ``ks``, by
    Frisch-Waugh-Lovell: with y~ and h~ = max(0, x - k) centred within each group (the
    offsets partialled out), b = h~.y~ / h~.h~ and RSS = ||y~ - b h~||^2; where b <= 0 (or h is
    0: k at or above max x) the constraint binds and the fit is the offsets' alone."""
    g = _offsets(groups)
    counts = g.sum(axis=0)
    y_c = y - g @ (g.T @ y / counts)
    h = np.maximum(0.0, x[None, :] - ks[:, None])
    h_c = h - (h @ g / counts) @ g.T
    hh = np.einsum("kn,kn->k", h_c, h_c)
    hy = h_c @ y_c
    free = (hh > 1e-30) & (hy > 0)
    b = np.where(free, hy / np.where(free, hh, 1.0), 0.0)
    resid = y_c[None, :] - b[:, None] * h_c
    return np.einsum("kn,kn->k", resid, resid), b


def _hinge_rss(x: np.ndarray, y: np.ndarray, groups: np.ndarray, k: float) -> tuple[float, float]:
    """(RSS, b) of the offsets-plus-hinge fit at one break k with b >= 0."""
    rss, b = _hinge_profile(x, y, groups, np.asarray([k], dtype=np.float64))
    return float(rss[0]), float(b[0])


def hinge_fit(
    x: Sequence[float], y: Sequence[float], groups: Sequence[object] | None = None
) -> HingeFit:
    """The exact least-squares two-segment fit of :class:`HingeFit` (Hudson 1966's method
    for a join between data points): between two adjacent distinct x levels x_j < x_{j+1}
    the hinge is (x_i - k) on the points U = {x_i >= x_{j+1}} and 0 elsewhere, so the model
    is linear in (a, b, c = -b k) with the columns 1_U x and 1_U; its unconstrained fit gives
    the segment's interior optimum k = -c/b when that lies in [x_j, x_{j+1}] with b > 0.
    Over the segment the profile RSS(k) is the squared distance of the fit to a plane turning
    monotonically about the offsets, so its minimum is that interior point or an end: the
    candidates are every level and every segment's interior point, and the least RSS among
    them is the global minimum (ties: the smallest k). Needs at least 3 distinct x and
    points > groups + 2."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError("x and y must be 1-d and of the same length")
    keys = [0] * xs.size if groups is None else list(groups)
    if len(keys) != xs.size:
        raise ValueError("groups must name one group per point")
    order = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    codes = np.asarray([order[k] for k in keys], dtype=np.int64)
    levels = np.unique(xs)
    df = int(xs.size - len(order) - 2)
    if levels.size < 3 or df < 1:
        raise ValueError("a two-segment fit needs 3 distinct x and more points than groups + 2")
    g = _offsets(codes)
    candidates = [float(v) for v in levels]
    for left, right in itertools.pairwise(levels):
        upper = (xs >= right).astype(np.float64)
        _, coef = _lstsq_rss(np.column_stack([g, upper * xs, upper]), ys)
        b, c = float(coef[-2]), float(coef[-1])
        if b > 0 and left < -c / b < right:
            candidates.append(-c / b)
    best_k, best_rss, best_b = math.nan, math.inf, 0.0
    for k in sorted(candidates):
        rss, b = _hinge_rss(xs, ys, codes, k)
        if rss < best_rss - 1e-15 * max(1.0, best_rss if math.isfinite(best_rss) else 1.0):
            best_k, best_rss, best_b = k, rss, b
    flat = _hinge_rss(xs, ys, codes, float(levels[-1]))[0]
    return HingeFit(
        break_=best_k,
        slope=best_b,
        rss=max(best_rss, 0.0),
        rss_flat=flat,
        df=df,
        x=tuple(float(v) for v in xs),
        y=tuple(float(v) for v in ys),
        groups=tuple(int(c) for c in codes),
    )


#: evaluation points of the profile per unit of x range when searching its level set
_PROFILE_GRID = 4000


def hinge_interval(fit: HingeFit, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The profile-likelihood interval of the break (Lerman 1980; Hinkley 1969): every k in
    [min x, max x] whose profile RSS(k) <= RSS_min (1 + F_{confidence}(1, df) / df), the
    likelihood-ratio (F) test of "the break is at k" not rejected at 1 - confidence; the
    hull of that set (it may be several pieces), its ends refined by root finding on a grid
    of the profile. Ends at min x or max x mean the data allow a break there (or beyond)."""
    cut = fit.rss * (1.0 + float(stats.f.ppf(confidence, 1, fit.df)) / fit.df)
    if fit.rss <= 0.0:
        return fit.break_, fit.break_
    ks = np.unique(
        np.concatenate([np.linspace(fit.lo, fit.hi, _PROFILE_GRID + 1), np.asarray(fit.x)])
    )
    xs, ys, codes = np.asarray(fit.x), np.asarray(fit.y), np.asarray(fit.groups)
    inside = _hinge_profile(xs, ys, codes, ks)[0] <= cut
    if not inside.any():  # only a sliver about the optimum, between grid points
        return fit.break_, fit.break_
    first, last = int(np.argmax(inside)), int(inside.size - 1 - np.argmax(inside[::-1]))

    def edge(a: float, b: float) -> float:
        # a outside, b inside the level set: the crossing between them
        return float(optimize.brentq(lambda k: fit.profile(k) - cut, a, b, xtol=1e-12))

    lo = float(ks[first]) if first == 0 else edge(float(ks[first - 1]), float(ks[first]))
    hi = float(ks[last]) if last == ks.size - 1 else edge(float(ks[last + 1]), float(ks[last]))
    return min(lo, fit.break_), max(hi, fit.break_)
