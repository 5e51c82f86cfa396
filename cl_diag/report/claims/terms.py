"""The words the registry is written in: the metrics, conditions (domains and scopes), designs
and preconditions its entries name, each defined once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cl_diag.measurement.convergence import GAP, PLATEAU, RESOLUTION, plateaued
from cl_diag.measurement.pairs import EXCESS_MARGIN
from cl_diag.measurement.ssem import ssem_alpha_split, ssem_other_variant
from cl_diag.measurement.stats import pair_mean_se, pair_var_se
from cl_diag.report.claims.designs import Paired, SeedShare, Threshold, Trend
from cl_diag.report.claims.facts import RunData
from cl_diag.report.claims.schema import Condition, Estimate, Metric, Unit
from cl_diag.report.document import fmt
from cl_diag.runconfig import MIN_TUNING_GRID

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
