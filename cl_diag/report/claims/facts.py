"""What the claims read of a run: :class:`RunData`, made once from a typed result and its
:class:`~cl_diag.runconfig.RunConfig` (the pair moments of each layer, :class:`LayerPairs`;
the run's options, losses and analysed sizes), and the optimum facts a claim about an optimum
needs (the CCEM and SSEM optimum losses, whether Eq. 10 holds at full batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cl_diag.measurement.ssem import ssem_loss
from cl_diag.measurement.theory import sigmoid_optimum_loss
from cl_diag.report.runs import loss_layer
from cl_diag.result import Collapse, PairStats, Result, Ssem, TrainingLoss
from cl_diag.runconfig import RunConfig
from cl_diag.vocabulary import PairType

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
