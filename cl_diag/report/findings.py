"""Findings: the claims of Lee, Lim, Lee, Sohn (ICML 2025) that apply to the runs at hand,
each computed from result data with its effect, uncertainty and verdict.

Every report opens with them (issue 12). Nothing here is written by hand: one function per
claim takes the runs' measurements (:class:`RunData`, read from typed results) and returns a
:class:`Finding` -- the claim, the measured effect, its 95 % interval, the number of
replicates behind it, the minimum relevant effect, the verdict and the numbers it used.

Verdicts (:func:`cl_diag.measurement.stats.verdict`): *supported* when the interval lies on
the side the claim expects and the effect is at least the claim's minimum relevant size;
*contradicted* when it lies on the other side with a relevant effect; *inconclusive*
otherwise (the interval crosses zero, or a consistent difference is too small to matter, or
there are too few runs for an interval).

Where the intervals come from:

* **over seeds** -- runs whose configs differ only in ``seed`` are replicates: a quantity's
  mean has the Student-t interval over them; VRN against no VRN is paired by seed (t interval
  of the per-seed differences) when both have the same seeds, else Welch's interval;
* **a trend over batch sizes** -- the least-squares slope over every run (seeds included),
  its t interval and a permutation test (:func:`cl_diag.measurement.stats.trend`); a
  permutation p-value of 0.05 or more makes the verdict inconclusive whatever the interval;
* **one run** -- claims about one embedding use the sampling error of the n analysed images:
  a pair mean's standard error is at most sqrt(2 var / n) (Hoeffding), the excessive ratio's
  interval is Wilson's with n/2 effective pairs (the same bound); a comparison of two
  training configs with one run each has no interval (training noise is unknown);
* **class collapse (SSEM)** -- for ``supcl`` runs whose theory has an ``ssem`` block, the
  measured within-class variance of the loss layer against the SSEM prediction 1 − β*
  (paper-notes 11.3): over seeds as above; for one run, the t interval over its classes'
  within-class variances (the classes as replicates: the reported value is their unweighted
  mean, and each class's value is exact over its analysed images). The claim that the
  variance grows with α is a trend over every run of a series, as for the batch size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from cl_diag.measurement.collapse import COLLAPSE_EPSILON
from cl_diag.measurement.stats import (
    newcombe_interval,
    pair_mean_se,
    pair_var_se,
    summarize,
    trend,
    verdict,
    welch_interval,
    wilson_interval,
    z_value,
)
from cl_diag.report.document import MISSING, Heading, Paragraph, Table, fmt
from cl_diag.report.runs import SEED_KEY, loss_layer, replicate_key
from cl_diag.result import EMBEDDING_SOURCES, Collapse, Result, Ssem
from cl_diag.runconfig import RunConfig
from cl_diag.vocabulary import PairType

__all__ = [
    "CLAIMS",
    "SEED_KEY",
    "Claim",
    "Finding",
    "RunData",
    "alpha_variance",
    "batch_accuracy",
    "batch_variance",
    "ceiling",
    "excessive_separation",
    "findings_blocks",
    "not_applicable",
    "run_findings",
    "ssem_collapse",
    "ssem_variance",
    "summary_lines",
    "variance_band",
    "vrn_accuracy",
    "vrn_alignment",
    "vrn_mean_shift",
    "vrn_variance",
]

#: a trend whose permutation p-value is at least this is not called a trend
TREND_ALPHA = 0.05


@dataclass(frozen=True)
class Claim:
    """One claim of the paper: what it says, where, what it expects of the effect and the
    smallest effect that counts (in ``unit``)."""

    key: str
    title: str
    source: str
    effect: str  # what the effect measures, in words
    expect: str  # see cl_diag.measurement.stats.verdict
    # "relative", "similarity", "pp" (fractions printed in percentage points), "variance"
    # (a within-class variance), "variance/α" (its slope per unit α)
    unit: str
    minimum: float
    #: what the claim is about: "any" normalised embedding (a theorem's inequality), or
    #: "trained" encoders of the kind the source measured (an empirical figure such as the
    #: rebuttal's SimCLR on CIFAR-100), so never tested on embeddings of unknown origin
    scope: str = "any"


CLAIMS: dict[str, Claim] = {
    c.key: c
    for c in (
        Claim(
            "vrn_variance",
            "VRN lowers the variance of negative similarities",
            "paper Table 1; Def. 5.7",
            "variance with VRN / without − 1",
            "decrease",
            "relative",
            0.05,
        ),
        Claim(
            "vrn_mean_shift",
            "VRN moves the mean negative similarity toward δ = −1/(n−1)",
            "Def. 5.7: VRN penalises (s − δ)², mean and spread",
            "change of |mean − δ| (VRN − none)",
            "decrease",
            "similarity",
            0.01,
        ),
        Claim(
            "vrn_alignment",
            "VRN costs no alignment (positive mean)",
            "Thm 5.2: negatives at δ leave the ceiling at 1",
            "positive mean, VRN − none",
            "not_below",
            "similarity",
            0.01,
        ),
        Claim(
            "vrn_accuracy",
            "VRN raises linear-probe accuracy",
            "paper Tables 4–5, Fig. 4",
            "linear top-1, VRN − none",
            "increase",
            "pp",
            0.005,
        ),
        Claim(
            "batch_variance",
            "Smaller batches give a larger negative-similarity variance",
            "Thm 5.5 (Eq. 11); paper Table 1",
            "change of the variance per doubling of m",
            "decrease",
            "relative",
            0.05,
        ),
        Claim(
            "batch_accuracy",
            "Larger batches give a higher linear-probe accuracy",
            "paper Fig. 4; rebuttal",
            "linear top-1 per doubling of m",
            "increase",
            "pp",
            0.005,
        ),
        Claim(
            "variance_band",
            "Without VRN the variance lies in the Theorem 5.5 band",
            "Thm 5.5, Eq. 11: fixed mini-batches at their optimum",
            "relative distance of the variance outside the band",
            "within",
            "relative",
            0.05,
        ),
        Claim(
            "ceiling",
            "The positive mean stays below the Theorem 5.2 ceiling",
            "Thm 5.2, Eq. 7: E[s_pos] ≤ 1 + E[s_neg] + 1/(n−1)",
            "ceiling − positive mean",
            "not_below",
            "similarity",
            0.01,
        ),
        Claim(
            "excessive",
            "Most negatives are excessively separated (below δ)",
            "rebuttal: over 57 % for SimCLR on CIFAR-100",
            "share of cross-view negatives below δ, minus one half",
            "increase",
            "pp",
            0.05,
            scope="trained",
        ),
        Claim(
            "ssem_collapse",
            "Below α_c the classes collapse (within-class variance ≈ 0)",
            "SSEM, paper-notes 11.3: β* = 1 for α ≤ α_c",
            "measured within-class variance − predicted 1 − β* = 0",
            "equivalent",
            "variance",
            # "≈ 0" is what the collapse flag calls collapsed: below its epsilon
            COLLAPSE_EPSILON,
        ),
        Claim(
            "ssem_variance",
            "Above α_c the within-class variance matches the SSEM's 1 − β*",
            "SSEM optimum β*(α, τ; m, n, p), paper-notes 11.3",
            "measured − predicted within-class variance",
            "equivalent",
            "variance",
            0.05,
        ),
        Claim(
            "alpha_variance",
            "The within-class variance grows with the self-supervised share α",
            "SSEM, paper-notes 11.3: β* falls from 1 as α rises past α_c",
            "slope of the within-class variance on α",
            "increase",
            "variance/α",
            0.05,
        ),
    )
}


@dataclass(frozen=True)
class Finding:
    """One claim tested on some runs: the measured ``effect`` (in the claim's unit) with its
    ``interval`` (95 %, None without replicates), the ``n`` replicates (``replicate`` says of
    what) behind it, the ``verdict``, the numbers used (``data``: what -> value) and a short
    human summary of them (``measured``); ``note`` says why a verdict is inconclusive or what
    limits it; ``figure`` names the figure that carries the finding."""

    claim: str
    subject: str
    effect: float | None
    interval: tuple[float, float] | None
    n: int
    replicate: str
    verdict: str
    minimum: float
    method: str
    measured: str
    data: tuple[tuple[str, float | None], ...] = ()
    note: str = ""
    figure: str | None = None

    @property
    def spec(self) -> Claim:
        return CLAIMS[self.claim]


@dataclass(frozen=True)
class RunData:
    """What the findings read of one run's result (the loss layer's statistics) and its
    training ``config`` (:class:`~cl_diag.runconfig.RunConfig`, parsed once); ``mode`` is
    the result's statistics mode (exact or sampled), part of what makes runs replicates
    (:func:`cl_diag.report.runs.replicate_key`)."""

    label: str
    config: RunConfig
    n_ref: int
    delta: float
    mode: str
    layer: str
    n: int
    pos_mean: float | None
    pos_var: float | None
    neg_mean: float | None
    neg_var: float | None
    neg_largest: float | None  # max |s| over cross-view negatives
    neg_ratio: float | None
    top1: float | None = None
    n_test: int | None = None
    band: tuple[float, float] | None = None
    #: the loss layer's class-collapse diagnostics (labelled runs) and the SSEM panel (supcl)
    collapse: Collapse | None = None
    ssem: Ssem | None = None
    extra: dict[str, object] = field(default_factory=dict)
    #: the result's ``source.kind``: "embeddings" and "arrays" are of unknown origin
    origin: str = ""

    @property
    def unknown_origin(self) -> bool:
        """Embeddings measured as given (a file, arrays): no encoder or training config is
        known, so claims about trained encoders (``Claim.scope`` "trained") do not apply."""
        return self.origin in EMBEDDING_SOURCES

    @property
    def vrn(self) -> float | None:
        """The VRN weight λ: 0 without VRN, None when on with no weight recorded."""
        return self.config.vrn.weight

    @property
    def seed(self) -> object:
        return self.config.option(SEED_KEY)

    @property
    def batch_size(self) -> float | None:
        m = self.config.batch_size
        return None if m is None else float(m)

    @property
    def alpha(self) -> float | None:
        """The self-supervised share α of a supcl run (the SSEM's, else the config's)."""
        if self.ssem is not None and self.ssem.alpha is not None:
            return self.ssem.alpha
        alpha = self.config.alpha
        return None if alpha is None else float(alpha)

    @property
    def within_class_variance(self) -> float | None:
        return None if self.collapse is None else self.collapse.within_class_variance

    @property
    def ceiling(self) -> float | None:
        """Thm 5.2: 1 + mean cross-view negative + 1/(n_ref − 1)."""
        if self.neg_mean is None:
            return None
        return 1.0 + self.neg_mean + 1.0 / (self.n_ref - 1)

    @classmethod
    def of(
        cls,
        result: Result,
        *,
        label: str = "",
        config: RunConfig | None = None,
        layer: str | None = None,
    ) -> RunData | None:
        """The run's loss layer (:func:`cl_diag.report.runs.loss_layer`) with ``config``
        (default: parsed from the result); None when that layer lacks positive or cross-view
        negative statistics."""
        if config is None:
            config = RunConfig.of(result)
        theory = result.theory
        if layer is None:
            layer = loss_layer(result)
        measured = result.layers.get(layer)
        if measured is None:
            return None
        pos = measured.pairs.get(PairType.POSITIVE)
        neg = measured.pairs.get(PairType.CROSS_VIEW_NEGATIVE)
        if pos is None or neg is None:
            return None
        largest = None
        if neg.min is not None and neg.max is not None:
            largest = max(abs(neg.min), abs(neg.max))
        top1 = n_test = None
        probes = result.probes
        if probes is not None and probes.linear is not None:
            top1 = probes.linear.top1
            test = (probes.splits or {}).get("test")
            n_test = test.images if test is not None else None
        band = None
        if theory is not None and theory.variance_band is not None:
            vb = theory.variance_band
            if vb.lo is not None and vb.hi is not None:
                band = (vb.lo, vb.hi)
        return cls(
            label=label,
            config=config,
            n_ref=result.n_ref,
            delta=result.delta,
            mode=result.mode,
            layer=layer,
            n=measured.n,
            pos_mean=pos.mean,
            pos_var=pos.var,
            neg_mean=neg.mean,
            neg_var=neg.var,
            neg_largest=largest,
            neg_ratio=neg.excessive_ratio,
            top1=top1,
            n_test=n_test,
            band=band,
            collapse=measured.collapse,
            ssem=theory.ssem if theory is not None else None,
            origin=result.source.kind,
        )


# ---- helpers --------------------------------------------------------------------------------


def _num(x: float | None, digits: int = 4) -> str:
    return MISSING if x is None else fmt(float(x), digits)


def _spread(values: Sequence[float]) -> str:
    """'mean ± sd (n)' of replicates, or the one value."""
    s = summarize(values)
    if s.sd is None:
        return _num(s.mean)
    return f"{_num(s.mean)} ± {fmt(s.sd, 2)}"


def _pct(x: float | None) -> str:
    return MISSING if x is None else f"{100.0 * x:.4g} %"


def _finish(
    claim: str,
    subject: str,
    effect: float | None,
    interval: tuple[float, float] | None,
    *,
    n: int,
    replicate: str,
    method: str,
    measured: str,
    data: Sequence[tuple[str, float | None]],
    note: str = "",
    figure: str | None = None,
    p_value: float | None = None,
    minimum: float | None = None,
) -> Finding:
    """The Finding, its verdict decided by the claim's rule (``minimum`` overrides the claim's
    minimum relevant effect where the run states its own, e.g. the collapse flag's epsilon)."""
    spec = CLAIMS[claim]
    minimum = spec.minimum if minimum is None else minimum
    decided = verdict(effect, interval, expect=spec.expect, minimum=minimum)
    if p_value is not None and p_value >= TREND_ALPHA and decided != "inconclusive":
        decided = "inconclusive"
        note = (note + " " if note else "") + (
            f"The permutation test does not reject 'no trend' (p = {p_value:.3g})."
        )
    if decided == "inconclusive" and not note:
        if interval is None:
            note = "Too few runs for an interval."
        elif effect is not None and abs(effect) < minimum:
            note = "The effect is smaller than the minimum relevant size."
        else:
            note = "The interval crosses zero."
    return Finding(
        claim=claim,
        subject=subject,
        effect=effect,
        interval=interval,
        n=n,
        replicate=replicate,
        verdict=decided,
        minimum=minimum,
        method=method,
        measured=measured,
        data=tuple(data),
        note=note,
        figure=figure,
    )


def _seeds(runs: Sequence[RunData]) -> list[object]:
    return [r.seed for r in runs]


def _paired(none: Sequence[RunData], vrn: Sequence[RunData]) -> list[tuple[RunData, RunData]]:
    """Runs of the two conditions matched by seed, when both have the same distinct seeds."""
    a, b = {repr(r.seed): r for r in none}, {repr(r.seed): r for r in vrn}
    if len(a) != len(none) or len(b) != len(vrn) or set(a) != set(b) or None in _seeds(none):
        return []
    return [(a[k], b[k]) for k in a]


def _difference(
    none: Sequence[RunData],
    vrn: Sequence[RunData],
    read: Callable[[RunData], float | None],
) -> tuple[float | None, tuple[float, float] | None, int, str]:
    """(effect, interval, n, method) of read(VRN) − read(none): paired by seed, else Welch,
    else (one run a side) no interval."""
    pairs = [(read(a), read(b)) for a, b in _paired(none, vrn)]
    complete = [(x, y) for x, y in pairs if x is not None and y is not None]
    if len(pairs) >= 2 and len(complete) == len(pairs):
        s = summarize([y - x for x, y in complete])
        return s.mean, s.interval, s.n, "paired by seed, t interval of the differences"
    xs = [read(r) for r in none]
    ys = [read(r) for r in vrn]
    if any(v is None for v in xs + ys):
        return None, None, 0, ""
    xa, ya = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    effect = float(ya.mean() - xa.mean())
    if xa.size >= 2 and ya.size >= 2:
        return effect, welch_interval(ya, xa), int(min(xa.size, ya.size)), "Welch t"
    return effect, None, int(min(xa.size, ya.size)), "one run per condition"


def _subject_runs(runs: Sequence[RunData]) -> str:
    return "1 run" if len(runs) == 1 else f"{len(runs)} seeds"


# ---- VRN against no VRN at equal config ------------------------------------------------------


def vrn_variance(none: Sequence[RunData], vrn: Sequence[RunData], subject: str) -> Finding:
    """VRN / none ratio of the cross-view negative variance, as a relative change: the mean
    of ln(var_VRN / var_none) over seeds, exponentiated (a geometric-mean ratio), minus 1."""

    def logvar(r: RunData) -> float | None:
        return math.log(r.neg_var) if r.neg_var is not None and r.neg_var > 0 else None

    d, ci, n, method = _difference(none, vrn, logvar)
    effect = None if d is None else math.expm1(d)
    interval = None if ci is None else (math.expm1(ci[0]), math.expm1(ci[1]))
    measured = (
        f"none {_spread([r.neg_var for r in none if r.neg_var is not None])} → "
        f"VRN {_spread([r.neg_var for r in vrn if r.neg_var is not None])} "
        f"({_subject_runs(vrn)} each)"
    )
    return _finish(
        "vrn_variance",
        subject,
        effect,
        interval,
        n=n,
        replicate="seeds",
        method=f"ln variance, {method}" if method else "",
        measured=measured,
        data=[(f"{r.label} variance", r.neg_var) for r in (*none, *vrn)],
        note="" if ci is not None or d is None else "One run per condition: no interval.",
    )


def vrn_mean_shift(none: Sequence[RunData], vrn: Sequence[RunData], subject: str) -> Finding:
    """Change of the distance |mean cross-view negative − δ| from no VRN to VRN (negative:
    VRN moved the mean toward δ)."""

    def distance(r: RunData) -> float | None:
        return None if r.neg_mean is None else abs(r.neg_mean - r.delta)

    effect, ci, n, method = _difference(none, vrn, distance)
    delta = none[0].delta if none else math.nan
    measured = (
        f"mean none {_spread([r.neg_mean for r in none if r.neg_mean is not None])} → "
        f"VRN {_spread([r.neg_mean for r in vrn if r.neg_mean is not None])}; δ = {_num(delta)}"
    )
    return _finish(
        "vrn_mean_shift",
        subject,
        effect,
        ci,
        n=n,
        replicate="seeds",
        method=method,
        measured=measured,
        data=[(f"{r.label} negative mean", r.neg_mean) for r in (*none, *vrn)],
        note="" if ci is not None or effect is None else "One run per condition: no interval.",
    )


def vrn_alignment(none: Sequence[RunData], vrn: Sequence[RunData], subject: str) -> Finding:
    """Positive mean with VRN minus without (a drop is an alignment cost)."""
    effect, ci, n, method = _difference(none, vrn, lambda r: r.pos_mean)
    measured = (
        f"none {_spread([r.pos_mean for r in none if r.pos_mean is not None])} → "
        f"VRN {_spread([r.pos_mean for r in vrn if r.pos_mean is not None])}"
    )
    return _finish(
        "vrn_alignment",
        subject,
        effect,
        ci,
        n=n,
        replicate="seeds",
        method=method,
        measured=measured,
        data=[(f"{r.label} positive mean", r.pos_mean) for r in (*none, *vrn)],
        note="" if ci is not None or effect is None else "One run per condition: no interval.",
    )


def vrn_accuracy(none: Sequence[RunData], vrn: Sequence[RunData], subject: str) -> Finding | None:
    """Linear-probe top-1 with VRN minus without (fractions; printed in pp). None when the runs
    carry no linear probe."""
    if any(r.top1 is None for r in (*none, *vrn)):
        return None
    effect, ci, n, method = _difference(none, vrn, lambda r: r.top1)
    note = ""
    if ci is None and effect is not None:
        note = "One run per condition: no interval over training runs."
        tests = {r.n_test for r in (*none, *vrn)}
        if len(none) == len(vrn) == 1 and None not in tests:
            note += (
                " Test-split sampling alone (Newcombe): "
                + _interval_text(_newcombe(none[0], vrn[0]), "pp")
                + "."
            )
    measured = f"none {_accuracy_text(none)} → VRN {_accuracy_text(vrn)}"
    return _finish(
        "vrn_accuracy",
        subject,
        effect,
        ci,
        n=n,
        replicate="seeds",
        method=method,
        measured=measured,
        data=[(f"{r.label} linear top-1", r.top1) for r in (*none, *vrn)],
        note=note,
    )


def _newcombe(a: RunData, b: RunData) -> tuple[float, float]:
    assert a.top1 is not None and b.top1 is not None and a.n_test and b.n_test
    return newcombe_interval(a.top1, a.n_test, b.top1, b.n_test)


def _accuracy_text(runs: Sequence[RunData]) -> str:
    """An accuracy with its interval: Wilson on the test split for one run, t over seeds."""
    values = [float(r.top1) for r in runs if r.top1 is not None]
    if not values:
        return MISSING
    if len(values) == 1:
        r = runs[0]
        if r.n_test:
            lo, hi = wilson_interval(values[0] * r.n_test, r.n_test)
            return f"{_pct(values[0])} [{100 * lo:.4g}, {100 * hi:.4g}]"
        return _pct(values[0])
    s = summarize(values)
    assert s.sd is not None and s.interval is not None
    # an accuracy lies in [0, 1]: the t interval of few seeds can reach past either end
    lo, hi = max(0.0, s.interval[0]), min(1.0, s.interval[1])
    return f"{_pct(s.mean)} ± {100 * s.sd:.2g} [{100 * lo:.4g}, {100 * hi:.4g}]"


# ---- batch size ---------------------------------------------------------------------------


def _by_batch(
    runs: Sequence[RunData], read: Callable[[RunData], float | None], unit: str = ""
) -> str:
    """'m 16: 0.1027, 32: ...' -- the mean of each batch size's runs."""
    sizes = sorted({r.batch_size for r in runs if r.batch_size is not None})
    parts = []
    for m in sizes:
        values = [v for r in runs if r.batch_size == m and (v := read(r)) is not None]
        if values:
            parts.append(f"{fmt(m, 4)}: {_num(float(np.mean(values)))}{unit}")
    reps = max((sum(1 for r in runs if r.batch_size == m) for m in sizes), default=0)
    return "m " + ", ".join(parts) + (f" (means of {reps} seeds)" if reps > 1 else "")


def batch_variance(
    series: Sequence[RunData], subject: str, figure: str | None = None
) -> Finding | None:
    """Slope of ln(variance) on log2(m) over every run of a series (seeds included), as the
    relative change per doubling of m, exp(slope) − 1; None with fewer than two sizes."""
    points = [
        (math.log2(r.batch_size), math.log(r.neg_var))
        for r in series
        if r.batch_size is not None and r.neg_var is not None and r.neg_var > 0
    ]
    t = trend([p[0] for p in points], [p[1] for p in points])
    if t.levels < 2:
        return None
    effect = math.expm1(t.slope)
    interval = (
        None if t.interval is None else (math.expm1(t.interval[0]), math.expm1(t.interval[1]))
    )
    return _finish(
        "batch_variance",
        subject,
        effect,
        interval,
        n=t.points,
        replicate="runs",
        method=(
            f"slope of ln variance on log2 m over {t.points} runs at {t.levels} batch sizes, "
            "t interval" + (f"; permutation p = {t.p_value:.3g}" if t.p_value is not None else "")
        ),
        measured=_by_batch(series, lambda r: r.neg_var),
        data=[(f"{r.label} variance", r.neg_var) for r in series],
        figure=figure,
        p_value=t.p_value,
    )


def batch_accuracy(
    series: Sequence[RunData], subject: str, figure: str | None = None
) -> Finding | None:
    """Slope of linear-probe top-1 (fraction) on log2(m) over every run of a series."""
    points = [
        (math.log2(r.batch_size), float(r.top1))
        for r in series
        if r.batch_size is not None and r.top1 is not None
    ]
    t = trend([p[0] for p in points], [p[1] for p in points])
    if t.levels < 2:
        return None
    return _finish(
        "batch_accuracy",
        subject,
        t.slope,
        t.interval,
        n=t.points,
        replicate="runs",
        method=(
            f"slope of top-1 on log2 m over {t.points} runs at {t.levels} batch sizes, t interval"
            + (f"; permutation p = {t.p_value:.3g}" if t.p_value is not None else "")
        ),
        measured=_by_batch(series, lambda r: None if r.top1 is None else 100.0 * r.top1, " %"),
        data=[(f"{r.label} linear top-1", r.top1) for r in series],
        figure=figure,
        p_value=t.p_value,
    )


# ---- one configuration against the theory ----------------------------------------------------


def _replicated(
    runs: Sequence[RunData],
    read: Callable[[RunData], float | None],
    single_se: Callable[[RunData], float],
) -> tuple[float, tuple[float, float] | None, int, str]:
    """(estimate, interval, n, method): t over the seeds of a config, or for one run the
    estimate +- z SE from the sampling of its analysed images."""
    values = [v for r in runs if (v := read(r)) is not None]
    if len(values) >= 2:
        s = summarize(values)
        return s.mean, s.interval, s.n, "t interval over seeds"
    r = runs[0]
    value = values[0]
    se = single_se(r)
    if not math.isfinite(se):
        return value, None, r.n, "sampling of the analysed images"
    z = z_value()
    return (
        value,
        (value - z * se, value + z * se),
        r.n,
        "sampling of the analysed images (conservative U-statistic bound)",
    )


def variance_band(runs: Sequence[RunData], subject: str) -> Finding | None:
    """Measured cross-view negative variance against the Thm 5.5 band (runs without VRN whose
    theory panel has a band). Effect: 0 inside the band, else the relative distance to the
    nearer edge (var/hi − 1 above it, var/lo − 1 below it)."""
    band = runs[0].band if runs else None
    if band is None or any(r.config.vrn.on or r.neg_var is None for r in runs):
        return None
    if band[1] <= 0:  # m = n: the full-batch optimum, variance 0 (Thm 5.1), no band
        return None
    lo_b, hi_b = band

    def outside(v: float) -> float:
        if v > hi_b:
            return v / hi_b - 1.0
        if v < lo_b:
            return v / lo_b - 1.0 if lo_b > 0 else -1.0
        return 0.0

    def se(r: RunData) -> float:
        assert r.neg_mean is not None and r.neg_var is not None
        return pair_var_se(r.neg_mean, r.neg_var, r.neg_largest or 1.0, r.n)

    value, ci, n, method = _replicated(runs, lambda r: r.neg_var, se)
    # outside() is non-decreasing in the variance, so it maps the interval's ends in order
    interval = None if ci is None else (outside(max(ci[0], 0.0)), outside(ci[1]))
    where = "inside" if outside(value) == 0 else ("above" if value > hi_b else "below")
    return _finish(
        "variance_band",
        subject,
        outside(value),
        interval,
        n=n,
        replicate="seeds" if len(runs) > 1 else "images",
        method=method,
        measured=(
            f"variance {_spread([r.neg_var for r in runs if r.neg_var is not None])}, "
            f"{where} the band [{_num(lo_b)}, {_num(hi_b)}] (m = {fmt(runs[0].batch_size, 4)}, "
            f"n = {fmt(runs[0].n_ref)})"
        ),
        data=[(f"{r.label} variance", r.neg_var) for r in runs]
        + [("band lower", lo_b), ("band upper", hi_b)],
        note=_band_note(value, hi_b, lo_b),
    )


def _band_note(value: float, hi: float, lo: float) -> str:
    """Why a variance outside the band says little about the theorem."""
    if lo <= value <= hi:
        return ""
    note = (
        "The band describes fixed mini-batches at their optimum (d ≥ m − 1, every batch its own "
        "simplex); these runs reshuffle their batches and train for finite time, so they are "
        "not at that optimum."
    )
    if value > hi:
        note += (
            " The paper's own Table 1 sits far above the band too: only the ordering over m is "
            "predicted."
        )
    return note


def ceiling(runs: Sequence[RunData], subject: str) -> Finding | None:
    """Slack of the Thm 5.2 ceiling over the positive mean, ceiling − positive mean (>= 0 by
    the theorem, with n = n_ref); the note says whether the ceiling binds (< 1 beyond its
    sampling error: perfect alignment impossible)."""
    if any(r.pos_mean is None or r.ceiling is None for r in runs):
        return None

    def slack(r: RunData) -> float | None:
        return None if r.ceiling is None or r.pos_mean is None else r.ceiling - r.pos_mean

    def se(r: RunData) -> float:
        return math.sqrt(max(0.0, r.pos_var or 0.0) / max(1, r.n)) + pair_mean_se(
            r.neg_var or 0.0, r.n
        )

    value, ci, n, method = _replicated(runs, slack, se)
    ceilings = [r.ceiling for r in runs if r.ceiling is not None]
    _, c_ci, _, _ = _replicated(
        runs, lambda r: r.ceiling, lambda r: pair_mean_se(r.neg_var or 0.0, r.n)
    )
    if c_ci is not None and c_ci[1] < 1.0:
        binds = (
            "The ceiling is below 1 beyond its error: the mean negative lies below δ, so "
            "perfect alignment is impossible (excessive separation)."
        )
    elif c_ci is not None and c_ci[0] >= 1.0:
        binds = "The ceiling is at least 1: it does not limit alignment here."
    else:
        binds = "Whether the ceiling is below 1 is within its error."
    return _finish(
        "ceiling",
        subject,
        value,
        ci,
        n=n,
        replicate="seeds" if len(runs) > 1 else "images",
        method=method,
        measured=(
            f"positive mean {_spread([r.pos_mean for r in runs if r.pos_mean is not None])}, "
            f"ceiling {_spread(ceilings)}"
        ),
        data=[(f"{r.label} positive mean", r.pos_mean) for r in runs]
        + [(f"{r.label} ceiling", r.ceiling) for r in runs],
        note=binds,
    )


def excessive_separation(runs: Sequence[RunData], subject: str) -> Finding | None:
    """Share of cross-view negatives below δ, minus 1/2 (a majority is the claim). One run:
    Wilson's interval with n/2 effective pairs (the U-statistic bound). None for embeddings of
    unknown origin: the claim is the rebuttal's figure for SimCLR encoders on CIFAR-100
    (:func:`not_applicable` says so in the report)."""
    if any(r.neg_ratio is None for r in runs) or any(r.unknown_origin for r in runs):
        return None
    values = [float(r.neg_ratio) for r in runs if r.neg_ratio is not None]
    if len(values) >= 2:
        s = summarize(values)
        ratio, interval, n, method = s.mean, s.interval, s.n, "t interval over seeds"
    else:
        r = runs[0]
        ratio, n = values[0], r.n
        interval = wilson_interval(ratio * r.n / 2, r.n / 2) if r.n >= 2 else None
        method = "Wilson, n/2 effective pairs of the analysed images"
    note = ""
    pairs = runs[0].n * (runs[0].n - 1)
    if pairs < 100:
        note = (
            f"Only {pairs} cross-view pairs per run: the ratio moves in steps of 1/{pairs}, and "
            "similarities near δ fall on either side of it by chance."
        )
    if all(r.neg_ratio == 0 for r in runs) and runs[0].delta < 0:
        note = (
            "No negative lies below δ < 0; with non-negative features (e.g. after a ReLU) every "
            "similarity is ≥ 0 and the ratio is 0 by construction."
        )
    return _finish(
        "excessive",
        subject,
        ratio - 0.5,
        None if interval is None else (interval[0] - 0.5, interval[1] - 0.5),
        n=n,
        replicate="seeds" if len(runs) > 1 else "images",
        method=method,
        measured=(
            f"{_spread_pct(values)} below δ = {_num(runs[0].delta)} "
            f"(n_ref = {fmt(runs[0].n_ref)}; {runs[0].n} analysed images per run)"
        ),
        data=[(f"{r.label} excessive ratio", r.neg_ratio) for r in runs],
        note=note,
    )


def _spread_pct(values: Sequence[float]) -> str:
    s = summarize(values)
    if s.sd is None:
        return _pct(s.mean)
    return f"{_pct(s.mean)} ± {100 * s.sd:.2g}"


# ---- class collapse against the SSEM ------------------------------------------------------


def _has_ssem(r: RunData) -> bool:
    """A run the SSEM claims apply to: its theory has an ssem block with a prediction, and its
    loss layer carries the measured collapse block."""
    return (
        r.ssem is not None
        and r.ssem.alpha_c is not None
        and r.ssem.predicted.within_class_variance is not None
        and r.within_class_variance is not None
    )


def _class_interval(r: RunData) -> tuple[float, tuple[float, float] | None, int]:
    """(within-class variance, its t interval over the run's classes, classes): the reported
    value is the unweighted mean of the per-class values, so their t interval is its interval
    with the classes as replicates. None with fewer than two classes' values."""
    assert r.collapse is not None and r.within_class_variance is not None
    values = [
        c.within_class_variance for c in r.collapse.per_class if c.within_class_variance is not None
    ]
    if len(values) < 2:
        return r.within_class_variance, None, len(values)
    s = summarize(values)
    return r.within_class_variance, s.interval, s.n


def _equivalence_note(
    decided: str, interval: tuple[float, float] | None, minimum: float, runs: Sequence[RunData]
) -> str:
    """Why an agreement claim got its verdict, with the SSEM's caveats for these runs."""
    notes = []
    if decided == "inconclusive":
        notes.append(
            "Too few classes or runs for an interval."
            if interval is None
            else f"The interval reaches both inside and outside ±{fmt(minimum, 4)} of the "
            "prediction."
        )
    ssem = runs[0].ssem
    assert ssem is not None
    if decided != "supported":
        notes.append(
            f"The SSEM optimises one balanced batch (m = {fmt(ssem.m)} classes × n = "
            f"{fmt(ssem.n)} instances × p = {fmt(ssem.p)} views) of free embeddings; this "
            f"measurement is over {runs[0].n} analysed images after finite training."
        )
    if ssem.d_below_mn_minus_1:
        notes.append("The layer's dimension is below mn − 1: the prediction is qualitative.")
    if ssem.small_alpha:
        notes.append(
            "α ≤ 0.1 at τ ≤ 0.1: variant B left the SSEM in free optimisation there "
            "(paper-notes 11.3)."
        )
    return " ".join(notes)


def _ssem_agreement(claim: str, runs: Sequence[RunData], subject: str) -> Finding:
    """Measured within-class variance of the loss layer minus the SSEM's 1 − β*, with its
    interval over seeds, or for one run over its classes (:func:`_class_interval`)."""
    first = runs[0]
    assert first.ssem is not None and first.collapse is not None
    predicted = first.ssem.predicted.within_class_variance
    assert predicted is not None
    values = [v for r in runs if (v := r.within_class_variance) is not None]
    if len(values) >= 2:
        s = summarize(values)
        value, ci, n = s.mean, s.interval, s.n
        replicate, method = "seeds", "t interval over seeds"
    else:
        value, ci, n = _class_interval(first)
        replicate = "classes"
        method = (
            f"t interval over the {n} classes' within-class variances (classes as replicates; "
            f"each exact over its analysed images)"
        )
    effect = value - predicted
    interval = None if ci is None else (ci[0] - predicted, ci[1] - predicted)
    minimum = CLAIMS[claim].minimum
    flags = [r.collapse.collapsed for r in runs if r.collapse is not None]
    if claim == "ssem_collapse":
        # "≈ 0" is the collapse flag's own epsilon, as the run recorded it
        minimum = first.collapse.epsilon if first.collapse.epsilon is not None else minimum
    decided = verdict(effect, interval, expect=CLAIMS[claim].expect, minimum=minimum)
    ssem = first.ssem
    flagged = sum(1 for f in flags if f)
    measured = (
        f"within-class variance {_spread(values)}, predicted 1 − β* = {_num(predicted)} "
        f"(α = {_num(first.alpha)}, α_c = {_num(ssem.alpha_c)}, β* = {_num(ssem.beta_star)}); "
        f"collapse flag (< {_num(first.collapse.epsilon)}): {flagged} of {len(flags)} "
        f"{'run' if len(flags) == 1 else 'runs'}"
    )
    return _finish(
        claim,
        subject,
        effect,
        interval,
        n=n,
        replicate=replicate,
        method=method,
        measured=measured,
        data=[(f"{r.label} within-class variance", r.within_class_variance) for r in runs]
        + [("predicted within-class variance", predicted), ("alpha_c", ssem.alpha_c)],
        note=_equivalence_note(decided, interval, minimum, runs),
        minimum=minimum,
    )


def ssem_collapse(runs: Sequence[RunData], subject: str) -> Finding | None:
    """At α ≤ α_c (the SSEM's regime "collapse", β* = 1): the measured within-class variance
    against 0, agreement within the collapse flag's epsilon. None unless every run has the
    SSEM panel and the collapse block and the SSEM predicts collapse."""
    if not runs or not all(_has_ssem(r) for r in runs):
        return None
    if any(r.ssem is None or r.ssem.regime != "collapse" for r in runs):
        return None
    return _ssem_agreement("ssem_collapse", runs, subject)


def ssem_variance(runs: Sequence[RunData], subject: str) -> Finding | None:
    """At α > α_c (β* < 1): the measured within-class variance against 1 − β*, agreement
    within the claim's minimum (0.05 in variance, 5 % of its range 0–1)."""
    if not runs or not all(_has_ssem(r) for r in runs):
        return None
    if any(r.ssem is None or r.ssem.regime == "collapse" for r in runs):
        return None
    return _ssem_agreement("ssem_variance", runs, subject)


def _by_alpha(runs: Sequence[RunData], read: Callable[[RunData], float | None]) -> str:
    """'α 0: 0.134, 0.1: ...' -- the mean of each α's runs."""
    alphas = sorted({a for r in runs if (a := r.alpha) is not None})
    parts = []
    for a in alphas:
        values = [v for r in runs if r.alpha == a and (v := read(r)) is not None]
        if values:
            parts.append(f"{fmt(a, 4)}: {_num(float(np.mean(values)))}")
    reps = max((sum(1 for r in runs if r.alpha == a) for a in alphas), default=0)
    return ", ".join(parts) + (f" (means of {reps} seeds)" if reps > 1 else "")


def alpha_variance(
    series: Sequence[RunData], subject: str, figure: str | None = None
) -> Finding | None:
    """Least-squares slope of the loss layer's within-class variance on α over every run of a
    series (seeds included), its t interval and permutation p-value; None unless every run has
    the SSEM panel and the collapse block, at two α or more."""
    runs = [r for r in series if _has_ssem(r) and r.alpha is not None]
    if len(runs) != len(series):
        return None
    points = [(r.alpha, r.within_class_variance) for r in runs]
    t = trend([float(p[0] or 0.0) for p in points], [float(p[1] or 0.0) for p in points])
    if t.levels < 2:
        return None

    def predicted(r: RunData) -> float | None:
        return None if r.ssem is None else r.ssem.predicted.within_class_variance

    return _finish(
        "alpha_variance",
        subject,
        t.slope,
        t.interval,
        n=t.points,
        replicate="runs",
        method=(
            f"slope of the within-class variance on α over {t.points} runs at {t.levels} "
            "values of α, t interval"
            + (f"; permutation p = {t.p_value:.3g}" if t.p_value is not None else "")
        ),
        measured=(
            f"α {_by_alpha(runs, lambda r: r.within_class_variance)}; predicted 1 − β* "
            f"{_by_alpha(runs, predicted)}"
        ),
        data=[(f"{r.label} within-class variance", r.within_class_variance) for r in runs],
        figure=figure,
        p_value=t.p_value,
    )


# ---- grouping the runs ------------------------------------------------------------------


def _groups(runs: Sequence[RunData], without: tuple[str, ...]) -> list[list[RunData]]:
    """The runs grouped by the one rule of replicates, with the options ``without`` left out
    (:func:`cl_diag.report.runs.replicate_key`)."""
    out: dict[str, list[RunData]] = {}
    for run in runs:
        key = replicate_key(
            run.config, n_ref=run.n_ref, mode=run.mode, layer=run.layer, without=without
        )
        out.setdefault(key, []).append(run)
    return list(out.values())


def run_findings(
    runs: Sequence[RunData],
    names: Callable[[RunData, tuple[str, ...]], str] | None = None,
    *,
    figures: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Every claim that applies to ``runs``, in report order: VRN against no VRN at equal
    config, batch-size trends, then each configuration against the theory.

    ``names(run, exclude)`` labels the group a run belongs to by its config without the
    ``exclude`` keys (the comparison's config labels); ``figures`` maps a claim key to the
    figure that carries it."""
    figures = figures or {}

    def name(group: Sequence[RunData], exclude: tuple[str, ...]) -> str:
        if names is None:
            return group[0].label
        return names(group[0], exclude) or "runs"

    out: list[Finding] = []
    configs = _groups(runs, (SEED_KEY,))
    # VRN against no VRN: configs equal but for the VRN weight
    for bucket in _groups(runs, (SEED_KEY, "vrn")):
        by_config = _groups(bucket, (SEED_KEY,))
        base = [g for g in by_config if not g[0].config.vrn.on]
        if len(base) != 1:
            continue
        for group in by_config:
            if not group[0].config.vrn.on:
                continue
            config = name(base[0], (SEED_KEY, "vrn"))
            weight = group[0].vrn
            subject = (
                f"{config}: VRN {'(λ not recorded)' if weight is None else fmt(weight, 4)} vs none"
            )
            out += [
                f
                for f in (
                    vrn_variance(base[0], group, subject),
                    vrn_mean_shift(base[0], group, subject),
                    vrn_alignment(base[0], group, subject),
                    vrn_accuracy(base[0], group, subject),
                )
                if f is not None
            ]
    # batch size: configs equal but for the batch size
    for series in _groups(runs, (SEED_KEY, "batch_size")):
        if len({r.batch_size for r in series if r.batch_size is not None}) < 2:
            continue
        subject = name(series, (SEED_KEY, "batch_size"))
        for make, claim in ((batch_variance, "batch_variance"), (batch_accuracy, "batch_accuracy")):
            finding = make(series, subject, figures.get(claim))
            if finding is not None:
                out.append(finding)
    # the within-class variance over α (supcl runs with the SSEM panel)
    for series in _groups(runs, (SEED_KEY, "alpha")):
        if len({r.alpha for r in series if r.alpha is not None}) < 2:
            continue
        finding = alpha_variance(
            series, name(series, (SEED_KEY, "alpha")), figures.get("alpha_variance")
        )
        if finding is not None:
            out.append(finding)
    # each configuration (its seeds pooled) against the theory
    for against_theory in (
        variance_band,
        ceiling,
        excessive_separation,
        ssem_collapse,
        ssem_variance,
    ):
        for group in configs:
            finding = against_theory(group, name(group, (SEED_KEY,)))
            if finding is not None:
                out.append(finding)
    order = list(CLAIMS)
    return sorted(out, key=lambda f: order.index(f.claim))


def not_applicable(runs: Sequence[RunData]) -> list[tuple[str, str]]:
    """(claim key, why) of each claim about trained encoders (``Claim.scope`` "trained") that
    is not tested because some of ``runs`` are embeddings of unknown origin."""
    unknown = [r for r in runs if r.unknown_origin]
    if not unknown:
        return []
    return [
        (
            key,
            "it states what the source measured on trained encoders, and "
            + (
                "these embeddings' origin is unknown"
                if len(unknown) == len(runs)
                else f"{', '.join(r.label for r in unknown)} are embeddings of unknown origin"
            )
            + ": the values are reported below, not judged against that figure",
        )
        for key, claim in CLAIMS.items()
        if claim.scope == "trained"
    ]


# ---- rendering ----------------------------------------------------------------------------


def _interval_text(interval: tuple[float, float] | None, unit: str) -> str:
    if interval is None:
        return MISSING
    lo, hi = (_value_text(x, unit, sign=False) for x in interval)
    return f"[{lo}, {hi}]"


def _value_text(value: float | None, unit: str, *, sign: bool = True) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    spec = "+.4g" if sign else ".4g"
    if unit == "relative":
        return f"{100.0 * value:{spec}} %"
    if unit == "pp":
        return f"{100.0 * value:{spec}} pp"
    # similarity, variance and variance per unit α print as numbers
    return f"{value:{spec}}"


def _minimum_text(claim: Claim) -> str:
    if claim.unit == "relative":
        return f"{100.0 * claim.minimum:.4g} % relative"
    if claim.unit == "pp":
        return f"{100.0 * claim.minimum:.4g} pp"
    if claim.unit == "variance":
        # the collapse claim's tolerance is the flag's epsilon the run recorded (this default)
        flag = " (the collapse flag's ε)" if claim.key == "ssem_collapse" else ""
        return f"{claim.minimum:.4g} in within-class variance{flag}"
    if claim.unit == "variance/α":
        return f"{claim.minimum:.4g} in within-class variance per unit α"
    return f"{claim.minimum:.4g} in cosine similarity"


def summary_lines(findings: Sequence[Finding]) -> list[str]:
    """One sentence per claim: its verdict and effect for a single subject, else which subjects
    got which verdict."""
    lines = []
    for key, claim in CLAIMS.items():
        mine = [f for f in findings if f.claim == key]
        if not mine:
            continue
        if len(mine) == 1:
            f = mine[0]
            text = (
                f"{claim.title} ({claim.source}): {f.verdict}; {claim.effect} "
                f"{_value_text(f.effect, claim.unit)} {_interval_text(f.interval, claim.unit)} "
                f"({f.subject})."
            )
        else:
            parts = []
            for decided in ("supported", "contradicted", "inconclusive"):
                subjects = [f.subject for f in mine if f.verdict == decided]
                if subjects:
                    parts.append(f"{decided} for {', '.join(subjects)}")
            text = f"{claim.title} ({claim.source}): " + "; ".join(parts) + "."
        lines.append(text)
    return lines


def findings_blocks(
    findings: Sequence[Finding],
    figures: Sequence = (),
    skipped: Sequence[tuple[str, str]] = (),
) -> list:
    """The Findings section: how verdicts are made, one summary sentence per claim, one table
    per claim (a row per subject) and the figures that carry a finding; ``skipped``: (claim,
    why) of the claims not tested (:func:`not_applicable`), each said in one sentence."""
    blocks: list = [Heading(2, "Findings")]
    for key, why in skipped:
        claim = CLAIMS[key]
        blocks.append(
            Paragraph(f"Not applicable: {claim.title} ({claim.source}) is not tested: {why}.")
        )
    if not findings:
        blocks.append(
            Paragraph(
                "No claim of the paper applies to these runs (they carry no pair statistics of "
                "a loss layer, or nothing varies that a claim is about)."
            )
        )
        return blocks
    blocks.append(
        Paragraph(
            "Each claim of Lee et al. (ICML 2025) that applies to these runs, computed from their "
            "results: the effect with its 95 % interval and the number of replicates. "
            "Supported: the interval lies on the side the claim expects and the effect is at "
            "least the minimum relevant size; contradicted: it lies on the other side with a "
            "relevant effect; inconclusive: the interval crosses zero, the effect is smaller "
            "than the minimum relevant size, or there are too few runs."
            # only where such a claim is made, so other reports keep their bytes
            + (
                " For a claim that a measurement matches a prediction: supported when the "
                "interval lies within the minimum relevant difference of the prediction, "
                "contradicted when it lies entirely beyond it, inconclusive otherwise."
                if any(CLAIMS[f.claim].expect == "equivalent" for f in findings)
                else ""
            )
        )
    )
    for line in summary_lines(findings):
        blocks.append(Paragraph("• " + line))
    placed: set[str] = set()
    for key, claim in CLAIMS.items():
        mine = [f for f in findings if f.claim == key]
        if not mine:
            continue
        rows = [
            [
                f.subject,
                f.measured,
                _value_text(f.effect, claim.unit),
                _interval_text(f.interval, claim.unit),
                f"{f.n} {f.replicate}",
                f.verdict,
                " ".join(p for p in (f.method + "." if f.method else "", f.note) if p),
            ]
            for f in mine
        ]
        blocks.append(
            Table(
                columns=[
                    "runs",
                    "measured",
                    "effect",
                    "95 % interval",
                    "n",
                    "verdict",
                    "how / why",
                ],
                rows=rows,
                caption=(
                    f"{claim.title} ({claim.source}). Effect: {claim.effect}; minimum relevant "
                    f"effect {_minimum_text(claim)}."
                ),
            )
        )
        for fig in figures:
            name = getattr(fig, "filename", None)
            if name is None or name in placed:
                continue
            if any(f.figure == name for f in mine):
                blocks.append(fig)
                placed.add(name)
    return blocks
