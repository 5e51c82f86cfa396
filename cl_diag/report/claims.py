"""The claims registry (issue 21): every claim the reports test, as data.

One entry per claim (:class:`~cl_diag.report.claim_model.Claim`, or
:class:`~cl_diag.report.claim_model.Identity` for a consistency check): what it says, where
(the ICML 2025 paper of Lee, Lim, Lee and Sohn, the authors' OpenReview rebuttal, or the SSEM
paper of Lee, Oh, Lee et al. on supervised-contrastive class collapse), which runs it applies
to, what is measured, how runs are compared, the expected direction and the minimum relevant
effect with its justification. :func:`cl_diag.report.findings.run_findings` is the one
evaluator; ``docs/claims.md`` is :func:`claims_markdown` of this registry
(``python tools/claims_doc.py`` writes it; a test fails when it is stale).

Adding a claim is one entry here and one case in ``tests/test_claims.py``.

Three kinds of entry:

* **predictions** -- falsifiable statements a source makes at a scope; they get a verdict;
* **descriptions** -- quantities no source predicts for these runs (the alignment change
  under VRN, the distance of a trained net's variance from the Thm 5.5 band); they get an
  estimate and an interval, no verdict;
* **consistency checks** -- identities that hold for any unit vectors (the Thm 5.2 ceiling,
  Lemmas C.6-C.8); they can fail only through a measurement bug.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from cl_diag.measurement.collapse import COLLAPSE_EPSILON
from cl_diag.measurement.convergence import GAP, PLATEAU, RESOLUTION, plateaued
from cl_diag.measurement.pairs import EXCESS_MARGIN
from cl_diag.measurement.ssem import ssem_alpha_split, ssem_other_variant
from cl_diag.measurement.stats import FRAGILE, pair_mean_se, pair_var_se
from cl_diag.report.claim_model import (
    WORKS,
    Claim,
    Condition,
    Estimate,
    Identity,
    LayerPairs,
    Metric,
    OneSample,
    Paired,
    PairedTrend,
    Precondition,
    RunData,
    SeedShare,
    Source,
    Threshold,
    Trend,
    Unit,
)
from cl_diag.report.document import fmt
from cl_diag.runconfig import MIN_TUNING_GRID, REBUTTAL_LAMBDA_GRID

__all__ = ["CLAIMS", "claims_markdown"]


# ---- metrics ------------------------------------------------------------------------------


def _share_se(run: RunData) -> float:
    """Sampling error of one run's share p of cross-view negatives below δ: Hoeffding's
    U-statistic bound sqrt(2 p(1 - p) / n) over its n analysed instances (the share is a mean
    over pairs, like :func:`cl_diag.measurement.stats.pair_mean_se`), with p shrunk to
    (p n/2 + 2) / (n/2 + 4) (Agresti-Coull) so that a share of 0 or 1 keeps an error."""
    p, n = _share_below(run), run.n
    if p is None or n < 2:
        return math.inf
    eff = n / 2.0
    shrunk = (p * eff + 2.0) / (eff + 4.0)
    return math.sqrt(shrunk * (1.0 - shrunk) / eff)


def _mean_se(run: RunData) -> float:
    return pair_mean_se(run.neg_var or 0.0, run.n)


def _log_var_se(run: RunData) -> float:
    """SE of ln(variance) of one run: SE(variance) / variance (delta method)."""
    if run.neg_var is None or run.neg_mean is None or not run.neg_var > 0:
        return math.inf
    return pair_var_se(run.neg_mean, run.neg_var, run.neg_largest or 1.0, run.n) / run.neg_var


NEG_VAR = Metric(
    "variance of the cross-view negative similarities (loss layer)",
    lambda r: r.neg_var,
    log=True,
    unit="variance",
    run_se=_log_var_se,
    run_se_text=(
        "the sampling error of its analysed images (conservative U-statistic bound on the "
        "variance, delta method on its log)"
    ),
)
NEG_STD = Metric(
    "standard deviation of the cross-view negative similarities",
    lambda r: r.neg_std,
    log=True,
    unit="std",
)
NEG_MEAN = Metric(
    "mean cross-view negative similarity (loss layer)",
    lambda r: r.neg_mean,
    unit="similarity",
    run_se=_mean_se,
    run_se_text="the sampling error of its analysed images (Hoeffding's U-statistic bound)",
)


def _pairs_step(run: RunData) -> float | None:
    """The grid of a share of the loss layer's cross-view negative pairs: 1/pairs."""
    layer = next((lp for lp in run.layers if lp.name == run.layer), None)
    count = layer.cross.count if layer is not None and layer.cross is not None else 0
    return 1.0 / count if count else None


def _test_step(run: RunData) -> float | None:
    """The grid of an accuracy on the test split: 1/N test images."""
    return 1.0 / run.n_test if run.n_test else None


#: how far below δ a negative must lie to count as over-separated (one home: the measurement's
#: margin count uses the same ε)
BELOW_DELTA_EPSILON = EXCESS_MARGIN


def _share_below(r: RunData) -> float | None:
    """The share of cross-view negatives below δ − ε as the claims read it (ε =
    :data:`BELOW_DELTA_EPSILON`: at a simplex ETF whether s < δ is rounding and convergence
    residue): the measured share below δ − ε where the result records it
    (``excessive_margin_count``); in results written before it was measured, 0 where every
    negative lies at or above δ − ε, 1 where every one lies below it, else the recorded share
    below δ (a trained encoder's negatives spread over tenths, so the few within ε of δ do not
    move it)."""
    if r.neg_margin_ratio is not None:
        return r.neg_margin_ratio
    if r.neg_ratio is None:
        return None
    if r.neg_min is not None and r.neg_min >= r.delta - BELOW_DELTA_EPSILON:
        return 0.0
    if r.neg_max is not None and r.neg_max < r.delta - BELOW_DELTA_EPSILON:
        return 1.0
    return r.neg_ratio


NEG_SHARE = Metric(
    "share of cross-view negatives below δ = −1/(n−1) (loss layer; 0 when all lie at or above "
    f"δ − {fmt(BELOW_DELTA_EPSILON)})",
    _share_below,
    unit="share",
    step=_pairs_step,
    run_se=_share_se,
    run_se_text=(
        "the sampling error of its analysed images (Hoeffding's bound with n/2 effective "
        "pairs, Agresti-Coull shrinkage)"
    ),
)
NEG_OFF_DELTA = Metric(
    "distance of the mean cross-view negative similarity from δ (loss layer)",
    lambda r: None if r.neg_mean is None else abs(r.neg_mean - r.delta),
    unit="similarity",
)
POS_MEAN = Metric("mean positive similarity (loss layer)", lambda r: r.pos_mean, unit="similarity")
CCEM_X = Metric(
    "x = (1 + mean positive similarity)/2 at the loss layer (the CCEM's coordinate: s_pos = "
    "2x − 1, 1 at the simplex ETF, 0 antipodal)",
    lambda r: None if r.pos_mean is None else (1.0 + r.pos_mean) / 2.0,
    unit="similarity",
)
TOP1 = Metric(
    "linear-probe top-1 on the test split", lambda r: r.top1, unit="accuracy", step=_test_step
)
INSTANCE_WITHIN_CLASS = Metric(
    "within-class variance of the instance means (u_i + v_i)/2 at the loss layer (the views' "
    "within-class variance less their spread (1 − s_pos)/2, mean over classes; docs/ssem.md)",
    lambda r: r.instance_within_class_variance,
    unit="variance",
)


# ---- conditions ----------------------------------------------------------------------------


def _loss(r: RunData) -> str:
    return f"loss {r.config.loss or 'not recorded'}"


def _vrn_text(r: RunData) -> str:
    w = r.vrn
    return "VRN with λ not recorded" if w is None else f"VRN λ = {fmt(w)}"


RECORDED = Condition(
    "a recorded training config",
    lambda r: r.recorded,
    lambda r: "no training config",
)
FRAMEWORK = Condition(
    "a loss of the paper's framework (Def. 3.1 or 3.2)",
    lambda r: r.loss_family is not None,
    _loss,
)
NETWORK = Condition(
    "a trained encoder (not free embedding vectors)",
    lambda r: not r.free_embeddings,
    lambda r: "free embedding vectors",
)
FREE = Condition(
    "free embedding vectors (no encoder)",
    lambda r: r.free_embeddings,
    lambda r: "a trained encoder",
)
VRN_OFF = Condition("no VRN", lambda r: not r.config.vrn.on, _vrn_text)
VRN_ON = Condition("VRN", lambda r: r.config.vrn.on, lambda r: "no VRN")
SIMCLR = Condition("the SimCLR loss", lambda r: r.config.loss == "simclr", _loss)
SIGMOID = Condition("the sigmoid loss", lambda r: r.config.loss == "sigmoid", _loss)
FIG4_LOSSES = Condition(
    "SimCLR, DCL or DHEL (the losses of Fig. 4)",
    lambda r: r.config.loss in ("simclr", "dcl", "dhel"),
    _loss,
)
TOY_N = Condition(
    "n = 4 instances (the rebuttal's toy)",
    lambda r: r.n_ref == 4,
    lambda r: f"n = {fmt(r.n_ref)}",
)
DELTA_OF_TRAINING_SET = Condition(
    "δ of the training-set size (n_ref = the recorded n_train)",
    lambda r: r.config.n_train is None or r.config.n_train == r.n_ref,
    lambda r: f"n_ref = {fmt(r.n_ref)}, n_train = {fmt(r.config.n_train)}",
)
CROSS_ONLY = Condition(
    "cross-view negatives only (c2 = 0)",
    lambda r: not r.within_view,
    lambda r: "within-view negatives too",
)
EQ10 = Condition(
    "Eq. 10 to hold at N = n (the full batch of Example 5.4)",
    lambda r: r.eq10_full is True,
    lambda r: "Eq. 10 fails" if r.eq10_full is False else "no Eq. 10 in the theory panel",
)
EQ10_CONTROL = Condition(
    "Eq. 10 to hold at N = n for the cross-view-only runs",
    lambda r: r.eq10_full is True,
    lambda r: "Eq. 10 fails" if r.eq10_full is False else "no Eq. 10 in the theory panel",
    arm="control",
)
EQ10_FAILS = Condition(
    "Eq. 10 to fail at N = n (Thm 5.1(iii))",
    lambda r: r.eq10_full is False,
    lambda r: "Eq. 10 holds" if r.eq10_full is True else "no Eq. 10 in the theory panel",
)
FULL_BATCH = Condition(
    "the full batch (m = n: Example 5.4 and Thm 5.1 concern the full-batch loss, Eq. 1)",
    lambda r: r.config.batch_size is not None and r.config.batch_size >= r.n_ref,
    lambda r: f"mini-batches of m = {fmt(r.config.batch_size)} < n = {fmt(r.n_ref)}",
)
D_AT_LEAST_N_MINUS_1 = Condition(
    "d ≥ n − 1 (room for the simplex ETF of n points, Thm 5.1)",
    lambda r: r.d is not None and r.d >= r.n_ref - 1,
    lambda r: f"d = {fmt(r.d)} < n − 1 = {fmt(r.n_ref - 1)}",
)
D_AT_LEAST_N = Condition(
    "d ≥ n (Thm 5.3 and Example 5.4 need room for n + 1 directions)",
    lambda r: r.d is not None and r.d >= r.n_ref,
    lambda r: f"d = {fmt(r.d)} < n = {fmt(r.n_ref)}",
)


def _tuned(r: RunData) -> bool:
    return r.config.vrn.untuned_reason is None


TUNED = Condition(
    f"a tuned λ (vrn_tuning: chosen on a non-test split from ≥ {MIN_TUNING_GRID} values)",
    _tuned,
    lambda r: r.config.vrn.untuned_reason or "",
    arm="treatment",
)
INSTANCE_MEANS = Condition(
    "the within-class variance of the instance means (measured since this claim read it)",
    lambda r: r.instance_within_class_variance is not None,
    lambda r: "a result written before it was measured: analyse the run again",
)
HAS_SSEM = Condition(
    "a supcl run with the SSEM panel and the measured class collapse",
    lambda r: (
        r.ssem_prediction is not None
        and r.ssem is not None
        and r.ssem.alpha_c is not None
        and r.within_class_variance is not None
    ),
    lambda r: "no SSEM panel",
)
BALANCED = Condition(
    "balanced batches (the SSEM's batch of m classes × n instances)",
    lambda r: r.config.balanced_batch,
    lambda r: "unbalanced batches",
)
SSEM_FITS = Condition(
    "d ≥ mn − 1 (the SSEM needs a simplex of mn points)",
    lambda r: r.ssem is not None and not r.ssem.d_below_mn_minus_1,
    lambda r: "d < mn − 1",
)


def _alpha_split(r: RunData) -> float | None:
    """alpha_s of a run's SSEM panel (recomputed: results written before the panel recorded
    it hold none)."""
    return None if r.ssem is None else ssem_alpha_split(r.ssem)


SSEM_OPTIMUM = Condition(
    "α ≥ α_s(τ; m, n, p), where the SSEM is the optimum of variant B (docs/ssem.md)",
    lambda r: (
        r.ssem is not None
        and r.ssem.alpha is not None
        and (split := _alpha_split(r)) is not None
        and r.ssem.alpha >= split
    ),
    lambda r: (
        f"α = {fmt(r.ssem.alpha)} < α_s = {fmt(_alpha_split(r))}: the optimum parts the views "
        "of an instance, the SSEM is not the optimum"
        if r.ssem is not None and _alpha_split(r) is not None
        else "no SSEM region"
    ),
)
COLLAPSE_REGIME = Condition(
    "α ≤ α_c (the SSEM predicts collapse, β* = 1)",
    lambda r: r.ssem is not None and r.ssem.regime == "collapse",
    lambda r: f"α = {fmt(r.alpha)} > α_c" if r.ssem is not None else "no SSEM",
)
ABOVE_ALPHA_C = Condition(
    "α > α_c (the SSEM predicts 1 − β* > 0)",
    lambda r: r.ssem is not None and r.ssem.regime is not None and r.ssem.regime != "collapse",
    lambda r: f"α = {fmt(r.alpha)} ≤ α_c",
)
_NO_LOSS = (
    "no training loss recorded (a cl-diag checkpoint analysed by this version records it: "
    "analyse the run's last.pt again)"
)


def _plateau_found(r: RunData) -> str:
    if r.loss is None:
        return _NO_LOSS
    if 2 * r.loss.change_se > RESOLUTION:
        return (
            f"no plateau shown: the loss's last windows change by {fmt(100 * r.loss.change, 2)} "
            f"% ± {fmt(100 * r.loss.change_se, 2)} % per tenth of the steps, noise that cannot "
            f"resolve a change of {fmt(100 * RESOLUTION)} % (train longer: wider windows)"
        )
    moves = "falls" if r.loss.change > 0 else "rises"
    return (
        f"not converged: the loss still {moves} {fmt(100 * abs(r.loss.change), 2)} % ± "
        f"{fmt(100 * r.loss.change_se, 2)} % per tenth of the steps (mean "
        f"{fmt(r.loss.final, 4)} over the last {fmt(r.loss.final_steps)} steps, "
        f"{fmt(r.loss.before, 4)} over the {fmt(r.loss.before_steps)} before)"
    )


def _span(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return fmt(low, 4) if fmt(low, 4) == fmt(high, 4) else f"{fmt(low, 4)}–{fmt(high, 4)}"


def _optimum_summary(runs: Sequence[RunData]) -> str:
    finals = [f for r in runs if (f := _final_loss(r)) is not None]
    optima = [r.optimum_loss for r in runs if r.optimum_loss is not None]
    if len(finals) < len(runs):
        return "no training loss recorded"
    if not optima:
        return "no closed-form optimum loss"
    return f"not converged: loss {_span(finals)}, optimum {_span(optima)}"


def _plateau_summary(runs: Sequence[RunData]) -> str:
    losses = [r.loss for r in runs if r.loss is not None]
    if len(losses) < len(runs):
        return "no training loss recorded"
    changes = [100 * loss.change for loss in losses]
    errors = [100 * loss.change_se for loss in losses]
    return (
        f"no plateau: the loss changes {_span(changes)} % ± {_span(errors)} % per tenth of the "
        "steps at the end"
    )


CONVERGED = Condition(
    f"a converged run: its training loss at the end changes by at most {fmt(100 * PLATEAU)} % "
    "per tenth of the steps, within twice its standard error, measured to within "
    f"{fmt(100 * RESOLUTION)} % (source.loss; a claim about an optimum needs a run that reached "
    "it)",
    lambda r: r.loss is not None and plateaued(r.loss.change, r.loss.change_se),
    _plateau_found,
    summary=_plateau_summary,
)


def _final_loss(r: RunData) -> float | None:
    """The final loss of the term an optimum is about: the contrastive one (without VRN's)."""
    if r.loss is None:
        return None
    return r.loss.contrastive if r.loss.contrastive is not None else r.loss.final


def _at_optimum(r: RunData) -> bool:
    final = _final_loss(r)
    return final is not None and r.optimum_loss is not None and final - r.optimum_loss <= GAP


def _optimum_found(r: RunData) -> str:
    final = _final_loss(r)
    if final is None:
        return _NO_LOSS
    if r.optimum_loss is None:
        return "no closed-form optimum loss for this run"
    return f"not converged: loss {fmt(final, 4)}, optimum {fmt(r.optimum_loss, 4)}"


AT_OPTIMUM = Condition(
    f"a run at the optimum: its final loss within {fmt(GAP)} nats of the closed-form optimum "
    "loss of its batch (the SSEM's batch loss at β*; the full-batch sigmoid loss at the CCEM's "
    "x*; source.loss.final against the theory panel)",
    _at_optimum,
    _optimum_found,
    summary=_optimum_summary,
)
BAND = Condition(
    "the Thm 5.5 band in the theory panel (fixed mini-batches, m < n)",
    lambda r: r.band is not None and r.band[1] > 0,
    lambda r: "no band",
)


# ---- designs -------------------------------------------------------------------------------


def _vrn_label(r: RunData) -> str:
    if not r.config.vrn.on:
        return "none"
    return "VRN (λ not recorded)" if r.vrn is None else f"VRN {fmt(r.vrn, 4)}"


#: VRN on against off, configs otherwise equal (the tuning record is no difference)
VRN_PAIRED = Paired(
    options=("vrn", "vrn_tuning"),
    control=Condition("no VRN", lambda r: not r.config.vrn.on),
    treatment=Condition("VRN", lambda r: r.config.vrn.on),
    label=_vrn_label,
)


def _alignment_tally(control: dict[str, RunData], treatment: dict[str, RunData]) -> str:
    """How many seeds' positive-pair mean falls by more than 0.05 with VRN (alignment
    breaks: the second mode of the toy's seeds)."""
    broken = 0
    for key, run in treatment.items():
        after, before = run.pos_mean, control[key].pos_mean
        broken += after is not None and before is not None and after < before - 0.05
    return f"the positive mean falls by more than 0.05 with VRN in {broken} of {len(treatment)}"


#: the share of seeds whose spread shrinks at least half a decade with VRN (the toy)
TOY_SHARE = SeedShare(
    VRN_PAIRED,
    reaches=lambda d: d <= -math.log(math.sqrt(10.0)),
    reaches_text="a √10-fold shrinkage (half a decade)",
    reference=0.5,
    tally=_alignment_tally,
)
#: the same, where a tuned λ among several is the treatment
VRN_TUNED_PAIRED = Paired(
    options=("vrn", "vrn_tuning"),
    control=Condition("no VRN", lambda r: not r.config.vrn.on),
    treatment=Condition("VRN", lambda r: r.config.vrn.on),
    label=_vrn_label,
    prefer=TUNED,
)
WITHIN_VIEW_PAIRED = Paired(
    options=("within_view",),
    control=Condition("cross-view negatives only", lambda r: not r.within_view),
    treatment=Condition("with within-view negatives", lambda r: r.within_view),
    label=lambda r: "within-view negatives" if r.within_view else "cross-view only",
)
BATCH_TREND = Trend("batch_size", lambda r: r.log2_batch, "log2 m", "batch sizes")


def _ssem_variants(runs: Sequence[RunData]) -> str:
    """The SSEM prediction the claims test (the variant the runs' loss is) beside the other
    variant's, at the first run's α (docs/ssem.md, 'Two variants')."""
    ssem = runs[0].ssem if runs else None
    other = None if ssem is None else ssem_other_variant(ssem)
    if ssem is None or other is None:
        return "no SSEM panel"
    name, opt = other
    return (
        f"SSEM variant {ssem.variant or 'B'} (the loss's): α_c = {fmt(ssem.alpha_c)}, 1 − β* = "
        f"{fmt(ssem.predicted.within_class_variance)}; variant {name}: α_c = "
        f"{fmt(opt.alpha_c)}, 1 − β* = {fmt(opt.within_class_variance)}"
    )


ALPHA_THRESHOLD = Threshold(
    "alpha",
    lambda r: r.alpha,
    lambda r: None if r.ssem is None else r.ssem.alpha_c,
    "the SSEM's α_c (the variant the loss is)",
    "α",
    "values of α",
    aside=_ssem_variants,
)


# ---- preconditions -------------------------------------------------------------------------


def _something_to_reduce(unit: Unit, estimate: Estimate) -> str | None:
    shares = [s for r in unit.control if (s := _share_below(r)) is not None]
    if shares and max(shares) < 0.05:
        return (
            f"the cross-view-only runs have {100 * max(shares):.3g} % of their negatives below δ "
            "at most: there is no share of 5 points to reduce"
        )
    return None


def _spans_alpha_c(unit: Unit, estimate: Estimate) -> str | None:
    """Two α at or below α_c and two above: a flat part and a rising part to place a break
    between."""
    regimes = [(r.alpha, r.ssem.regime) for r in unit.runs if r.ssem is not None]
    below = {a for a, regime in regimes if regime == "collapse"}
    above = {a for a, regime in regimes if regime not in (None, "collapse")}
    if not above:
        return "every α is at or below α_c: the SSEM predicts no change (β* = 1 throughout)"
    if len(below) < 2 or len(above) < 2:
        return (
            f"{len(below)} values of α at or below α_c and {len(above)} above it: a break "
            "needs at least two on each side"
        )
    return None


def _table1_row_margin(unit: Unit) -> tuple[float, str] | None:
    """The VRN row of Table 1 changes by −2.34 % per doubling of m (half: 1.17 %); a unit of
    VRN runs takes that row's margin, a unit without VRN the claim's."""
    if unit.runs and all(r.config.vrn.on for r in unit.runs):
        return math.log(1.0117), "a factor of 1.0117 (about 1.2 %) per doubling of m (VRN row)"
    return None


# ---- the registry --------------------------------------------------------------------------

_TABLE1 = Source("paper", "§6.1, Table 1; Def. 5.7")
_TUNED_TEXT = (
    "λ counts as tuned when the VRN runs record how it was chosen (the training config's "
    "vrn_tuning: the grid tried, the λ selected, the split and the criterion), the selected λ "
    f"is the run's, the grid has at least {MIN_TUNING_GRID} values (the rebuttal's is "
    f"{{{', '.join(fmt(x) for x in REBUTTAL_LAMBDA_GRID)}}}) and the split is not the test "
    "split the accuracy is reported on (a validation split carved from the training set); "
    "runs at a fixed λ are not applicable (λ not tuned). Where the VRN runs of one config "
    "span a grid, only the tuned λ is tested."
)

_ENTRIES: Sequence[Claim | Identity] = (
    Claim(
        key="vrn_variance",
        statement="VRN lowers the variance of cross-view negative similarities",
        source=_TABLE1,
        kind="prediction",
        metric=NEG_VAR,
        design=VRN_PAIRED,
        effect="variance with VRN / without − 1 (geometric mean over seeds)",
        shows="relative",
        expect="decrease",
        margin=math.log(1.05),
        margin_text="a factor of 1.05 (about 5 %) either way",
        margin_why=(
            "the smallest change a reader would call a reduction; Table 1's smallest is −34 % "
            "(m = 512; ResNet-18 on CIFAR-100, the paper's figure on other data)"
        ),
        domain=(RECORDED,),
        scope=(FRAMEWORK,),
        at_scope=(
            "runs that differ only in VRN (λ > 0 against none) and the seed, with a loss of the "
            "paper's framework, encoders or free embeddings: Def. 5.7 penalises the spread of "
            "the cross-view negatives directly, so Table 1's ordering is expected for any such "
            "loss; measured on the loss layer (the projector)"
        ),
    ),
    Claim(
        key="batch_variance",
        statement="Smaller batches give a larger negative-similarity variance",
        source=Source("paper", "Thm 5.5 (ordering of Eq. 11 over m); Table 1"),
        kind="prediction",
        metric=NEG_VAR,
        design=BATCH_TREND,
        effect="change of the variance per doubling of m",
        shows="relative",
        expect="decrease",
        margin=math.log(1.02),
        margin_text="a factor of 1.02 (about 2 %) per doubling of m without VRN, 1.0117 with",
        margin_why=(
            "half of Table 1's mean change per doubling from m = 32 to 512 in each row: −4.1 % "
            "without VRN, −2.34 % with VRN (ResNet-18 on CIFAR-100, the paper's figure on other "
            "data)"
        ),
        arm_margin=_table1_row_margin,
        domain=(RECORDED,),
        scope=(FRAMEWORK,),
        at_scope=(
            "runs that differ only in the batch size m and the seed, with or without VRN "
            "(Table 1 orders both rows), with a loss of the paper's framework; Thm 5.5 orders "
            "its bounds by m for fixed mini-batches at their optimum and Table 1 shows the "
            "ordering for trained networks with random mini-batches; only the ordering is "
            "predicted, not the band's values"
        ),
        figure="batch_variance",
    ),
    Claim(
        key="toy_spread",
        statement="With VRN the spread of the negative similarities shrinks about tenfold",
        source=Source("rebuttal", "toy experiment (reply to reviewer qfkv)"),
        kind="prediction",
        metric=NEG_STD,
        design=TOY_SHARE,
        effect="share of seeds whose std shrinks at least √10-fold with VRN − 50 %",
        shows="pp",
        expect="increase",
        claimed=0.0,
        claimed_text="in most seeds: a share above one half",
        margin=0.25,
        margin_text="25 points (contradicted when at most a quarter of the seeds reach it)",
        margin_why=(
            "the rebuttal reports its toy run by run, so a property of VRN there is one most "
            "seeds show: supported when the exact interval of the share lies above one half, "
            "not borne out when wholly below, contradicted at or below a quarter; 'about an "
            "order of magnitude' is reached at half a decade (√10 ≈ 3.16) on a log scale"
        ),
        domain=(RECORDED, FREE),
        scope=(TOY_N, SIMCLR, CONVERGED),
        at_scope=(
            "the rebuttal's toy: free embedding vectors (no encoder) of n = 4 instances × 2 "
            "views, SimCLR with and without VRN (the rebuttal: R³, SGD lr 0.5, 100 steps, "
            "mini-batches of 2), trained until the loss is flat (the rebuttal's 100 steps "
            "leave the runs without VRN still falling); its statistics are not said to be "
            "over the 12 cross-view or all 24 negative pairs: the cross-view ones (Def. 5.7's); "
            "each seed's ratio (exact over its 12 pairs) is one trial, and the verdict is on "
            "the share of seeds that reach the figure (the seeds' ratios have two modes: VRN "
            "reaches it in some seeds and breaks alignment in others, which the finding counts)"
        ),
    ),
    Claim(
        key="toy_centre",
        statement="With VRN the negative similarities centre on δ = −1/(n−1)",
        source=Source("rebuttal", "toy experiment (reply to reviewer qfkv)"),
        kind="prediction",
        metric=NEG_OFF_DELTA,
        design=VRN_PAIRED,
        effect="|mean cross-view negative − δ| with VRN − without",
        shows="number",
        expect="decrease",
        margin=0.05,
        margin_text="0.05 in cosine similarity",
        margin_why=(
            "what VRN must add to the centring runs without it already have: small beside "
            "the gap of 2/3 between δ = −1/3 and the m = 2 batch optimum −1 that batch-wise "
            "separation would reach (Thm 5.5)"
        ),
        domain=(RECORDED, FREE),
        scope=(TOY_N, SIMCLR, CONVERGED),
        at_scope=(
            "the rebuttal's toy (free embedding vectors, n = 4, SimCLR with and without VRN, "
            "trained until the loss is flat), paired by seed: the claim is about what VRN "
            "does, so the distance of the mean cross-view negative from δ with VRN is "
            "compared with the same seed's without it (each exact over its 12 pairs); a "
            "mean at δ without VRN leaves VRN nothing to add"
        ),
    ),
    Claim(
        key="excessive_share",
        statement=(
            "Over 57 % of negative pairs lie below δ = −1/(n−1) (the rebuttal's figure for "
            "SimCLR on CIFAR-100)"
        ),
        source=Source("rebuttal", "Table 1 (ResNet-18 on CIFAR-100, every batch size)"),
        kind="prediction",
        metric=NEG_SHARE,
        design=OneSample(lambda r: 0.57, "the rebuttal's 57 %", per_run=True),
        effect="share below δ − 57 %",
        shows="pp",
        expect="increase",
        claimed=0.0,
        claimed_text="over 57 % (the rebuttal's figure): an effect above 0",
        margin=0.07,
        margin_text="7 points (contradicted at or below one half)",
        margin_why=(
            "the rebuttal's 'over 57 %' is 7 points above the even split a distribution "
            "symmetric about δ ≈ 0 gives: supported means the whole interval lies above 57 %, "
            "not borne out wholly below it, contradicted at or below one half (no excess at "
            "all)"
        ),
        domain=(RECORDED,),
        scope=(SIMCLR, VRN_OFF, NETWORK, DELTA_OF_TRAINING_SET),
        at_scope=(
            "SimCLR without VRN on a trained encoder (the rebuttal: ResNet-18 on CIFAR-100, "
            "t = 0.2, one model per batch size), the share of cross-view negatives of the loss "
            "layer (the projector) below δ = −1/(n−1) with n the training-set size; one trained "
            "model is tested with the sampling error of its analysed images, several seeds over "
            "seeds; VRN runs, other losses (with labels, supcl's same-class pairs count as "
            "negatives) and free embeddings are outside it"
        ),
    ),
    Claim(
        key="within_view_share",
        statement=(
            "Within-view negatives reduce the share of over-separated negatives for the sigmoid"
            " loss"
        ),
        source=Source("rebuttal", "Table 2"),
        kind="prediction",
        metric=NEG_SHARE,
        design=WITHIN_VIEW_PAIRED,
        effect="share below δ with within-view negatives − without",
        shows="pp",
        expect="decrease",
        margin=0.05,
        margin_text="5 percentage points",
        margin_why=(
            "the rebuttal gives no size; 5 points of all negatives is the smallest change "
            "worth the name"
        ),
        domain=(RECORDED, SIGMOID),
        scope=(VRN_OFF, EQ10_CONTROL),
        at_scope=(
            "sigmoid runs that differ only in within_view (cross-view negatives only, c2 = 0, "
            "against both kinds, c2 = 1) and the seed, without VRN, where Eq. 10 holds for the "
            "cross-view-only loss at N = n (Example 5.4 then predicts over-separation for it); "
            "the share of cross-view negatives below δ at the loss layer"
        ),
        precondition=Precondition(
            "the cross-view-only runs have at least 5 % of their negatives below δ",
            _something_to_reduce,
        ),
    ),
    Claim(
        key="vrn_accuracy",
        statement="VRN at a tuned λ raises linear-probe accuracy",
        source=Source("paper", "Tables 4–5, Fig. 4; rebuttal (gains after tuning λ)"),
        kind="prediction",
        metric=TOP1,
        design=VRN_TUNED_PAIRED,
        effect="linear top-1 with VRN − without",
        shows="pp",
        expect="increase",
        margin=0.005,
        margin_text="0.5 percentage points",
        margin_why=(
            "below the smallest gain the paper reports at a tuned λ: +0.69 pp on full ImageNet "
            "(Table 5; ResNet-50, the paper's figure on other data)"
        ),
        domain=(RECORDED,),
        scope=(TUNED, NETWORK),
        at_scope="a trained encoder, its linear probe on the test split; " + _TUNED_TEXT,
    ),
    Claim(
        key="vrn_accuracy_batch",
        statement="VRN's accuracy gain at a tuned λ is larger at smaller batches",
        source=Source("paper", "Fig. 4; rebuttal"),
        kind="prediction",
        metric=TOP1,
        design=PairedTrend(
            VRN_TUNED_PAIRED, "batch_size", lambda r: r.log2_batch, "log2 m", "batch sizes"
        ),
        effect="change of the VRN gain in linear top-1 per doubling of m",
        shows="pp",
        expect="decrease",
        margin=0.0025,
        margin_text="0.25 percentage points per doubling of m",
        margin_why=(
            "half the minimum gain per doubling: over Fig. 4's m = 32–512 (4 doublings) the "
            "gain then changes by 1 pp, twice the minimum gain"
        ),
        domain=(RECORDED,),
        scope=(TUNED, NETWORK),
        at_scope=(
            "the tuned VRN gain, paired by seed at each batch size, of runs that differ only in"
            " m, VRN and the seed; " + _TUNED_TEXT
        ),
    ),
    Claim(
        key="batch_accuracy",
        statement="Smaller batches give a slightly lower linear-probe accuracy",
        source=Source("rebuttal", "Table 1 discussion; paper Fig. 4"),
        kind="prediction",
        metric=TOP1,
        design=BATCH_TREND,
        effect="change of linear top-1 per doubling of m",
        shows="pp",
        expect="increase",
        margin=0.0025,
        margin_text="0.25 percentage points per doubling of m",
        margin_why=(
            "'slightly': a quarter point per doubling, 1 pp over Fig. 4's m = 32–512 (no values"
            " are given in the text)"
        ),
        domain=(RECORDED,),
        scope=(FIG4_LOSSES, NETWORK),
        at_scope=(
            "runs of SimCLR, DCL or DHEL (with or without VRN, as in Fig. 4) on a trained "
            "encoder that differ only in m and the seed; the linear probe on the test split"
        ),
        figure="batch_accuracy",
    ),
    Claim(
        key="eq10_separation",
        statement="The sigmoid loss separates negatives beyond δ when Eq. 10 holds",
        source=Source("paper", "Example 5.4 (Thm 5.3, Eq. 10)"),
        kind="prediction",
        metric=NEG_MEAN,
        design=OneSample(lambda r: r.delta, "δ = −1/(n−1)", per_run=True),
        effect="mean cross-view negative − δ",
        shows="number",
        expect="decrease",
        margin=0.01,
        margin_text="0.01 in cosine similarity",
        margin_why=(
            "Example 5.4 states no size; 0.01 (0.5 % of the similarity range) keeps a mean "
            "within sampling and float noise of δ from counting as over-separation"
        ),
        domain=(RECORDED, SIGMOID),
        scope=(CROSS_ONLY, VRN_OFF, EQ10, FULL_BATCH, D_AT_LEAST_N, AT_OPTIMUM),
        at_scope=(
            "the sigmoid loss with cross-view negatives only (c2 = 0), no VRN, where Eq. 10 "
            "holds at N = n, the full batch of Example 5.4 (the theory panel computes it), "
            "trained on that full batch (Thm 5.3 is about the optimum of the full-batch loss; "
            "runs on mini-batches of m < n optimise the mini-batch loss of §5.2, for which the "
            "paper predicts nothing here), and the loss layer has d ≥ n (Thm 5.3's "
            "assumption: free embeddings at the toy's scale; trained encoders with d < n are "
            "outside it); s_pos < 1 follows from s_neg < δ by Thm 5.2 and is not tested apart"
        ),
    ),
    Claim(
        key="eq10_etf",
        statement=(
            "Where Eq. 10 fails, the cross-view-only sigmoid loss puts its negatives at δ (the "
            "simplex ETF)"
        ),
        source=Source("paper", "Thm 5.1(iii) (Eq. 8, i.e. Eq. 10 for the sigmoid, fails)"),
        kind="prediction",
        metric=NEG_MEAN,
        design=OneSample(lambda r: r.delta, "δ = −1/(n−1)", per_run=True),
        effect="mean cross-view negative − δ",
        shows="number",
        expect="agree",
        margin=0.01,
        margin_text="0.01 in cosine similarity",
        margin_why=(
            "Thm 5.1 predicts δ exactly; 0.01 (0.5 % of the similarity range) is the margin "
            "eq10_separation uses for the other side of the same condition"
        ),
        domain=(RECORDED, SIGMOID),
        scope=(CROSS_ONLY, VRN_OFF, EQ10_FAILS, FULL_BATCH, D_AT_LEAST_N_MINUS_1, AT_OPTIMUM),
        at_scope=(
            "the sigmoid loss with cross-view negatives only (c2 = 0), no VRN, where Eq. 10 "
            "fails at N = n (the theory panel computes it; case (iii) of Thm 5.1: "
            "ϕ'(1) exceeds the bound of Eq. 8), trained on the full batch and with d ≥ n − 1 "
            "at the loss layer (Thm 5.1's assumptions: free embeddings at the toy's scale); "
            "the optimum is then the simplex ETF, every negative at δ = −1/(n−1), and the mean "
            "cross-view negative is tested against δ. Eq. 10 holding with equality (neither "
            "theorem applies) has measure zero and is not set apart"
        ),
    ),
    Claim(
        key="ccem_optimum",
        statement=(
            "The sigmoid loss's optimum is the CCEM's: s_pos = 2x* − 1, from the simplex ETF "
            "(x* = 1) to the antipodal structure (x* = 0) as t and b vary"
        ),
        source=Source(
            "CCEM",
            "the optimum of the sigmoid loss ranges from the simplex ETF to antipodal structure "
            "depending on the temperature; x*(t, b; N) as derived in paper-notes §11.1",
        ),
        kind="prediction",
        metric=CCEM_X,
        design=OneSample(lambda r: r.ccem_x, "the CCEM's x*(t, b; N = n)"),
        effect="measured x − the CCEM's x*",
        shows="number",
        expect="agree",
        margin=0.05,
        margin_text="0.05 in x (0.1 in the mean positive similarity)",
        margin_why=(
            "5 % of x's range 0–1; the CCEM's regimes differ by far more (x* = 1 at the ETF, "
            "0 antipodal, 0.39–0.90 between them at the reference study's N = 8)"
        ),
        domain=(RECORDED, SIGMOID),
        scope=(CROSS_ONLY, VRN_OFF, FULL_BATCH, D_AT_LEAST_N, FREE, AT_OPTIMUM),
        at_scope=(
            "the sigmoid loss with cross-view negatives only, no VRN, on free embedding vectors "
            "trained on the full batch of N = n pairs with d ≥ n (the CCEM's setting, "
            "paper-notes §11.1), at the optimum (the final loss within the tolerance of the "
            "closed-form loss at x*); the seeds of one (t, b) are the replicates, and each "
            "(t, b) is one finding, so a grid over t and b tests where the structure moves "
            "from the ETF through the interior to the antipodal one"
        ),
    ),
    Claim(
        key="ssem_collapse",
        statement="Below α_c the classes collapse: the instances of a class coincide (β* = 1)",
        source=Source(
            "SSEM", "class collapse at small α; α_c as derived in paper-notes §11.3 (inferred)"
        ),
        kind="prediction",
        metric=INSTANCE_WITHIN_CLASS,
        design=OneSample(
            lambda r: r.ssem_prediction,
            "the SSEM's 1 − β* = 0 (the variant the loss is)",
            aside=_ssem_variants,
        ),
        effect="measured − predicted within-class variance of the instance means",
        shows="number",
        expect="agree",
        margin=COLLAPSE_EPSILON,
        margin_text=f"{fmt(COLLAPSE_EPSILON)} in within-class variance",
        margin_why="the collapse flag's ε: what cl-diag calls collapsed",
        domain=(RECORDED, HAS_SSEM),
        scope=(COLLAPSE_REGIME, BALANCED, SSEM_FITS, SSEM_OPTIMUM, INSTANCE_MEANS, AT_OPTIMUM),
        at_scope=(
            "supcl runs with balanced batches at α_s ≤ α ≤ α_c(τ; m, n, p), where the SSEM is "
            "the optimum of the loss on one batch (d ≥ mn − 1; below α_s the views of an "
            "instance part at the optimum: out of scope, docs/ssem.md); measured on the "
            "instance means (u_i + v_i)/2, whose within-class variance is the SSEM's 1 − β "
            "whatever the spread of an instance's views (the views' own within-class variance "
            "adds (1 − s_pos)/2, which the SSEM's coinciding views lack); the seeds are the "
            "replicates (one run: no interval)"
        ),
    ),
    Claim(
        key="ssem_variance",
        statement="Above α_c the within-class variance of the instances is the SSEM's 1 − β*",
        source=Source(
            "SSEM", "the SSEM optimum; β*(α, τ; m, n, p) as derived in paper-notes §11.3 (inferred)"
        ),
        kind="prediction",
        metric=INSTANCE_WITHIN_CLASS,
        design=OneSample(
            lambda r: r.ssem_prediction,
            "the SSEM's 1 − β* (the variant the loss is)",
            aside=_ssem_variants,
        ),
        effect="measured − predicted within-class variance of the instance means",
        shows="number",
        expect="agree",
        margin=0.05,
        margin_text="0.05 in within-class variance",
        margin_why="5 % of the within-class variance's range 0–1",
        domain=(RECORDED, HAS_SSEM),
        scope=(ABOVE_ALPHA_C, BALANCED, SSEM_FITS, SSEM_OPTIMUM, INSTANCE_MEANS, AT_OPTIMUM),
        at_scope=(
            "supcl runs with balanced batches at α > α_c, where the SSEM is the optimum (d ≥ "
            "mn − 1; α > α_c > α_s always, docs/ssem.md); measured on the instance means "
            "(u_i + v_i)/2 (the SSEM's views coincide, so its 1 − β* is theirs); the seeds are "
            "the replicates"
        ),
    ),
    Claim(
        key="alpha_threshold",
        statement=(
            "The instances' within-class variance is flat below α_c and rises above it: the "
            "break is at α_c"
        ),
        source=Source(
            "SSEM",
            "β* = 1 up to α_c, then falls (1 − β* rises), as derived in paper-notes §11.3 "
            "(inferred)",
        ),
        kind="prediction",
        metric=INSTANCE_WITHIN_CLASS,
        design=ALPHA_THRESHOLD,
        effect="break of the two-segment fit − α_c",
        shows="number",
        expect="agree",
        margin=0.05,
        margin_text="0.05 in α",
        margin_why=(
            "a fifth of α_c = 0.25 at the reference study's m = n = 10, τ = 0.3, and the "
            "spacing of its α grid about α_c"
        ),
        domain=(RECORDED, HAS_SSEM),
        scope=(BALANCED, SSEM_FITS, SSEM_OPTIMUM, INSTANCE_MEANS, AT_OPTIMUM),
        at_scope=(
            "supcl runs with balanced batches that differ only in α and the seed, each at "
            "α ≥ α_s (where the SSEM is the optimum, docs/ssem.md), at least two α on each "
            "side of α_c; the break of a flat-then-rising fit (an offset per seed) is compared "
            "with α_c, with its profile-likelihood interval; the SSEM's 1 − β* rises convexly, "
            "not linearly, above α_c, so the fit's break is a threshold estimate, not a test "
            "of the shape above it"
        ),
        precondition=Precondition("two values of α on each side of α_c", _spans_alpha_c),
        figure="alpha_threshold",
    ),
    Claim(
        key="vrn_alignment",
        statement="Positive-pair similarity with VRN against without",
        source=Source("none", "Thm 5.2 only bounds it from above"),
        kind="description",
        metric=POS_MEAN,
        design=VRN_PAIRED,
        effect="mean positive similarity with VRN − without",
        shows="number",
        domain=(RECORDED,),
        at_scope=(
            "the paper does not claim VRN costs no alignment; Thm 5.2's ceiling is an upper "
            "bound, which VRN runs need not reach"
        ),
    ),
    Claim(
        key="band_distance",
        statement="Variance of the negatives against the upper end of the Thm 5.5 band",
        source=Source("none", "Thm 5.5's band is for fixed mini-batches at their optimum"),
        kind="description",
        metric=NEG_VAR,
        design=OneSample(
            lambda r: math.log(r.band[1]) if r.band is not None and r.band[1] > 0 else None,
            "the band's upper end",
            per_run=True,
        ),
        effect="variance / upper end of the band",
        shows="factor",
        domain=(RECORDED, BAND, VRN_OFF),
        at_scope=(
            "the band describes fixed mini-batches at their optimum with d ≥ m − 1; the paper "
            "never says trained networks lie in it (its Table 1 lies far above it)"
        ),
    ),
)


# ---- consistency checks --------------------------------------------------------------------

#: exact mode: similarities of float32 rows of norm 1 ± 6e-8, sums in float64
ROUNDING = 1e-5
#: sampled mode: how many standard errors of the sampled means a slack may fall below 0
SAMPLING_SIGMAS = 4.0


def _exact(layer: LayerPairs, *, within: bool) -> bool:
    """Whether the layer's moments are exact over every pair of its n instances."""
    n = layer.n
    parts = [(layer.positive, n), (layer.cross, n * (n - 1))]
    if within:
        parts.append((layer.within, n * (n - 1)))
    return all(p is not None and not p.estimate and p.count == count for p, count in parts)


def _error(*terms: tuple[str, Callable[[int], float]]) -> Callable[[LayerPairs], float]:
    """The tolerance of a slack sum_k a_k(n)·E[s_k] + const: float rounding when the moments
    are exact over every pair, else SAMPLING_SIGMAS standard errors of the sampled means
    (each sqrt(var / count), added with the weights |a_k(n)|)."""

    def error(layer: LayerPairs) -> float:
        within = any(kind == "within" for kind, _ in terms)
        if _exact(layer, within=within):
            return ROUNDING
        total = 0.0
        for kind, coefficient in terms:
            p = {"pos": layer.positive, "cross": layer.cross, "within": layer.within}[kind]
            if p is None or p.count < 1:
                return math.inf
            total += abs(coefficient(layer.n)) * math.sqrt(max(p.var, 0.0) / p.count)
        return ROUNDING + SAMPLING_SIGMAS * total

    return error


def _one(n: int) -> float:
    return 1.0


def _means(layer: LayerPairs, within: bool = False) -> tuple[float, float, float, int] | None:
    p, c, w = layer.positive, layer.cross, layer.within
    if p is None or c is None or layer.n < 3 or (within and w is None):
        return None
    return p.mean, c.mean, (w.mean if w is not None else math.nan), layer.n


def _ceiling_slack(layer: LayerPairs) -> float | None:
    m = _means(layer)
    if m is None:
        return None
    pos, cross, _, n = m
    return 1.0 + cross + 1.0 / (n - 1) - pos


def _c6_slack(layer: LayerPairs) -> float | None:
    m = _means(layer)
    if m is None:
        return None
    pos, cross, _, n = m
    return cross - ((n - 2) * pos - n) / (2 * (n - 1))


def _c7_slack(layer: LayerPairs) -> float | None:
    m = _means(layer, within=True)
    if m is None:
        return None
    pos, cross, within, n = m
    return within + cross + (pos + 1.0) / (n - 1)


def _c8_slack(layer: LayerPairs) -> float | None:
    m = _means(layer, within=True)
    if m is None:
        return None
    _, _, within, n = m
    return within + 1.0 / (n - 1)


_IDENTITIES: Sequence[Identity] = (
    Identity(
        key="thm52_ceiling",
        statement="The positive mean stays below the Thm 5.2 ceiling",
        source=Source("identity", "Thm 5.2, Eq. 7"),
        formula=(
            "1 + E[s_cross] + 1/(n−1) − E[s_pos] = n/(n−1)·[½ tr Var(u − v) + ½(‖ū‖² + ‖v̄‖²)]"
            " ≥ 0 over the n analysed instances"
        ),
        slack=_ceiling_slack,
        error=_error(("pos", _one), ("cross", _one)),
    ),
    Identity(
        key="lemma_c6",
        statement="The negatives are no more separated than the alignment allows",
        source=Source("identity", "Lemma C.6 (the feasibility frontier, paper-notes §11.2)"),
        formula="E[s_cross] − ((n−2)·E[s_pos] − n)/(2(n−1)) = n/(4(n−1))·R ≥ 0",
        slack=_c6_slack,
        error=_error(("cross", _one), ("pos", lambda n: (n - 2) / (2 * (n - 1)))),
    ),
    Identity(
        key="lemma_c7",
        statement="Cross- and within-view negatives together are bounded by the positives",
        source=Source("identity", "Lemma C.7"),
        formula=("E[s_within] + E[s_cross] + (E[s_pos] + 1)/(n−1) = ‖Σ(u_i + v_i)‖²/(2n(n−1)) ≥ 0"),
        slack=_c7_slack,
        error=_error(("within", _one), ("cross", _one), ("pos", lambda n: 1 / (n - 1))),
    ),
    Identity(
        key="lemma_c8",
        statement="Within-view negatives are no more separated than a simplex",
        source=Source("identity", "Lemma C.8"),
        formula="E[s_within] + 1/(n−1) = (‖Σu_i‖² + ‖Σv_i‖²)/(2n(n−1)) ≥ 0",
        slack=_c8_slack,
        error=_error(("within", _one)),
    ),
)

#: every entry of the registry by key, in report order
CLAIMS: dict[str, Claim | Identity] = {e.key: e for e in (*_ENTRIES, *_IDENTITIES)}


# ---- docs/claims.md -----------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _conditions(conditions: Sequence[Condition]) -> str:
    return "; ".join(c.requires for c in conditions) or "—"


def claims_markdown() -> str:
    """docs/claims.md: the registry as tables a reviewer can read without the code."""
    lines = [
        "# Claims the reports test",
        "",
        "Generated from the registry `cl_diag/report/claims.py` by `python tools/claims_doc.py`;",
        "`tests/test_claims.py` fails when this file is stale. Every report's *Findings* section",
        "applies these entries to its runs with one evaluator (`cl_diag/report/findings.py`).",
        "",
        "Sources: "
        + "; ".join(f"**{k}** = {v}" for k, v in WORKS.items() if k not in ("identity", "none"))
        + ".",
        "",
        "## How a verdict is made",
        "",
        "- The effect is estimated with its standard error on the claim's analysis scale (ln "
        "for a variance or a spread, so a ratio is a difference), by the claim's design: paired"
        " by seed (the t interval of the per-seed differences; Welch's when the arms' seeds "
        "differ), a least-squares trend over a swept option (every run a point, df = points − "
        "2), or one sample against a value (over seeds; for a claim about one trained model, "
        "one run with the sampling error of its analysed images). A statistic counted on a "
        "grid (an accuracy on N test images, a share of pairs) has at least the spread of its "
        "rounding, step/√12, however few seeds landed on one grid point (the floor `cl-diag "
        "reproduce` gives it too).",
        "- A directional claim has four outcomes. *Supported*: the whole interval lies beyond "
        "the size the source claims (the *claimed size*: the source's own number where it "
        "gives one, else the minimum relevant effect, the margin) in the expected direction. "
        "*Not borne out*: the whole interval lies short of the claimed size (the one-sided "
        "test of 'effect ≥ claimed size' rejects: the data show a smaller effect than the "
        "source states, or none). *Contradicted*: the whole interval lies on the other side of"
        " zero by at least the margin. *Inconclusive*: the interval holds the claimed size. "
        "An agreement claim (measured − predicted) has three: supported when the interval lies"
        " within ± the margin, contradicted when it lies entirely beyond it, inconclusive "
        "otherwise.",
        "- Multiplicity: the findings with a verdict in one report are one family; Holm's "
        "step-down at a family-wise 5 % (2.5 % per side) sets the level of each interval: the "
        "i-th most significant of K is judged at 5 %/(K − i + 1) and, from the first that is "
        "not decided, every later one at that level.",
        "- *Replicates*: the probability that an independent replicate study of the same "
        "design gets the same verdict. Its estimate differs from this one by √2·se·T_df (the "
        "difference of two estimates with standard error se each), and its interval is this "
        "one moved by that difference; the probability is that of landing where the verdict "
        "is the same. Where Shapiro-Wilk finds the per-seed effects far from normal (p < 0.05;"
        " e.g. two modes), a bootstrap over seeds (4,000 resamples, a fixed seed) instead. A "
        f"verdict below {100 * FRAGILE:.0f} % is *fragile*.",
        "- *Sensitivity* (a decided verdict, not fragile, with a spread over seeds): the "
        "smallest true effect the design's seeds call supported with 80 % power at the "
        "observed spread and the finding's level (the claimed size plus the noncentral-t shift"
        " ncp·se, scipy's noncentral t); for an agreement claim, the largest true deviation "
        "still called supported with 80 % power.",
        "- *Seeds for 80 % power* (an undecided or fragile verdict): the fewest seeds per "
        "condition (per level for a trend) with which the one-sided t test at the finding's "
        "level detects the margin at the observed spread (scipy's noncentral t). For an "
        "agreement claim, the power to show agreement when the true deviation is 0 (at least "
        "2·power − 1).",
        "- *Not applicable*: the runs are outside the source's scope (the condition is named)"
        " or the data fail a precondition of the claim (*not applicable here*, with the "
        "reason); never contradicted. Runs outside a claim's domain get no line at all (an "
        "embeddings file without a training config gets only the consistency checks).",
        "",
        "## Predictions (verdicts)",
        "",
        "| key | claim | source | applies to (domain) | at its scope | metric | design | "
        "expected | claimed size and minimum relevant effect | not applicable here when |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in CLAIMS.values():
        if not isinstance(entry, Claim) or entry.kind != "prediction":
            continue
        cells = [
            f"`{entry.key}`",
            entry.statement,
            entry.source.full,
            _conditions(entry.domain),
            f"Requires {_conditions(entry.scope)}. Operationally: {entry.at_scope}.",
            entry.metric.name + (" (ln)" if entry.metric.log else ""),
            entry.design.text,
            f"{entry.expect}: {entry.effect}",
            (f"claimed size {entry.claimed_text}; margin " if entry.claimed_text else "")
            + f"{entry.margin_text}: {entry.margin_why}",
            entry.precondition.requires if entry.precondition else "—",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += [
        "",
        "## Descriptions (no verdict: no source predicts them for these runs)",
        "",
        "| key | quantity | why no verdict | applies to | metric | design |",
        "|---|---|---|---|---|---|",
    ]
    for entry in CLAIMS.values():
        if not isinstance(entry, Claim) or entry.kind != "description":
            continue
        cells = [
            f"`{entry.key}`",
            f"{entry.statement} ({entry.effect})",
            f"{entry.source.where}: {entry.at_scope}",
            _conditions(entry.domain),
            entry.metric.name,
            entry.design.text,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += [
        "",
        "## Consistency checks (identities: they fail only on a measurement bug)",
        "",
        "Each holds for any unit vectors u_i, v_i of the n analysed instances (ū, v̄ their "
        "means, R = tr Var(u − v) + ‖ū + v̄‖²; paper-notes §5.1). Checked on every layer of "
        f"every run; tolerance {ROUNDING:g} for exact moments (float32 rows), plus "
        f"{SAMPLING_SIGMAS:g} standard errors of the sampled means in sampled mode.",
        "",
        "| key | check | source | identity |",
        "|---|---|---|---|",
    ]
    for entry in CLAIMS.values():
        if isinstance(entry, Identity):
            cells = [f"`{entry.key}`", entry.statement, entry.source.where, entry.formula]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
