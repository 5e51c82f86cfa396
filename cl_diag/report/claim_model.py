"""What a claim is made of (issue 21): the facts of a run the claims read (:class:`RunData`),
the parts of a registry entry (:class:`Source`, :class:`Condition`, :class:`Metric`, the
designs, :class:`Precondition`) and the entries themselves (:class:`Claim` for a prediction
or a description, :class:`Identity` for a consistency check).

The registry (:mod:`cl_diag.report.claims`) is a list of such entries, data only; the one
evaluator (:func:`cl_diag.report.findings.run_findings`) forms each entry's tests from the
runs with its design and turns them into findings.

Designs (each forms *units* -- the groups of runs one test is about, named by the runs'
config labels -- and estimates the claim's effect on a unit):

* :class:`Paired` -- two arms that differ in one option (VRN off/on, cross-view/within-view
  negatives), configs otherwise equal (:func:`cl_diag.report.runs.replicate_key`); the effect
  is treatment − control of the metric, paired by seed (the t interval of the per-seed
  differences) when both arms have the same seeds, else Welch's interval;
* :class:`Trend` -- the least-squares slope of the metric over a swept option (log2 m, α),
  every run a point (seeds included), its t interval (df = points − 2);
* :class:`PairedTrend` -- the slope over a swept option of the per-seed paired differences
  (e.g. the VRN gain against log2 m);
* :class:`OneSample` -- the metric against a reference value (δ, 0.5, 1 − β*): over seeds the
  t interval of the per-seed deviations; for one run, where the claim is about one trained
  model, the sampling error of its analysed images (df = ∞);
* :class:`Threshold` -- where the metric starts rising over a swept option (α): the break of
  a two-segment fit (flat, then linear rising; an offset per seed) against a predicted
  threshold (α_c), with the break's profile-likelihood interval.

Every effect is on the claim's *analysis scale* (ln for a variance or a spread, so a ratio
becomes a difference); :attr:`Claim.shows` says how it is printed (a relative change, a
factor, percentage points or a number).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from cl_diag.measurement.ssem import ssem_loss
from cl_diag.measurement.stats import (
    hinge_fit,
    hinge_interval,
    rounding_sd,
    share_interval,
    summarize,
    t_quantile,
    trend,
    welch_df,
    welch_se_df,
)
from cl_diag.measurement.theory import sigmoid_optimum_loss
from cl_diag.report.document import MISSING, fmt
from cl_diag.report.runs import SEED_KEY, loss_layer, replicate_key
from cl_diag.result import Collapse, PairStats, Result, Ssem, TrainingLoss
from cl_diag.runconfig import RunConfig
from cl_diag.vocabulary import PairType

__all__ = [
    "WORKS",
    "Claim",
    "Condition",
    "Estimate",
    "Identity",
    "LayerPairs",
    "Metric",
    "OneSample",
    "Paired",
    "PairedTrend",
    "Precondition",
    "RunData",
    "Source",
    "Threshold",
    "Trend",
    "Unit",
]


# ---- what the claims read of a run ---------------------------------------------------------


@dataclass(frozen=True)
class PairMoments:
    """One pair type's mean, population variance and count, and whether they are estimates
    (sampled mode) rather than exact over every pair."""

    mean: float
    var: float
    count: int
    estimate: bool

    @classmethod
    def of(cls, stats: PairStats | None) -> PairMoments | None:
        if stats is None or stats.mean is None:
            return None
        return cls(stats.mean, stats.var or 0.0, stats.count, stats.estimate)


@dataclass(frozen=True)
class LayerPairs:
    """One layer's pair moments over its ``n`` analysed instances: what the identities of the
    consistency checks relate."""

    name: str
    n: int
    positive: PairMoments | None
    cross: PairMoments | None
    within: PairMoments | None


@dataclass(frozen=True)
class RunData:
    """What the claims read of one run: its training ``config`` (the
    :class:`~cl_diag.runconfig.RunConfig`, parsed once), the statistics of the layer its loss
    sees (``layer``, :func:`cl_diag.report.runs.loss_layer`), its probes, theory panel facts,
    and every layer's pair moments (``layers``, for the consistency checks).

    ``delta`` is δ = −1/(n_ref − 1); ``free_embeddings`` says the run trained free vectors (no
    encoder: the rebuttal's toy); ``eq10_full`` is Example 5.4's Eq. 10 at N = n_ref, the full
    batch (None when the theory panel has no sigmoid block)."""

    label: str = ""
    config: RunConfig = field(default_factory=RunConfig)
    n_ref: int = 0
    delta: float = math.nan
    mode: str = "exact"
    layer: str = ""
    n: int = 0
    d: int | None = None
    free_embeddings: bool = False
    loss_family: str | None = None
    pos_mean: float | None = None
    pos_var: float | None = None
    neg_mean: float | None = None
    neg_var: float | None = None
    neg_largest: float | None = None  # max |s| over cross-view negatives
    neg_min: float | None = None
    neg_max: float | None = None
    neg_ratio: float | None = None  # share of cross-view negatives below δ
    #: share below δ − ε (ε = EXCESS_MARGIN); None in results written before it was measured
    neg_margin_ratio: float | None = None
    top1: float | None = None
    n_test: int | None = None
    band: tuple[float, float] | None = None
    eq10_full: bool | None = None
    #: the CCEM's x* of the full-batch cross-view sigmoid loss over N = n_ref (paper-notes 11.1)
    ccem_x: float | None = None
    collapse: Collapse | None = None
    ssem: Ssem | None = None
    layers: tuple[LayerPairs, ...] = ()
    #: the training loss's last windows (cl-diag checkpoints) and, where a source gives it in
    #: closed form, the optimum loss of the run's loss on its batch (:func:`_optimum_loss`)
    loss: TrainingLoss | None = None
    optimum_loss: float | None = None

    # -- the config's facts, typed

    @property
    def recorded(self) -> bool:
        """Whether the run records a training config (an embeddings file does not)."""
        return self.config.recorded

    @property
    def vrn(self) -> float | None:
        """The VRN weight λ: 0 without VRN, None when on with no weight recorded."""
        return self.config.vrn.weight

    @property
    def seed(self) -> object:
        return self.config.seed

    @property
    def batch_size(self) -> float | None:
        m = self.config.batch_size
        return None if m is None else float(m)

    @property
    def log2_batch(self) -> float | None:
        m = self.config.batch_size
        return None if m is None or m <= 0 else math.log2(m)

    @property
    def alpha(self) -> float | None:
        """The self-supervised share α of a supcl run (the SSEM's, else the config's)."""
        if self.ssem is not None and self.ssem.alpha is not None:
            return self.ssem.alpha
        alpha = self.config.alpha
        return None if alpha is None else float(alpha)

    @property
    def within_view(self) -> bool:
        """Whether the loss also pushes within-view negatives (c2 = 1, e.g. sigmoid's option)."""
        return self.config.within_view is True

    # -- measured facts

    @property
    def neg_std(self) -> float | None:
        return None if self.neg_var is None else math.sqrt(max(self.neg_var, 0.0))

    @property
    def within_class_variance(self) -> float | None:
        return None if self.collapse is None else self.collapse.within_class_variance

    @property
    def instance_within_class_variance(self) -> float | None:
        """The within-class variance of the instance means (u_i + v_i)/2 (class collapse of
        the instances, the view spread left out) at the SSEM's scope, one balanced batch of the
        run's n instances per class, where the result records it; else over the analysed
        sample (results written before the batch scope was measured; None before the instance
        means were)."""
        if self.collapse is None:
            return None
        batch = self.collapse.batch_instance_within_class_variance
        return batch if batch is not None else self.collapse.instance_within_class_variance

    @property
    def ssem_prediction(self) -> float | None:
        """The SSEM's within-class variance 1 − β* for this run (None without the panel)."""
        return None if self.ssem is None else self.ssem.predicted.within_class_variance

    @classmethod
    def of(
        cls,
        result: Result,
        *,
        label: str = "",
        config: RunConfig | None = None,
        layer: str | None = None,
    ) -> RunData | None:
        """The run's facts on its loss layer (:func:`cl_diag.report.runs.loss_layer`) with
        ``config`` (default: parsed from the result); None when that layer lacks positive or
        cross-view negative statistics."""
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
        band = eq10 = None
        family = None
        if theory is not None:
            family = theory.loss.family
            vb = theory.variance_band
            if vb is not None and vb.lo is not None and vb.hi is not None:
                band = (vb.lo, vb.hi)
            eq10 = _eq10_full_batch(result)
        layers = tuple(
            LayerPairs(
                name=name,
                n=m.n,
                positive=PairMoments.of(m.pairs.get(PairType.POSITIVE)),
                cross=PairMoments.of(m.pairs.get(PairType.CROSS_VIEW_NEGATIVE)),
                within=PairMoments.of(m.pairs.get(PairType.WITHIN_VIEW_NEGATIVE)),
            )
            for name, m in result.layers.items()
        )
        return cls(
            label=label,
            config=config,
            n_ref=result.n_ref,
            delta=result.delta,
            mode=result.mode,
            layer=layer,
            n=measured.n,
            d=measured.d,
            free_embeddings=result.source.arch == "embedding",
            loss_family=family,
            pos_mean=pos.mean,
            pos_var=pos.var,
            neg_mean=neg.mean,
            neg_var=neg.var,
            neg_largest=largest,
            neg_min=neg.min,
            neg_max=neg.max,
            neg_ratio=neg.excessive_ratio,
            neg_margin_ratio=neg.excessive_margin_ratio,
            top1=top1,
            n_test=n_test,
            band=band,
            eq10_full=eq10,
            ccem_x=ccem_full_batch(result),
            collapse=measured.collapse,
            ssem=theory.ssem if theory is not None else None,
            layers=layers,
            loss=result.source.loss,
            optimum_loss=_optimum_loss(result, config),
        )


def _optimum_loss(result: Result, config: RunConfig) -> float | None:
    """The closed-form optimum loss of the run's loss on the batch it trained on, where a
    source gives one: the SSEM's batch loss at β* (paper-notes 11.3, the variant the panel
    names; the optimum for α ≥ α_s, docs/ssem.md) or the full-batch cross-view sigmoid loss
    at the CCEM's x* (paper-notes 11.1; trained on the full batch, m ≥ n). None otherwise."""
    theory = result.theory
    if theory is None:
        return None
    ssem = theory.ssem
    if ssem is not None:
        beta, alpha, tau, m, n, p = (ssem.beta_star, ssem.alpha, ssem.tau, ssem.m, ssem.n, ssem.p)
        if beta is None or alpha is None or tau is None or m is None or n is None or p is None:
            return None
        return ssem_loss(beta, alpha, tau, m, n, p, variant=ssem.variant or "B")
    sigmoid = theory.sigmoid
    m = config.batch_size
    if (
        sigmoid is not None
        and sigmoid.t is not None
        and sigmoid.b is not None
        and config.within_view is not True
        and m is not None
        and m >= result.n_ref >= 3
    ):
        return sigmoid_optimum_loss(sigmoid.t, sigmoid.b, result.n_ref)
    return None


def ccem_full_batch(result: Result) -> float | None:
    """The CCEM's x* at N = n_ref (the full batch), from the theory panel's sigmoid block when
    it is computed at that N; None otherwise."""
    theory = result.theory
    sigmoid = None if theory is None else theory.sigmoid
    if sigmoid is None or result.n_ref != sigmoid.ccem.N:
        return None
    return sigmoid.ccem.x_star


def _eq10_full_batch(result: Result) -> bool | None:
    """Example 5.4's Eq. 10 at N = n_ref: the theory panel's ``full_batch`` block, or its
    top-level sigmoid block when that one already is at N = n_ref."""
    theory = result.theory
    if theory is None:
        return None
    if theory.full_batch is not None and theory.full_batch.eq10 is not None:
        return theory.full_batch.eq10.holds
    if theory.sigmoid is not None and result.n_ref == theory.sigmoid.eq10.N:
        return theory.sigmoid.eq10.holds
    return None


# ---- the parts of an entry ------------------------------------------------------------------

#: the works a claim can come from, as a finding cites them
WORKS = {
    "paper": "Lee, Lim, Lee, Sohn (ICML 2025)",
    "rebuttal": "the authors' OpenReview rebuttal of Lee et al. (ICML 2025)",
    "SSEM": "the SSEM paper on supervised-contrastive class collapse (Lee, Oh, Lee et al.)",
    "CCEM": (
        "Lee, Chang, Sohn, Analysis of Using Sigmoid Loss for Contrastive Learning (AISTATS "
        "2024), the constant-embedding model of the sigmoid loss's optimum"
    ),
    "identity": "an identity for any unit vectors, from Lee et al. (ICML 2025)",
    "none": "no source predicts it for these runs",
}


@dataclass(frozen=True)
class Source:
    """Where a claim is made: the ``work`` (a key of :data:`WORKS`) and the place in it."""

    work: str
    where: str

    def __post_init__(self) -> None:
        if self.work not in WORKS:
            raise ValueError(f"unknown work {self.work!r}; one of {sorted(WORKS)}")

    @property
    def short(self) -> str:
        """How a finding cites it: "paper, Table 1", "rebuttal, Table 2", "SSEM, α_c"."""
        return f"{self.work}, {self.where}" if self.where else self.work

    @property
    def full(self) -> str:
        return f"{WORKS[self.work]}, {self.where}" if self.where else WORKS[self.work]


#: which runs of a unit a condition is checked on
ARMS = ("all", "control", "treatment")


@dataclass(frozen=True)
class Condition:
    """A requirement on runs: ``requires`` says it in words (the docs table, the reason of a
    *not applicable* finding), ``holds`` tests one run, ``found`` says what a run that fails
    it has instead ("loss dcl"); ``arm`` which runs of a paired unit it is checked on;
    ``summary``, for a condition on what a run's data show (its convergence) rather than on
    its config, says in a few words what the failing runs show, for the one-line summaries
    ("not converged: loss 3.54–3.63, optimum 3.154")."""

    requires: str
    holds: Callable[[RunData], bool] = field(repr=False, compare=False)
    found: Callable[[RunData], str] | None = field(default=None, repr=False, compare=False)
    arm: str = "all"
    summary: Callable[[Sequence[RunData]], str] | None = field(
        default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ValueError(f"arm must be one of {ARMS}, got {self.arm!r}")

    def failing(self, unit: Unit) -> list[RunData]:
        """The runs of ``unit`` (its arm) that fail the condition."""
        return [r for r in unit.arm(self.arm) if not self.holds(r)]

    def unmet(self, unit: Unit) -> str | None:
        """None when every run of the arm meets it, else the reason, e.g. "needs the loss
        SimCLR (these runs: loss dcl)"."""
        failing = self.failing(unit)
        if not failing:
            return None
        found = sorted({self.found(r) for r in failing}) if self.found is not None else []
        return f"needs {self.requires}" + (f" (here: {', '.join(found)})" if found else "")

    def short(self, unit: Unit) -> str:
        """The reason in a summary line: "needs ..." for a condition on the config, what the
        failing runs show ("here: not converged: ...") for one with a ``summary``."""
        if self.summary is not None:
            failing = self.failing(unit)
            if failing:
                return f"here: {self.summary(failing)}"
        return f"needs {self.requires}"


@dataclass(frozen=True)
class Metric:
    """What a claim measures on each run: ``read`` gives the value (None: not measured);
    ``log`` analyses it as ln(value) (a variance, a spread); ``unit`` says how raw values print
    ("share" and "accuracy" as percentages); ``run_se`` is the sampling error of one run's
    value on the analysis scale (from its analysed images), for claims about one trained
    model, and ``run_se_text`` how it is made. ``step`` is the grid a run's value is counted
    on (1/N for an accuracy on N test images, 1/pairs for a share of pairs; None: continuous):
    its rounding is the floor of any spread over seeds (:meth:`floor`)."""

    name: str
    read: Callable[[RunData], float | None] = field(repr=False, compare=False)
    log: bool = False
    unit: str = "value"
    run_se: Callable[[RunData], float] | None = field(default=None, repr=False, compare=False)
    run_se_text: str = ""
    step: Callable[[RunData], float | None] | None = field(default=None, repr=False, compare=False)

    def floor(self, runs: Sequence[RunData]) -> float:
        """The smallest standard deviation these runs' values can show over seeds: the
        rounding of the coarsest grid among them, step/√12
        (:func:`cl_diag.measurement.stats.rounding_sd`); 0 for a continuous statistic (or one
        analysed on a log scale). The same floor ``cl-diag reproduce`` gives a grid statistic."""
        if self.step is None or self.log:
            return 0.0
        steps = [x for r in runs if (x := self.step(r)) is not None and math.isfinite(x)]
        return rounding_sd(max(steps, default=0.0))

    def value(self, run: RunData) -> float | None:
        """The run's value on the analysis scale (None when absent, or not positive on a log
        scale)."""
        x = self.read(run)
        if x is None or not math.isfinite(x):
            return None
        if self.log:
            return math.log(x) if x > 0 else None
        return float(x)

    def show(self, x: float | None) -> str:
        """A raw value as a report prints it."""
        if x is None:
            return MISSING
        if self.unit in ("share", "accuracy"):
            return f"{100.0 * x:.4g} %"
        return fmt(float(x))

    def show_difference(self, d: float) -> str:
        """A difference of two runs' values on the analysis scale as text: a relative change
        for a log metric, percentage points for a share or an accuracy, else a number."""
        if self.log:
            return f"{100.0 * math.expm1(d):+.3g} %" if d < 709.0 else "+∞ %"
        if self.unit in ("share", "accuracy"):
            return f"{100.0 * d:+.3g} pp"
        return f"{d:+.3g}"

    def spread(self, runs: Sequence[RunData]) -> str:
        """'mean ± sd' of the runs' raw values, or the one value."""
        values = [float(v) for r in runs if (v := self.read(r)) is not None]
        if not values:
            return MISSING
        s = summarize(values)
        if s.sd is None:
            return self.show(s.mean)
        if self.unit in ("share", "accuracy"):
            return f"{100.0 * s.mean:.4g} % ± {100.0 * s.sd:.2g}"
        return f"{fmt(s.mean)} ± {fmt(s.sd, 2)}"


@dataclass(frozen=True)
class Unit:
    """The runs one test is about: ``subject`` names them (config labels); ``runs`` are all of
    them; a paired design's ``control`` and ``treatment`` arms; a paired trend's ``levels``
    (x, control, treatment)."""

    subject: str
    runs: tuple[RunData, ...]
    control: tuple[RunData, ...] = ()
    treatment: tuple[RunData, ...] = ()
    levels: tuple[tuple[float, tuple[RunData, ...], tuple[RunData, ...]], ...] = ()

    def arm(self, which: str) -> tuple[RunData, ...]:
        if which == "control":
            return self.control or self.runs
        if which == "treatment":
            return self.treatment or self.runs
        return self.runs


@dataclass(frozen=True)
class Estimate:
    """A claim's effect on a unit, on the analysis scale: ``effect`` with its standard error
    ``se`` and ``df`` degrees of freedom (se None: no interval, ``why_no_interval`` says why),
    the ``n`` replicates behind it (``replicate`` says of what), how it was made (``method``),
    what was measured (``measured``, ``data``), and for the power figure the design
    (``power_design``: "one_sample", "two_sample", "slope"), the replicate spread ``sd``, the
    x ``levels`` of a slope and the ``seeds`` per condition (or level) now; ``per_seed`` the
    effect of each seed alone on the analysis scale (a paired difference, or a deviation from
    the reference), in seed order, when the replicates are seeds."""

    effect: float | None
    se: float | None
    df: float
    n: int
    replicate: str
    method: str
    measured: str
    data: tuple[tuple[str, float | None], ...] = ()
    power_design: str | None = None
    sd: float | None = None
    levels: tuple[float, ...] = ()
    seeds: int | None = None
    why_no_interval: str = ""
    per_seed: tuple[float, ...] = ()
    #: the interval at a confidence, for an estimate whose interval is not effect ± t se (a
    #: profile-likelihood interval); then ``se`` is its 95 % half-width over t_{0.975, df},
    #: for the Holm ordering and the replication odds only
    interval_at: Callable[[float], tuple[float, float]] | None = field(
        default=None, repr=False, compare=False
    )
    #: why no seed count for 80 % power is given (an estimate without a power design)
    why_no_power: str = ""


def _groups(runs: Sequence[RunData], without: Sequence[str]) -> list[tuple[RunData, ...]]:
    """The runs grouped by the one rule of replicates with the options ``without`` left out
    (:func:`cl_diag.report.runs.replicate_key`), in the order of their first run."""
    out: dict[str, list[RunData]] = {}
    for run in runs:
        key = replicate_key(
            run.config, n_ref=run.n_ref, mode=run.mode, layer=run.layer, without=without
        )
        out.setdefault(key, []).append(run)
    return [tuple(g) for g in out.values()]


#: names a group of runs by its config without the given options (the comparison's labels)
Namer = Callable[[Sequence[RunData], tuple[str, ...]], str]


def _values(metric: Metric, runs: Sequence[RunData]) -> list[float] | None:
    """The metric of every run on the analysis scale; None when any is missing."""
    values = [metric.value(r) for r in runs]
    if any(v is None for v in values):
        return None
    return [float(v) for v in values if v is not None]


def _known(metric: Metric, run: RunData) -> float:
    """The metric of a run already checked to have one (:func:`_values`)."""
    value = metric.value(run)
    assert value is not None
    return value


def _by_seed(runs: Sequence[RunData]) -> dict[str, RunData] | None:
    """The runs keyed by seed, when every run has a distinct recorded seed."""
    keyed = {repr(r.seed): r for r in runs}
    if len(keyed) != len(runs) or any(r.seed is None for r in runs):
        return None
    return keyed


def _seed_order(keyed: dict[str, RunData]) -> list[str]:
    """The keys of :func:`_by_seed` in the order of their seeds (numbers by value: seed 10
    after seed 9, not after seed 1 as their text would sort), so per-seed lists read 1, 2, ..."""

    def order(key: str) -> tuple[int, float, str]:
        seed = keyed[key].seed
        if isinstance(seed, (int, float)) and not isinstance(seed, bool):
            return (0, float(seed), key)
        return (1, 0.0, key)

    return sorted(keyed, key=order)


def _sd(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) >= 2 else math.nan


#: how a method says that the spread is the rounding floor (:meth:`Metric.floor`)
_AT_FLOOR = "; the spread at least the rounding of its grid (step/√12)"


@dataclass(frozen=True)
class Paired:
    """Two arms that differ in ``options`` (left out of the replicate key), configs otherwise
    equal: ``control`` and ``treatment`` say which runs are which arm, ``label`` names an arm
    in a subject ("VRN 30", "none"); ``prefer``: when some treatment group of a bucket meets it
    (a tuned λ among a λ grid), only those groups form units."""

    options: tuple[str, ...]
    control: Condition
    treatment: Condition
    label: Callable[[RunData], str] = field(repr=False, compare=False)
    prefer: Condition | None = None

    @property
    def text(self) -> str:
        return (
            f"paired by seed: {self.treatment.requires} − {self.control.requires}, the t "
            "interval of the per-seed differences (Welch's interval when the arms' seeds "
            "differ)"
        )

    def _arms(
        self, bucket: Sequence[RunData]
    ) -> tuple[tuple[RunData, ...] | None, list[tuple[RunData, ...]]]:
        """The one control group of a bucket (None when not exactly one) and its treatment
        groups."""
        configs = _groups(bucket, (SEED_KEY,))
        controls = [g for g in configs if all(self.control.holds(r) for r in g)]
        treatments = [g for g in configs if all(self.treatment.holds(r) for r in g)]
        if self.prefer is not None:
            preferred = [g for g in treatments if all(self.prefer.holds(r) for r in g)]
            treatments = preferred or treatments
        return (controls[0] if len(controls) == 1 else None), treatments

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        out = []
        for bucket in _groups(runs, (SEED_KEY, *self.options)):
            control, treatments = self._arms(bucket)
            if control is None:
                continue
            group = name(control, (SEED_KEY, *self.options))
            for treatment in treatments:
                subject = f"{group}: {self.label(treatment[0])} vs {self.label(control[0])}"
                out.append(Unit(subject, (*control, *treatment), control, treatment))
        return out

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        return _paired_estimate(unit.control, unit.treatment, metric, self.label)


def _paired_estimate(
    control: Sequence[RunData],
    treatment: Sequence[RunData],
    metric: Metric,
    label: Callable[[RunData], str],
) -> Estimate | None:
    xs, ys = _values(metric, control), _values(metric, treatment)
    if xs is None or ys is None:
        return None
    a, b = _by_seed(control), _by_seed(treatment)
    measured = (
        f"{label(control[0])} {metric.spread(control)} → {label(treatment[0])} "
        f"{metric.spread(treatment)}"
    )
    data = tuple((r.label, metric.read(r)) for r in (*control, *treatment))
    if a is not None and b is not None and set(a) == set(b) and len(a) >= 2:
        seeds = _seed_order(a)
        diffs = [_known(metric, b[k]) - _known(metric, a[k]) for k in seeds]
        if len(diffs) <= 10:
            measured += "; per seed: " + ", ".join(metric.show_difference(d) for d in diffs)
        s = summarize(diffs)
        # a difference of two values on grids: at least both roundings
        floor = math.hypot(metric.floor(control), metric.floor(treatment))
        sd = max(s.sd or 0.0, floor)
        return Estimate(
            effect=s.mean,
            se=sd / math.sqrt(len(diffs)),
            df=len(diffs) - 1,
            n=len(diffs),
            replicate="seeds",
            method="paired by seed, t interval of the per-seed differences"
            + (_AT_FLOOR if sd == floor > 0 else ""),
            measured=measured,
            data=data,
            power_design="one_sample",
            sd=sd,
            seeds=len(diffs),
            per_seed=tuple(diffs),
        )
    effect = float(np.mean(ys) - np.mean(xs))
    if len(xs) >= 2 and len(ys) >= 2:
        se, df = welch_se_df(ys, xs)
        sx = max(_sd(xs), metric.floor(control))
        sy = max(_sd(ys), metric.floor(treatment))
        floored = sx > _sd(xs) or sy > _sd(ys)
        if floored:  # an arm's spread below its grid's rounding: the rounding instead
            se_x, se_y = sx / math.sqrt(len(xs)), sy / math.sqrt(len(ys))
            se, df = math.hypot(se_x, se_y), welch_df(se_x, len(xs) - 1, se_y, len(ys) - 1)
        return Estimate(
            effect=effect,
            se=se,
            df=df,
            n=min(len(xs), len(ys)),
            replicate="seeds",
            method="unpaired (the arms' seeds differ), Welch's interval"
            + (_AT_FLOOR if floored else ""),
            measured=measured,
            data=data,
            power_design="two_sample",
            sd=math.sqrt((sx**2 + sy**2) / 2),
            seeds=min(len(xs), len(ys)),
        )
    return Estimate(
        effect=effect,
        se=None,
        df=math.nan,
        n=min(len(xs), len(ys)),
        replicate="seeds",
        method="one run per condition",
        measured=measured,
        data=data,
        why_no_interval=(
            "one run per condition: the spread over training seeds is unknown, so there is no "
            "interval; run at least 2 seeds per condition"
        ),
    )


@dataclass(frozen=True)
class Trend:
    """The slope of the metric on ``x`` (a function of the swept ``option``, e.g. log2 m) over
    runs whose configs differ only in that option and the seed; ``x_text`` names x and
    ``levels_name`` its values in a finding's method ("log2 m", "batch sizes")."""

    option: str
    x: Callable[[RunData], float | None] = field(repr=False, compare=False)
    x_text: str = ""
    levels_name: str = "levels"

    @property
    def text(self) -> str:
        return (
            f"trend: least-squares slope on {self.x_text} over every run (seeds included), "
            "t interval with points − 2 degrees of freedom"
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        out = []
        for series in _groups(runs, (SEED_KEY, self.option)):
            levels = {x for r in series if (x := self.x(r)) is not None}
            if len(levels) >= 2:
                out.append(Unit(name(series, (SEED_KEY, self.option)), series))
        return out

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        points = [(self.x(r), metric.value(r)) for r in unit.runs]
        if any(x is None or y is None for x, y in points):
            return None
        xs = [float(x) for x, _ in points if x is not None]
        ys = [float(y) for _, y in points if y is not None]
        return _slope_estimate(
            xs,
            ys,
            f"slope on {self.x_text} over {len(xs)} runs at {len(set(xs))} {self.levels_name}",
            measured=_by_level(unit.runs, self.x, metric),
            data=tuple((r.label, metric.read(r)) for r in unit.runs),
            floor=metric.floor(unit.runs),
        )


@dataclass(frozen=True)
class Threshold:
    """Where the metric starts to rise with ``x`` (a function of the swept ``option``): the
    two-segment fit flat below a break, rising linearly above it, one offset per seed
    (:func:`cl_diag.measurement.stats.hinge_fit`), over runs whose configs differ only in
    that option and the seed; the effect is the break − ``reference`` (a run's predicted
    threshold, the same for every run of the unit) with the profile-likelihood interval of
    the break (:func:`cl_diag.measurement.stats.hinge_interval`, df = runs − seeds − 2), at
    whatever confidence the finding is judged."""

    option: str
    x: Callable[[RunData], float | None] = field(repr=False, compare=False)
    reference: Callable[[RunData], float | None] = field(repr=False, compare=False)
    reference_text: str = ""
    x_text: str = ""
    levels_name: str = "levels"
    aside: Callable[[Sequence[RunData]], str] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def text(self) -> str:
        return (
            f"threshold: the least-squares two-segment fit of the metric on {self.x_text} over "
            "every run (flat below a break, linear rising above it, one offset per seed), the "
            f"break against {self.reference_text}, its profile-likelihood (F) interval with "
            "runs − seeds − 2 degrees of freedom"
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        out = []
        for series in _groups(runs, (SEED_KEY, self.option)):
            levels = {x for r in series if (x := self.x(r)) is not None}
            if len(levels) >= 3:
                out.append(Unit(name(series, (SEED_KEY, self.option)), series))
        return out

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        points = [(self.x(r), metric.value(r)) for r in unit.runs]
        refs = {self.reference(r) for r in unit.runs}
        if any(x is None or y is None for x, y in points) or len(refs) != 1:
            return None
        (ref,) = refs
        if ref is None:
            return None
        xs = [float(x) for x, _ in points if x is not None]
        ys = [float(y) for _, y in points if y is not None]
        seeds = [repr(r.seed) for r in unit.runs]
        levels = tuple(sorted(set(xs)))
        per_level = min(xs.count(level) for level in levels)
        data = tuple((r.label, metric.read(r)) for r in unit.runs)
        by_level = _by_level(unit.runs, self.x, metric)
        try:
            fit = hinge_fit(xs, ys, seeds)
        except ValueError as exc:
            return Estimate(
                effect=None,
                se=None,
                df=math.nan,
                n=len(set(seeds)),
                replicate="seeds",
                method="two-segment fit",
                measured=by_level,
                data=data,
                why_no_interval=f"too few runs for a two-segment fit: {exc}",
            )
        lo, hi = hinge_interval(fit)
        se = (hi - lo) / (2.0 * t_quantile(fit.df))

        def interval(confidence: float) -> tuple[float, float]:
            a, b = hinge_interval(fit, confidence)
            return a - ref, b - ref

        return Estimate(
            effect=fit.break_ - ref,
            se=se,
            df=fit.df,
            n=len(set(seeds)),
            replicate="seeds",
            method=(
                f"two-segment fit on {self.x_text} over {len(xs)} runs at {len(levels)} "
                f"{self.levels_name} and {len(set(seeds))} seeds (an offset per seed), the "
                f"profile-likelihood interval of the break (F test, df {fit.df})"
            ),
            measured=(
                f"break at {self.x_text} = {fmt(fit.break_)} [{fmt(lo)}, {fmt(hi)}] (95 %) "
                f"against {self.reference_text} = {fmt(ref)}; slope above it "
                f"{fmt(fit.slope)}; by level: {by_level}"
                + (f"; {self.aside(unit.runs)}" if self.aside is not None else "")
            ),
            data=data,
            levels=levels,
            seeds=per_level,
            interval_at=interval,
            why_no_power=(
                "No seed count for 80 % power is computed for a break (its interval is a "
                "profile likelihood, not effect ± t se): more seeds or levels near the break "
                "narrow it."
            ),
        )


def _slope_estimate(
    xs: Sequence[float],
    ys: Sequence[float],
    x_text: str,
    *,
    measured: str,
    data: tuple[tuple[str, float | None], ...],
    floor: float = 0.0,
) -> Estimate:
    """The slope of ys on xs (one point per run or per seed's difference) as an Estimate;
    ``x_text`` says what the slope is ("slope on log2 m over 9 runs at 3 batch sizes");
    ``floor`` the smallest residual sd the points can show (:meth:`Metric.floor`): below it,
    se = floor / √Sxx."""
    t = trend(xs, ys)
    se, resid_sd, floored = t.se, t.resid_sd, False
    if se is not None and resid_sd is not None and resid_sd < floor:
        x = np.asarray(xs, dtype=np.float64)
        resid_sd, floored = floor, True
        se = floor / math.sqrt(float(((x - x.mean()) ** 2).sum()))
    levels = tuple(sorted(set(xs)))
    per_level = min(sum(1 for x in xs if x == level) for level in levels)
    method = (
        f"{x_text}, t interval"
        + (f"; permutation p (no trend) = {t.p_value:.3g}" if t.p_value is not None else "")
        + (_AT_FLOOR if floored else "")
    )
    return Estimate(
        effect=t.slope,
        se=se,
        df=t.df if t.se is not None else math.nan,
        n=t.points,
        replicate="runs",
        method=method,
        measured=measured,
        data=data,
        power_design="slope" if t.se is not None else None,
        sd=resid_sd,
        levels=levels,
        seeds=per_level,
        why_no_interval="" if t.se is not None else "fewer than 3 points: no interval for a slope",
    )


def _by_level(runs: Sequence[RunData], x: Callable[[RunData], float | None], metric: Metric) -> str:
    """'16: 0.18, 32: 0.157 (means of 3 seeds)': the mean raw value at each level, the level
    printed as the option's value (2^x for log2 m)."""
    levels = sorted({v for r in runs if (v := x(r)) is not None})
    parts = []
    for level in levels:
        values = [float(v) for r in runs if x(r) == level and (v := metric.read(r)) is not None]
        if values:
            parts.append(f"{_level_text(runs, x, level)}: {metric.show(float(np.mean(values)))}")
    reps = max((sum(1 for r in runs if x(r) == level) for level in levels), default=0)
    return ", ".join(parts) + (f" (means of {reps} seeds)" if reps > 1 else "")


def _level_text(runs: Sequence[RunData], x: Callable[[RunData], float | None], level: float) -> str:
    """The option value behind a level: "m 16" for log2 m, "α 0.1" for α, else the level."""
    for r in runs:
        if x(r) != level:
            continue
        if r.batch_size is not None and level == r.log2_batch:
            return f"m {fmt(r.batch_size)}"
        if level == r.alpha:
            return f"α {fmt(level)}"
    return fmt(level)


@dataclass(frozen=True)
class PairedTrend:
    """The slope on ``x`` (a function of the swept ``option``) of the per-seed differences of a
    :class:`Paired` design at each level: e.g. the VRN gain against log2 m. Each level needs
    one control and one treatment group (after the pair's ``prefer``) with the same seeds."""

    pair: Paired
    option: str
    x: Callable[[RunData], float | None] = field(repr=False, compare=False)
    x_text: str = ""
    levels_name: str = "levels"

    @property
    def text(self) -> str:
        return (
            f"trend of paired differences: at each {self.x_text}, {self.pair.treatment.requires}"
            f" − {self.pair.control.requires} per seed; the least-squares slope of those "
            "differences, t interval"
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        out = []
        for series in _groups(runs, (SEED_KEY, self.option, *self.pair.options)):
            levels = []
            for bucket in _groups(series, (SEED_KEY, *self.pair.options)):
                control, treatments = self.pair._arms(bucket)
                x = self.x(bucket[0])
                if control is None or len(treatments) != 1 or x is None:
                    continue
                levels.append((x, control, treatments[0]))
            if len({lv[0] for lv in levels}) >= 2 and len(levels) == len({lv[0] for lv in levels}):
                levels.sort(key=lambda lv: lv[0])
                runs_ = tuple(r for _, c, t in levels for r in (*c, *t))
                out.append(
                    Unit(
                        name(series, (SEED_KEY, self.option, *self.pair.options)),
                        runs_,
                        tuple(r for _, c, _t in levels for r in c),
                        tuple(r for _, _c, t in levels for r in t),
                        tuple(levels),
                    )
                )
        return out

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        xs: list[float] = []
        ys: list[float] = []
        parts = []
        for x, control, treatment in unit.levels:
            a, b = _by_seed(control), _by_seed(treatment)
            if a is None or b is None or set(a) != set(b):
                return None
            diffs = []
            for k in _seed_order(a):
                va, vb = metric.value(a[k]), metric.value(b[k])
                if va is None or vb is None:
                    return None
                diffs.append(vb - va)
            xs += [x] * len(diffs)
            ys += diffs
            level = _level_text(control, self.x, x)
            parts.append(f"{level}: {metric.show_difference(float(np.mean(diffs)))}")
        measured = (
            f"{self.pair.treatment.requires} − {self.pair.control.requires} by level: "
            + ", ".join(parts)
        )
        data = tuple((r.label, metric.read(r)) for r in unit.runs)
        over = (
            f"slope of the paired differences on {self.x_text} over {len(xs)} seed pairs at "
            f"{len(set(xs))} {self.levels_name}"
        )
        floor = math.hypot(metric.floor(unit.control), metric.floor(unit.treatment))
        return _slope_estimate(xs, ys, over, measured=measured, data=data, floor=floor)


@dataclass(frozen=True)
class OneSample:
    """The metric against a ``reference`` value (on the analysis scale; a function of a run:
    δ, 0.5, 1 − β*): over the seeds of one config the t interval of the per-seed deviations;
    with ``per_run``, one run's deviation with its image-sampling error (``Metric.run_se``)."""

    reference: Callable[[RunData], float | None] = field(repr=False, compare=False)
    reference_text: str = ""
    per_run: bool = False
    #: what to add to the measured text (e.g. another variant's prediction beside this one)
    aside: Callable[[Sequence[RunData]], str] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def text(self) -> str:
        return (
            f"one sample against {self.reference_text}: the t interval of the per-seed "
            "deviations over the seeds of one config"
            + (
                "; one run: its deviation with the sampling error of its analysed images"
                if self.per_run
                else "; one run: no interval (the seeds are the replicates)"
            )
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        return [Unit(name(g, (SEED_KEY,)), g) for g in _groups(runs, (SEED_KEY,))]

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        runs = unit.runs
        deviations = []
        for r in runs:
            value, ref = metric.value(r), self.reference(r)
            if value is None or ref is None:
                return None
            deviations.append(value - ref)
        data = tuple((r.label, metric.read(r)) for r in runs)
        measured = f"{metric.spread(runs)}"
        if self.aside is not None:
            measured += f"; {self.aside(runs)}"
        if len(runs) >= 2:
            per_seed = ", ".join(metric.show(metric.read(r)) for r in runs)
            s = summarize(deviations)
            floor = metric.floor(runs)
            sd = max(s.sd or 0.0, floor)
            return Estimate(
                effect=s.mean,
                se=sd / math.sqrt(len(deviations)),
                df=len(deviations) - 1,
                n=len(deviations),
                replicate="seeds",
                method="t interval over seeds" + (_AT_FLOOR if sd == floor > 0 else ""),
                measured=f"{measured} (per seed: {per_seed})" if len(runs) <= 10 else measured,
                data=data,
                power_design="one_sample",
                sd=sd,
                seeds=len(deviations),
                per_seed=tuple(deviations),
            )
        run = runs[0]
        if self.per_run and metric.run_se is not None:
            se = metric.run_se(run)
            if math.isfinite(se):
                return Estimate(
                    effect=deviations[0],
                    se=se,
                    df=math.inf,
                    n=run.n,
                    replicate="images",
                    method=f"one run: {metric.run_se_text}",
                    measured=measured,
                    data=data,
                )
        return Estimate(
            effect=deviations[0],
            se=None,
            df=math.nan,
            n=1,
            replicate="seeds",
            method="one run",
            measured=measured,
            data=data,
            why_no_interval=(
                "one run: the claim is about what training gives, so the seeds are the "
                "replicates; run at least 2 seeds"
            ),
        )


@dataclass(frozen=True)
class SeedShare:
    """The share of seeds whose own paired effect (``paired``'s per-seed difference on the
    analysis scale) ``reaches`` the source's figure, less ``reference``, with the exact
    (Clopper-Pearson) interval of the share: for a seed distribution with two modes (VRN
    reaches the figure in some seeds and breaks alignment in others) a mean and a t interval
    describe no seed, a count does. ``tally`` adds counts of the per-seed runs to the
    finding's measured text (e.g. the seeds whose alignment breaks)."""

    paired: Paired
    reaches: Callable[[float], bool] = field(repr=False, compare=False)
    reaches_text: str = ""
    reference: float = 0.5
    tally: Callable[[dict[str, RunData], dict[str, RunData]], str] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def text(self) -> str:
        return (
            f"the share of seeds (paired: {self.paired.treatment.requires} against "
            f"{self.paired.control.requires}) whose own effect reaches {self.reaches_text}, "
            f"less {fmt(100 * self.reference)} %, with its exact (Clopper-Pearson) interval"
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        return self.paired.units(runs, name)

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        if _values(metric, unit.control) is None or _values(metric, unit.treatment) is None:
            return None
        a, b = _by_seed(unit.control), _by_seed(unit.treatment)
        data = tuple((r.label, metric.read(r)) for r in unit.runs)
        if a is None or b is None or set(a) != set(b) or len(a) < 2:
            return Estimate(
                effect=None,
                se=None,
                df=math.nan,
                n=len(unit.treatment),
                replicate="seeds",
                method="share of seeds",
                measured=metric.spread(unit.runs),
                data=data,
                why_no_interval=(
                    "a share of seeds needs both arms at the same seeds, at least 2 of them"
                ),
            )
        seeds = _seed_order(a)
        diffs = [_known(metric, b[k]) - _known(metric, a[k]) for k in seeds]
        k, n = sum(self.reaches(d) for d in diffs), len(diffs)
        lo, hi = share_interval(k, n)

        def interval(confidence: float) -> tuple[float, float]:
            low, high = share_interval(k, n, confidence)
            return low - self.reference, high - self.reference

        measured = f"{k} of {n} seeds reach {self.reaches_text}"
        if self.tally is not None:
            measured += f"; {self.tally(a, b)}"
        measured += "; per seed: " + ", ".join(metric.show_difference(d) for d in diffs)
        return Estimate(
            effect=k / n - self.reference,
            se=(hi - lo) / (2.0 * t_quantile(n - 1)),
            df=n - 1,
            n=n,
            replicate="seeds",
            method=(
                f"share of {n} seeds, exact (Clopper-Pearson) interval; its 95 % half-width "
                "over t orders Holm's family and gives the replication odds"
            ),
            measured=measured,
            data=data,
            seeds=n,
            interval_at=interval,
            why_no_power=(
                "No seed count for 80 % power is computed for a share of seeds: each seed is "
                "one Bernoulli trial, and more seeds narrow the exact interval"
            ),
        )


Design = Paired | Trend | PairedTrend | OneSample | Threshold | SeedShare


@dataclass(frozen=True)
class Precondition:
    """A requirement on the data of a unit for the claim to be testable there: ``requires``
    in words (the docs), ``unmet`` the reason the unit fails it (None: met); a unit that fails
    it is *not applicable here*, never contradicted."""

    requires: str
    unmet: Callable[[Unit, Estimate], str | None] = field(repr=False, compare=False)


#: how a claim's effect is printed: exp(x) − 1 as a percentage, exp(x) as a factor, x as
#: percentage points, x as a number
SHOWS = ("relative", "factor", "pp", "number")
KINDS = ("prediction", "description")


@dataclass(frozen=True)
class Claim:
    """One claim of the registry. A *prediction* gets a verdict; a *description* (a quantity
    no source predicts for these runs) only its estimate and interval.

    ``statement`` says the claim; ``source`` where it is made; ``domain`` which runs it is
    about at all (units whose runs fail it are left out silently: the claim does not speak of
    them); ``scope`` the source's scope (a unit failing it is *not applicable*, with the
    reason), ``at_scope`` what that scope, "tuned" and the like mean operationally; ``metric``
    and ``design`` what is measured and how the runs are compared; ``expect`` the expected
    direction ("increase", "decrease", "agree"); ``margin`` the minimum relevant effect on
    the analysis scale, ``margin_text`` it as printed and ``margin_why`` its one-line
    justification; ``effect`` says what the effect is, ``shows`` how it prints;
    ``precondition`` a requirement on the data (*not applicable here* when unmet);
    ``figure`` the key of the figure that carries it.

    A directional claim has four outcomes (:func:`cl_diag.measurement.stats.verdict`): beyond
    the *claimed size* (``claimed``, the number the source gives on the analysis scale; by
    default the margin) it is supported, wholly short of it not borne out, beyond the margin
    the other way contradicted. ``arm_margin`` gives a unit its own margin where the source's
    size differs between the arms a unit can hold (e.g. Table 1's rows with and without VRN);
    ``claimed_text`` says the claimed size as printed when it is not the margin."""

    key: str
    statement: str
    source: Source
    kind: str
    metric: Metric
    design: Design
    effect: str
    shows: str
    expect: str | None = None
    margin: float | None = None
    margin_text: str = ""
    margin_why: str = ""
    domain: tuple[Condition, ...] = ()
    scope: tuple[Condition, ...] = ()
    at_scope: str = ""
    precondition: Precondition | None = None
    figure: str | None = None
    claimed: float | None = None
    claimed_text: str = ""
    arm_margin: Callable[[Unit], tuple[float, str] | None] | None = field(
        default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.key}: kind must be one of {KINDS}")
        if self.shows not in SHOWS:
            raise ValueError(f"{self.key}: shows must be one of {SHOWS}")
        if self.kind == "prediction" and (
            self.expect is None or self.margin is None or not self.margin > 0
        ):
            raise ValueError(f"{self.key}: a prediction needs an expectation and a margin > 0")
        if self.claimed is not None and (
            self.expect not in ("increase", "decrease")
            or self.margin is None
            or not self.claimed > -self.margin
        ):
            raise ValueError(
                f"{self.key}: a claimed size is for a directional claim, above −margin"
            )

    def margin_for(self, unit: Unit | None) -> tuple[float, str]:
        """The margin (analysis scale) and its text for one unit: the arm's own where the
        claim gives one (``arm_margin``), else the claim's."""
        if self.arm_margin is not None and unit is not None:
            own = self.arm_margin(unit)
            if own is not None:
                return own
        if self.margin is None:
            raise ValueError(f"{self.key}: a description has no margin")
        return self.margin, self.margin_text

    def claimed_for(self, unit: Unit | None) -> float | None:
        """The claimed size for one unit: the claim's ``claimed``, else the unit's margin
        (None for an agreement or a description)."""
        if self.expect not in ("increase", "decrease") or self.margin is None:
            return None
        return self.claimed if self.claimed is not None else self.margin_for(unit)[0]

    @property
    def title(self) -> str:
        return self.statement

    @property
    def minimum(self) -> float | None:
        """The minimum relevant effect on the analysis scale (the margin)."""
        return self.margin

    def display(self, x: float | None) -> float | None:
        """An effect (or interval end) on the analysis scale as it is printed."""
        if x is None or not math.isfinite(x):
            return x
        if self.shows in ("relative", "factor"):
            # a ratio beyond float range (an interval from a near-zero variance) is infinite
            grown = math.exp(x) if x < 709.0 else math.inf
            return grown - 1.0 if self.shows == "relative" and x < 709.0 else grown
        return x

    def show(self, x: float | None, *, sign: bool = True) -> str:
        """An effect on the analysis scale as text ("-63.2 %", "2.7×", "+1.2 pp", "0.031")."""
        value = self.display(x)
        if value is None or math.isnan(value):
            return MISSING
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        spec = "+.4g" if sign else ".4g"
        if self.shows == "relative":
            return f"{100.0 * value:{spec}} %"
        if self.shows == "factor":
            return f"{value:.4g}×"
        if self.shows == "pp":
            return f"{100.0 * value:{spec}} pp"
        return f"{value:{spec}}"


@dataclass(frozen=True)
class Identity:
    """A consistency check: an inequality that holds for any unit vectors (``formula``), so
    a measurement that breaks it beyond ``error`` (float rounding in exact mode, the sampling
    error of sampled pairs) has a bug. ``slack`` is its left side minus its right side on one
    layer's pair moments (>= 0), None when the layer lacks what it needs."""

    key: str
    statement: str
    source: Source
    formula: str
    slack: Callable[[LayerPairs], float | None] = field(repr=False, compare=False)
    error: Callable[[LayerPairs], float] = field(repr=False, compare=False)
    kind: str = "consistency"

    @property
    def title(self) -> str:
        return self.statement
