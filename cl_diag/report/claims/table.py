"""The claims registry (issue 21): every claim the reports test, as data.

One entry per claim (:class:`~cl_diag.report.claims.entries.Claim`, or
:class:`~cl_diag.report.claims.entries.Identity` for a consistency check): what it says and
where (the ICML 2025 paper of Lee, Lim, Lee and Sohn, its OpenReview rebuttal, or the SSEM
paper on supervised-contrastive class collapse), which runs it applies to, what is measured,
how runs are compared, the expected direction and the minimum relevant effect. *Predictions*
(falsifiable, at a source's scope) get a verdict; *descriptions* an estimate and interval;
*consistency checks* (identities of unit vectors) fail only through a measurement bug.
``docs/claims.md`` is this table (``python tools/claims_doc.py``; a test fails when stale).
Adding a claim is one entry here (new terms in :mod:`~cl_diag.report.claims.terms`) and one
case in ``tests/test_claims.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from cl_diag.measurement.collapse import COLLAPSE_EPSILON
from cl_diag.report.claims.designs import OneSample, PairedTrend
from cl_diag.report.claims.entries import Claim, Identity, Precondition
from cl_diag.report.claims.facts import LayerPairs
from cl_diag.report.claims.schema import Source
from cl_diag.report.claims.terms import (
    ABOVE_ALPHA_C,
    ALPHA_THRESHOLD,
    AT_OPTIMUM,
    BALANCED,
    BAND,
    BATCH_TREND,
    CCEM_X,
    COLLAPSE_REGIME,
    CONVERGED,
    CROSS_ONLY,
    D_AT_LEAST_N,
    D_AT_LEAST_N_MINUS_1,
    DELTA_OF_TRAINING_SET,
    EQ10,
    EQ10_CONTROL,
    EQ10_FAILS,
    FIG4_LOSSES,
    FRAMEWORK,
    FREE,
    FULL_BATCH,
    HAS_SSEM,
    INSTANCE_MEANS,
    INSTANCE_WITHIN_CLASS,
    NEG_MEAN,
    NEG_OFF_DELTA,
    NEG_SHARE,
    NEG_STD,
    NEG_VAR,
    NETWORK,
    POS_MEAN,
    RECORDED,
    SIGMOID,
    SIMCLR,
    SSEM_FITS,
    SSEM_OPTIMUM,
    TOP1,
    TOY_N,
    TOY_SHARE,
    TUNED,
    VRN_OFF,
    VRN_PAIRED,
    VRN_TUNED_PAIRED,
    WITHIN_VIEW_PAIRED,
    _something_to_reduce,
    _spans_alpha_c,
    _ssem_variants,
    _table1_row_margin,
)
from cl_diag.report.document import fmt
from cl_diag.runconfig import MIN_TUNING_GRID, REBUTTAL_LAMBDA_GRID

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
