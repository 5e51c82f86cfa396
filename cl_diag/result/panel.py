"""The theory panel's blocks of result.json (``theory``): the sources' closed forms at a run's
sizes (the ICML paper's Thm 5.1-5.5, Eq. 10 and the CCEM optimum of the sigmoid loss; the
SSEM of supervised-contrastive class collapse). Part of the one result model,
:mod:`cl_diag.result`, which reads and writes them with the rest."""

from __future__ import annotations

from dataclasses import dataclass

from cl_diag.io.records import Record, key, optional


@dataclass(frozen=True, kw_only=True)
class TheoryLoss(Record):
    """The training loss in the paper's framework: Def. 3.1 (``info_nce``) or Def. 3.2
    (``independently_additive``) with coefficients (c1, c2)."""

    name: str | None = None
    family: str | None = None
    c1: float | None = None
    c2: float | None = None


@dataclass(frozen=True, kw_only=True)
class Predicted(Record):
    """The full-batch optimum's mean positive and negative similarity (Thm 5.1: 1, -1/(n-1))."""

    positive_mean: float | None = None
    negative_mean: float | None = None


@dataclass(frozen=True, kw_only=True)
class VarianceBand(Record):
    """Thm 5.5, Eq. 11: Var[s_neg] in [(n-m)/((m-1)(n-1)^2), n(n-m)/((m-1)(n-1)^2)]."""

    n: int | None = None
    m: int | None = None
    lo: float | None = None
    hi: float | None = None


@dataclass(frozen=True, kw_only=True)
class Eq10(Record):
    """Example 5.4, Eq. 10: (1 + e^{t/(N-1)+b}) / (1 + e^{t-b}) < (N-2)/2 predicts
    excessive separation for the cross-view-only sigmoid loss."""

    N: int | None = optional()
    lhs: float | None = None
    rhs: float | None = None
    holds: bool | None = None


@dataclass(frozen=True, kw_only=True)
class Ccem(Record):
    """The constant-embedding-model optimum of the sigmoid loss (paper-notes 11.1):
    s_pos = 2x* - 1, s_neg = x* (N-2)/(N-1) - 1."""

    N: int | None = None
    x_star: float | None = None
    s_pos: float | None = None
    s_neg: float | None = None
    regime: str | None = None


@dataclass(frozen=True, kw_only=True)
class SigmoidPanel(Record):
    """The sigmoid loss's temperature t and bias b (paper sign, b = -b_SigLIP), Eq. 10 and
    the CCEM optimum at N = m."""

    t: float | None = None
    b: float | None = None
    eq10: Eq10 = key(factory=Eq10)
    ccem: Ccem = key(factory=Ccem)


@dataclass(frozen=True, kw_only=True)
class Condition(Record):
    """Thm 5.1 (iii) against Thm 5.3 (8) for a Def. 3.2 loss with (c1, c2) = (1, 0):
    phi'(1) against rhs = ((N-2)/(2(N-1))) psi'(-1/(N-1))."""

    N: int | None = None
    dphi_at_1: float | None = None
    rhs: float | None = None
    verdict: str | None = None


@dataclass(frozen=True, kw_only=True)
class LayerCheck(Record):
    """Per layer: the Thm 5.2 ceiling beside the measured positive mean, and the validity
    caveats: d < n_ref - 1 (no simplex fits) and d < m - 1 (not even per batch)."""

    d: int | None = None
    alignment_ceiling: float | None = None
    positive_mean: float | None = None
    caveat: bool = False
    d_below_m_minus_1: bool = False


@dataclass(frozen=True, kw_only=True)
class FullBatchSigmoid(Record):
    """The sigmoid loss's Eq. 10 and CCEM optimum at N = n_ref."""

    eq10: Eq10 | None = optional()
    ccem: Ccem | None = optional()


@dataclass(frozen=True, kw_only=True)
class FullBatch(Record):
    """The theory panel's N-dependent entries evaluated for the full batch, N = n_ref (the
    top-level ones take one fixed mini-batch, N = m): which theorem applies (Thm 5.1 (iii) or
    Thm 5.3 for a Def. 3.2 loss with (c1, c2) = (1, 0)), its predicted means, the condition,
    and for the sigmoid loss Eq. 10 and the CCEM optimum at N = n_ref."""

    N: int | None = None
    theorem: str | None = None
    predicted: Predicted = key(factory=Predicted)
    condition: Condition | None = optional()
    sigmoid: FullBatchSigmoid | None = optional()

    @property
    def eq10(self) -> Eq10 | None:
        return None if self.sigmoid is None else self.sigmoid.eq10

    @property
    def ccem(self) -> Ccem | None:
        return None if self.sigmoid is None else self.sigmoid.ccem


@dataclass(frozen=True, kw_only=True)
class SsemPredicted(Record):
    """The SSEM optimum's same-class and between-class similarities and within-class variance."""

    s_w: float | None = None
    s_b: float | None = None
    within_class_variance: float | None = None


@dataclass(frozen=True, kw_only=True)
class Ssem(Record):
    """The simplex-to-simplex embedding model of a ``supcl`` run (paper-notes 11.3;
    cl_diag.measurement.theory.ssem_panel): on the balanced batch of m classes x n instances
    x p views at temperature tau, the collapse threshold alpha_c and the optimum beta* (1:
    class collapse) with its predicted s_w, s_b and within-class variance 1 - beta*; the caveat
    ``d_below_mn_minus_1`` (the model needs d >= mn - 1); ``alpha_split``, the alpha_s below
    which the SSEM is not the optimum of variant B (its same-instance views part), and
    ``outside_ssem_region`` (alpha < alpha_s: the SSEM's prediction does not apply;
    docs/ssem.md)."""

    alpha: float | None = None
    tau: float | None = None
    m: int | None = None
    n: int | None = None
    p: int | None = None
    variant: str | None = None
    alpha_c: float | None = None
    beta_star: float | None = None
    regime: str | None = None
    predicted: SsemPredicted = key(factory=SsemPredicted)
    d_below_mn_minus_1: bool = False
    # optional: results written before they existed (with ``small_alpha``, now kept in extra)
    # read and write back byte for byte
    alpha_split: float | None = optional("alpha_s: below it the SSEM is not the optimum")
    outside_ssem_region: bool | None = optional("alpha < alpha_s (docs/ssem.md)")


@dataclass(frozen=True, kw_only=True)
class Theory(Record):
    """The theory panel (cl_diag.measurement.theory.theory_panel): which theorem of Lee et
    al. (ICML 2025) applies to the run's loss and what it predicts, with per-layer checks."""

    n_ref: int | None = None
    batch_size: int | None = key("m, the training mini-batch size", default=None)
    loss: TheoryLoss = key(factory=TheoryLoss)
    theorem: str | None = key("e.g. 5.1(i), 5.1(ii), 5.1(iii), 5.3; null: none", default=None)
    statement: str = ""
    predicted: Predicted = key(factory=Predicted)
    variance_band: VarianceBand | None = None
    within_batch_optimum: float | None = key("-1/(m-1)", default=None)
    sigmoid: SigmoidPanel | None = None
    loss_layer: str | None = key("the layer the loss sees; null: every layer", default=None)
    condition: Condition | None = optional()
    full_batch: FullBatch | None = optional("the N-dependent entries at N = n_ref")
    ssem: Ssem | None = optional("supcl runs with balanced batches")
    layers: dict[str, LayerCheck] | None = optional()

    @property
    def N(self) -> int | None:
        """The number of pairs the top-level theorem, condition and sigmoid entries were
        evaluated at: one fixed mini-batch (N = m) when m >= 3, else n_ref."""
        for block in (
            self.condition,
            self.sigmoid.ccem if self.sigmoid else None,
            self.sigmoid.eq10 if self.sigmoid else None,
        ):
            if block is not None and block.N is not None:
                return block.N
        if self.batch_size is not None and self.batch_size >= 3:
            return self.batch_size
        return self.n_ref
