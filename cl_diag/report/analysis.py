"""The content of one run's report, built from its :class:`~cl_diag.result.Result` alone.

Every number is printed next to its convention (normalisation, which pairs,
n_ref and the threshold, exact or sampled, quantile error, epsilon), as the
foundation issue asks. Blocks that a result lacks (``by_class`` without labels,
``probes``/``theory``/``config`` for an embeddings file) are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cl_diag.measurement.stats import pair_mean_se, z_value
from cl_diag.measurement.theory import validity
from cl_diag.report import figures
from cl_diag.report.document import (
    MISSING,
    Cell,
    Document,
    Figure,
    Heading,
    Note,
    Paragraph,
    Table,
    flatten,
    fmt,
    fmt_setting,
    pct,
    pct_interval,
)
from cl_diag.report.environment import analysis_environment
from cl_diag.report.findings import Finding, RunData, findings_blocks, run_findings
from cl_diag.result import (
    BASELINES,
    NEGATIVE_TYPES,
    PAIR_TYPES,
    PIXELS,
    QUANTILES,
    Collapse,
    Eq10,
    Layer,
    Metric,
    PairStats,
    Probes,
    Result,
    Source,
    SplitSize,
    Ssem,
    Theory,
    VarianceBand,
    probe_report_metrics,
)

PAIR_TITLES = {
    "positive": "positive",
    "cross_view_negative": "cross-view negative",
    "within_view_negative": "within-view negative",
}
PAIR_DEFINITIONS = {
    "positive": "(u_i, v_i), n pairs",
    "cross_view_negative": "(u_i, v_j), i ≠ j, n(n−1) ordered",
    "within_view_negative": "(u_i, u_j) and (v_i, v_j), i < j, n(n−1)",
}
SIMILARITY_CONVENTION = "cosine similarity of L2-normalised rows"


def threshold_text(result: Result) -> str:
    return f"δ = −1/(n_ref − 1) = {fmt(result.threshold)} with n_ref = {fmt(result.n_ref)}"


def mode_text(result: Result) -> str:
    if result.mode == "sampled":
        return (
            f"sampled: {fmt(result.num_pairs)} pairs of each type drawn uniformly with seed "
            f"{fmt(result.seed)} (estimates)"
        )
    return "exact: all pairs, streamed in row blocks"


def _stat_rows(
    stats_by_column: Sequence[PairStats | None], *, negatives: list[bool]
) -> list[list[str]]:
    """Rows 'statistic | value per column' shared by the pair and by_class tables."""

    def row(name: str, read, *, neg_only: bool = False, formatter=fmt) -> list[str]:
        cells = []
        for stats, is_neg in zip(stats_by_column, negatives, strict=True):
            if stats is None or (neg_only and not is_neg):
                cells.append(MISSING)
            else:
                cells.append(formatter(read(stats)))
        return [name, *cells]

    def sampled(stats: PairStats | None) -> str:
        if stats is None:
            return MISSING
        return "sampled estimate" if stats.estimate else "exact"

    rows = [
        row("count", lambda s: s.count),
        ["exact / sampled", *[sampled(s) for s in stats_by_column]],
        row("mean", lambda s: s.mean),
        row("var (population, ddof 0)", lambda s: s.var),
        row("std (ddof 0)", lambda s: s.std),
        row("min", lambda s: s.min),
        row("max", lambda s: s.max),
    ]
    for q in QUANTILES:
        rows.append(row(f"quantile {q} %", lambda s, q=q: s.quantile(q)))
    rows.append(row("quantile error bound (|reported − exact|)", lambda s: s.quantile_error))
    rows.append(row("excessive count (s < δ)", lambda s: s.excessive_count, neg_only=True))
    rows.append(row("excessive ratio (s < δ)", lambda s: s.excessive_ratio, neg_only=True))
    return rows


def pair_table(result: Result, layer: Layer) -> Table:
    kinds = [k for k in PAIR_TYPES if k in layer.pairs]
    stats = [layer.pairs[k] for k in kinds]
    rows = [["which pairs", *[PAIR_DEFINITIONS[k] for k in kinds]]]
    rows += _stat_rows(stats, negatives=[k in NEGATIVE_TYPES for k in kinds])
    rows.append(["histogram bins on [−1, 1]", *[fmt(s.histogram.bins) for s in stats]])
    return Table(
        columns=["statistic", *[PAIR_TITLES[k] for k in kinds]],
        rows=rows,
        caption=(
            f"Pair similarities ({SIMILARITY_CONVENTION}); {threshold_text(result)}; "
            f"{mode_text(result)}."
        ),
    )


def by_class_table(result: Result, layer: Layer) -> Table | None:
    columns, stats = [], []
    for kind in NEGATIVE_TYPES:
        pair = layer.pairs.get(kind)
        if pair is None or pair.by_class is None:
            continue
        split = pair.by_class
        for part, title in (
            (split.same_class, "same class"),
            (split.different_class, "different class"),
        ):
            columns.append(f"{PAIR_TITLES[kind]}, {title}")
            stats.append(part)
    if not columns:
        return None
    return Table(
        columns=["statistic", *columns],
        rows=_stat_rows(stats, negatives=[True] * len(stats)),
        caption=(
            "Negatives split by class label. Same-class negatives are the false negatives of "
            f"instance discrimination; {threshold_text(result)}."
        ),
    )


def geometry_table(result: Result, layer: Layer, name: str = "") -> tuple[Table, list[Note]]:
    geo = layer.geometry
    eps = geo.effective_rank.epsilon
    ceiling = geo.alignment_ceiling
    rows = [
        [
            "alignment",
            fmt(geo.alignment),
            "E ||u_i − v_i||² over positives (Wang & Isola, α = 2), normalised rows",
        ],
    ]
    for view, value in (("u", geo.uniformity.u), ("v", geo.uniformity.v)):
        rows.append(
            [
                f"uniformity, view {view}",
                fmt(value),
                "log E_{i<j} exp(−2 ||x_i − x_j||²) within the view (t = 2), log-sum-exp",
            ]
        )
    for view, value in (("u", geo.effective_rank.u), ("v", geo.effective_rank.v)):
        rows.append(
            [
                f"effective rank, view {view}",
                fmt(value),
                "RankMe: exp(entropy of normalised singular values + ε) of the uncentred "
                f"normalised matrix, ε = {fmt(eps)}",
            ]
        )
    for view, values in (("u", geo.spectrum.u), ("v", geo.spectrum.v)):
        if values:
            head = ", ".join(fmt(x, 4) for x in values[:5])
            rows.append(
                [
                    f"covariance spectrum, view {view}",
                    f"{head}{', …' if len(values) > 5 else ''}",
                    f"largest 5 of {len(values)} eigenvalues of the view's embedding covariance, "
                    "descending",
                ]
            )
    rows.append(
        [
            "frontier gap",
            fmt(geo.frontier_gap),
            "mean_xneg − ((N−2)·mean_pos − N)/(2(N−1)), N = n pairs, ≥ 0 (paper-notes 11.2); "
            "0 = as separated as the alignment allows",
        ]
    )
    rows.append(
        [
            "alignment ceiling",
            fmt(ceiling.value),
            f"Thm 5.2: 1 + mean cross-view negative + 1/(n_ref − 1), n_ref = {fmt(result.n_ref)}; "
            f"below 1: {fmt(ceiling.below_one)}",
        ]
    )
    notes = []
    neg = layer.pairs.get("cross_view_negative")
    if ceiling.value is not None and neg is not None and neg.var is not None:
        # the ceiling is estimated from the sample's mean negative: call it below 1 only beyond
        # that mean's sampling error (a conservative U-statistic bound, cl_diag.measurement.stats)
        margin = z_value() * pair_mean_se(neg.var, layer.n)
        if ceiling.value + margin < 1.0:
            notes.append(
                Note(
                    f"The Theorem 5.2 alignment ceiling ({fmt(ceiling.value)}) is below 1 beyond "
                    f"its sampling error (± {fmt(margin, 2)} at 95 %): the mean cross-view "
                    "negative similarity is below δ = −1/(n_ref − 1), so perfect alignment of "
                    "positives is impossible (excessive separation)."
                )
            )
    if neg is not None and neg.min is not None and neg.min >= 0.0 and result.threshold < 0:
        notes.append(
            Note(
                f"Every cross-view negative similarity of '{name}' is ≥ 0 (minimum "
                f"{fmt(neg.min)}): the features are non-negative (e.g. taken after a ReLU), so no "
                "pair can fall below δ < 0 and the excessive ratios are 0 by construction, not a "
                "finding."
            )
        )
    return Table(columns=["quantity", "value", "convention"], rows=rows, caption="Geometry."), notes


#: at most this many classes are listed one by one in a collapse table
_CLASSES_SHOWN = 20


def collapse_table(name: str, collapse: Collapse) -> tuple[Table, list[Note]]:
    """The class-collapse diagnostics of one labelled layer (cl_diag.measurement.collapse)."""
    c = collapse
    n_bar = c.instances / c.classes if c.classes else None
    counts = sorted({k.count for k in c.per_class if k.count is not None})
    sizes = (
        f"{fmt(counts[0])} each (balanced)"
        if c.balanced and counts
        else f"{fmt(counts[0] if counts else None)}–{fmt(counts[-1] if counts else None)}"
    )
    shown = c.per_class[:_CLASSES_SHOWN]
    per_class = ", ".join(fmt(k.within_class_variance, 4) for k in shown)
    if len(c.per_class) > len(shown):
        per_class += f", … ({len(c.per_class) - len(shown)} more)"
    n_text = f"{fmt(c.classes)} classes, {fmt(c.instances)} instances ({sizes})"
    residual = (
        f"1 + (n−1)·s_w + n(m−1)·s_b with n = instances per class = {fmt(n_bar)}, "
        f"m = {fmt(c.classes)}; for a balanced sample = n·m·(1 − total variance) + "
        "(1 − positive mean)/2 ≥ 0, 0 on the simplex-to-simplex embedding model (zero mean, "
        "aligned positives)"
    )
    if not c.balanced:
        residual += "; classes differ in size, so n is their mean (approximate identity)"
    rows = [
        ["classes m, instances", f"{n_text}, {fmt(c.views)} views", "from the labels"],
        [
            "within-class variance",
            fmt(c.within_class_variance),
            "mean over classes of 1 − ||mean_c||², rows of both views; 0 = collapsed to a point",
        ],
        ["within-class variance by class", per_class, "sorted label order"],
        [
            "between-class variance",
            fmt(c.between_class_variance),
            "Σ_c (n_c/n) ||mean_c − mean||²; total = Σ_c (n_c/n) within_c + between",
        ],
        ["total variance", fmt(c.total_variance), "1 − ||mean||², mean over all rows"],
        [
            "s_w",
            fmt(c.s_w),
            "mean similarity of same-class pairs of different instances (both views)",
        ],
        ["s_b", fmt(c.s_b), "mean similarity of pairs of different classes"],
        ["SSEM identity residual", fmt(c.ssem_residual), residual],
        ["collapsed", fmt(c.collapsed), f"within-class variance < ε = {fmt(c.epsilon)}"],
    ]
    notes = []
    if c.collapsed:
        notes.append(
            Note(
                f"Class collapse in '{name}': the mean within-class variance "
                f"{fmt(c.within_class_variance, 4)} is below ε = {fmt(c.epsilon)}; the instances "
                "of each class sit on one point, so nothing but the label is left to tell them "
                "apart (paper-notes 11.3)."
            )
        )
    table = Table(
        columns=["quantity", "value", "convention"],
        rows=rows,
        caption="Class collapse (exact, from class sums over every instance).",
    )
    return table, notes


def validity_caveat(result: Result, name: str) -> Note | None:
    """The validity note of a layer too narrow for the optima: the theory panel's checks
    (``theory.layers``), or for a result without them the same test
    (:func:`cl_diag.measurement.theory.validity`)."""
    layer = result.layers[name]
    theory = result.theory
    batch_size = theory.batch_size if theory is not None else None
    check = (theory.layers or {}).get(name) if theory is not None else None
    if check is not None:
        caveat, below_m = check.caveat, check.d_below_m_minus_1
    else:
        caveat, below_m = validity(layer.d, result.n_ref, batch_size)
    if not caveat:
        return None
    n_ref, d = result.n_ref, layer.d
    extra = ""
    if below_m and batch_size is not None:
        extra = f" Here d < m − 1 = {batch_size - 1} as well, below what Theorem 5.5 assumes."
    return Note(
        f"Validity: d = {d} < n_ref − 1 = {n_ref - 1}. The optimum predictions (Thm 5.1, 5.3, "
        "5.5) assume a simplex fits (d ≥ n_ref − 1, and d ≥ m − 1 per batch); with a narrower "
        "embedding they are "
        f"qualitative (paper-notes 11.4): compare trends, not values.{extra}"
    )


def _band_text(band: VarianceBand | None) -> str:
    if band is None:
        return MISSING
    return f"[{fmt(band.lo)}, {fmt(band.hi)}]"


def _stat(layer: Layer, kind: str, read) -> object:
    """One statistic of one pair type of a layer; None when the layer lacks the pair type."""
    stats = layer.pairs.get(kind)
    return None if stats is None else read(stats)


def _inverse_d(layer: Layer) -> str:
    """1/d, the variance of the similarity of uniformly random unit vectors (paper-notes 11.4)."""
    return fmt(1.0 / layer.d) if layer.d > 0 else MISSING


def _regime_words(pairs: int | None, n_ref: int, m: int | None) -> str:
    """Where an N-dependent prediction holds (N = ``pairs``): one fixed mini-batch or the full
    batch."""
    if pairs is not None and pairs == n_ref:
        return f"full batch, N = n_ref = {fmt(pairs)}"
    if pairs is not None and pairs == m:
        return f"one fixed mini-batch, N = m = {fmt(pairs)}"
    return f"N = {fmt(pairs)}"


def _eq10_text(eq10: Eq10) -> str:
    verdict = "holds, excessive separation predicted (Thm 5.3)" if eq10.holds else "does not hold"
    return (
        f"(1 + exp(t/(n−1) + b)) / (1 + exp(t − b)) = {fmt(eq10.lhs)} vs (n−2)/2 = "
        f"{fmt(eq10.rhs)}: {verdict}"
    )


def _regime_table(theory: Theory, n_ref: int) -> Table | None:
    """Each N-dependent prediction (Thm 5.3 against 5.1(iii), Eq. 10, the CCEM optimum) for one
    fixed mini-batch and for the full batch, side by side; None without a full-batch block."""
    full = theory.full_batch
    if full is None:
        return None
    m = theory.batch_size
    sig = theory.sigmoid
    rows: list[list[Cell]] = [
        ["theorem", fmt(theory.theorem), fmt(full.theorem)],
        [
            "positive mean at the optimum",
            fmt(theory.predicted.positive_mean),
            fmt(full.predicted.positive_mean),
        ],
        [
            "negative mean at the optimum",
            fmt(theory.predicted.negative_mean),
            fmt(full.predicted.negative_mean),
        ],
    ]
    if theory.condition is not None and full.condition is not None:
        rows.append(
            [
                "phi'(1) vs ((N−2)/(2(N−1))) psi'(−1/(N−1))",
                f"{fmt(theory.condition.dphi_at_1)} vs {fmt(theory.condition.rhs)}",
                f"{fmt(full.condition.dphi_at_1)} vs {fmt(full.condition.rhs)}",
            ]
        )
    if sig is not None and full.eq10 is not None:
        rows.append(["Eq. 10", _eq10_text(sig.eq10), _eq10_text(full.eq10)])
    if sig is not None and full.ccem is not None:
        rows.append(
            [
                "CCEM optimum: regime, x*",
                f"{fmt(sig.ccem.regime)}, {fmt(sig.ccem.x_star)}",
                f"{fmt(full.ccem.regime)}, {fmt(full.ccem.x_star)}",
            ]
        )
    return Table(
        columns=["prediction", _regime_words(theory.N, n_ref, m), _regime_words(full.N, n_ref, m)],
        rows=rows,
        caption=(
            "Where each prediction holds: the cross-view-only additive loss's optimum depends on "
            "the number of pairs N it sees. Fixed mini-batches of m pairs (Thm 5.5's setting) each "
            "reach the N = m optimum; a full batch of the n_ref training instances the N = n_ref "
            "one."
        ),
    )


def _vrn_weight(result: Result) -> float:
    """The run's VRN weight from its training config (0 when off or unknown)."""
    value = result.config.get("vrn")
    if isinstance(value, dict):  # a nested config: {"enabled": ..., "lambda": ...}
        value = value.get("lambda") if value.get("enabled", True) else 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value)


def theory_blocks(result: Result) -> list:
    theory = result.theory
    if theory is None:
        return []
    loss = theory.loss
    m = theory.batch_size
    n_ref = theory.n_ref if theory.n_ref is not None else result.n_ref
    blocks: list = [Heading(2, "Theory panel: predicted next to measured")]
    applies = fmt(theory.theorem)
    if theory.full_batch is not None:
        applies = (
            f"{fmt(theory.theorem)} ({_regime_words(theory.N, n_ref, m)}), "
            f"{fmt(theory.full_batch.theorem)} ({_regime_words(theory.full_batch.N, n_ref, m)})"
        )
    blocks.append(
        Paragraph(
            f"Loss {fmt(loss.name)}, family {fmt(loss.family)}, (c1, c2) = "
            f"({fmt(loss.c1)}, {fmt(loss.c2)}); applicable theorem: {applies}. "
            f"{theory.statement or ''}".rstrip()
            + f" Training batch size m = {fmt(m)}; n = n_ref = {fmt(n_ref)}."
        )
    )
    sig = theory.sigmoid
    if sig is not None:
        eq10, ccem = sig.eq10, sig.ccem
        blocks.append(
            Paragraph(
                f"Sigmoid loss, t = {fmt(sig.t)}, b = {fmt(sig.b)} "
                "(paper convention, b = −b_SigLIP). "
                f"Eq. 10 at {_regime_words(eq10.N if eq10.N is not None else ccem.N, n_ref, m)}, "
                f"n = N: {_eq10_text(eq10)}. "
                f"Double-constant (CCEM) optimum at N = {fmt(ccem.N)}: regime {fmt(ccem.regime)}, "
                f"x* = {fmt(ccem.x_star)} (paper-notes 11.1)."
            )
        )
    regimes = _regime_table(theory, n_ref)
    if regimes is not None:
        blocks.append(regimes)
    if theory.ssem is not None:
        blocks += ssem_blocks(result, theory.ssem, theory.loss_layer)
    predicted = theory.predicted
    band = theory.variance_band
    vrn = _vrn_weight(result)
    layers = result.layers
    loss_layer = theory.loss_layer
    # The theorems describe the embedding the loss is computed on; other layers are context.
    # (Results without loss_layer get the predictions beside every layer, as before.)
    main = [loss_layer] if loss_layer in layers else list(layers)
    for name in main:
        layer = layers[name]
        pos_mean = _stat(layer, "positive", lambda s: s.mean)
        xneg_mean = _stat(layer, "cross_view_negative", lambda s: s.mean)
        xneg_var = _stat(layer, "cross_view_negative", lambda s: s.var)
        d = layer.d
        optimum = (
            "full-batch optimum (Thm 5.1); the mean over all pairs of the fixed-batch optimum "
            "too (Thm 5.5)"
            if (theory.theorem or "").startswith("5.1")
            else f"optimum at {_regime_words(theory.N, n_ref, m)}"
        )
        rows = [
            [
                "positive mean",
                fmt(predicted.positive_mean),
                fmt(pos_mean),
                optimum,
            ],
            [
                "positive mean, upper bound",
                f"≤ {fmt(layer.geometry.alignment_ceiling.value)}",
                fmt(pos_mean),
                "Thm 5.2: 1 + mean cross-view negative + 1/(n_ref − 1), from this layer's "
                "measurement",
            ],
            [
                "cross-view negative mean",
                fmt(predicted.negative_mean),
                fmt(xneg_mean),
                "−1/(n_ref − 1) (Thm 5.1, 5.5)"
                if (theory.theorem or "").startswith("5.1")
                else optimum,
            ],
            [
                "cross-view negative variance",
                _band_text(band),
                fmt(xneg_var),
                f"Thm 5.5 band (Eq. 11), n = {fmt(band.n if band else None)}, "
                f"m = {fmt(band.m if band else None)}, fixed batches, the prediction without VRN"
                + (
                    f" (this run has VRN λ = {fmt(vrn)}, which changes the fixed-batch optimum: "
                    "the band is shown for reference only)"
                    if vrn
                    else ""
                ),
            ],
            [
                "variance of random unit vectors",
                _inverse_d(layer),
                fmt(xneg_var),
                f"1/d, d = {fmt(d)} (paper-notes 11.4 reference)",
            ],
        ]
        if theory.within_batch_optimum is not None:
            rows.append(
                [
                    "within-batch negative (per-batch simplex)",
                    fmt(theory.within_batch_optimum),
                    MISSING,
                    "−1/(m − 1): each batch's own simplex at the mini-batch optimum (Thm 5.5); "
                    "not measurable from pairs",
                ]
            )
        full = theory.full_batch
        if sig is not None:
            rows.append(
                [
                    "positive mean (CCEM, N = m)",
                    fmt(sig.ccem.s_pos),
                    fmt(pos_mean),
                    "paper-notes 11.1",
                ]
            )
            rows.append(
                [
                    "negative mean (CCEM, N = m)",
                    fmt(sig.ccem.s_neg),
                    fmt(xneg_mean),
                    "paper-notes 11.1",
                ]
            )
        if full is not None and full.ccem is not None:
            rows.append(
                [
                    "positive mean (CCEM, full batch N = n_ref)",
                    fmt(full.ccem.s_pos),
                    fmt(pos_mean),
                    "paper-notes 11.1",
                ]
            )
            rows.append(
                [
                    "negative mean (CCEM, full batch N = n_ref)",
                    fmt(full.ccem.s_neg),
                    fmt(xneg_mean),
                    "paper-notes 11.1",
                ]
            )
        blocks.append(
            Table(
                columns=["quantity", "predicted", f"measured ({name})", "source"],
                rows=rows,
                caption=f"Layer '{name}' (d = {fmt(d)})"
                + (
                    ": the layer the loss sees, which the theorems describe."
                    if name == loss_layer
                    else "."
                ),
            )
        )
        caveat = validity_caveat(result, name)
        if caveat is not None:
            blocks.append(caveat)
    context = [n for n in layers if n not in main]
    if context and loss_layer is not None:
        blocks.append(_theory_context_table(result, loss_layer, context))
    return blocks


def ssem_blocks(result: Result, ssem: Ssem, loss_layer: str | None) -> list:
    """The SSEM prediction of a supcl run beside the loss layer's collapse diagnostics."""
    layer = result.layers.get(loss_layer) if loss_layer is not None else None
    measured = layer.collapse if layer is not None else None

    def got(read) -> str:
        return MISSING if measured is None else fmt(read(measured))

    implied_beta = (
        None
        if measured is None or measured.within_class_variance is None
        else 1.0 - measured.within_class_variance
    )
    pred = ssem.predicted
    where = f"m = {fmt(ssem.m)}, n = {fmt(ssem.n)}, p = {fmt(ssem.p)}, τ = {fmt(ssem.tau)}"
    rows = [
        [
            "collapse threshold α_c",
            fmt(ssem.alpha_c),
            f"α = {fmt(ssem.alpha)}",
            f"1 − (n−1)p(1−ρ)/(k + (n−1)p + (m−1)np·ρ), ρ = exp(−m/((m−1)τ)), k = p − 1; {where}",
        ],
        [
            "β* (1 = class collapse)",
            fmt(ssem.beta_star),
            fmt(implied_beta),
            "argmin of the loss on the SSEM (convex in β); measured: 1 − within-class variance",
        ],
        [
            "within-class variance",
            fmt(pred.within_class_variance),
            got(lambda c: c.within_class_variance),
            "1 − β*",
        ],
        ["s_w", fmt(pred.s_w), got(lambda c: c.s_w), "(nβ* − 1)/(n − 1)"],
        ["s_b", fmt(pred.s_b), got(lambda c: c.s_b), "−β*/(m − 1)"],
        [
            "SSEM identity residual",
            fmt(0.0),
            got(lambda c: c.ssem_residual),
            "1 + (n−1)s_w + n(m−1)s_b (measured with n, m of the measured sample)",
        ],
        [
            "class collapse",
            fmt(ssem.regime == "collapse"),
            got(lambda c: c.collapsed),
            "predicted: α ≤ α_c; measured: within-class variance < ε",
        ],
    ]
    name = loss_layer or MISSING
    blocks: list = [
        Table(
            columns=["quantity", "predicted (SSEM)", f"measured ({name})", "formula"],
            rows=rows,
            caption=(
                f"Supervised contrastive with a self-supervised share (supcl, variant B): the "
                f"simplex-to-simplex embedding model on the balanced batch ({where}) beside the "
                f"class-collapse diagnostics of '{name}' (paper-notes 11.3)."
            ),
        )
    ]
    if ssem.d_below_mn_minus_1 and layer is not None:
        mn = (ssem.m or 0) * (ssem.n or 0)
        blocks.append(
            Note(
                f"Validity: d = {fmt(layer.d)} < mn − 1 = {fmt(mn - 1)}: "
                "the SSEM does not fit in the layer, so its prediction is qualitative (compare "
                "the trend in α, not the values)."
            )
        )
    if ssem.small_alpha:
        blocks.append(
            Note(
                "Small-α regime: with α ≤ 0.1 at τ ≤ 0.1, free optimisation of this loss (variant "
                "B) left the SSEM (same-instance views, then only negatives, split apart; "
                "paper-notes 11.3); the prediction may not describe the optimum here."
            )
        )
    return blocks


def _theory_context_table(result: Result, loss_layer: str, names: list[str]) -> Table:
    """The other layers' measurements beside the loss layer's, without predictions."""
    shown = [result.layers[n] for n in (loss_layer, *names)]
    rows = [
        ["positive mean", *[fmt(_stat(layer, "positive", lambda s: s.mean)) for layer in shown]],
        [
            "Thm 5.2 ceiling on the positive mean",
            *[fmt(layer.geometry.alignment_ceiling.value) for layer in shown],
        ],
        [
            "cross-view negative mean",
            *[fmt(_stat(layer, "cross_view_negative", lambda s: s.mean)) for layer in shown],
        ],
        [
            "cross-view negative variance",
            *[fmt(_stat(layer, "cross_view_negative", lambda s: s.var)) for layer in shown],
        ],
        ["1/d (random unit vectors)", *[_inverse_d(layer) for layer in shown]],
    ]
    return Table(
        columns=["measured", f"{loss_layer} (loss layer)", *[f"{n} (context only)" for n in names]],
        rows=rows,
        caption=(
            f"Context only: {', '.join(repr(n) for n in names)} measured beside '{loss_layer}'. "
            f"The loss is computed on '{loss_layer}', so the theorems' predictions are not "
            "expected to hold for the other layers; the Thm 5.2 ceiling is each layer's own."
        ),
    )


def _splits_text(splits: dict[str, SplitSize] | None) -> str:
    if not splits:
        return ""
    parts = [
        f"{name} {fmt(split.images)} of {fmt(split.of)} images" for name, split in splits.items()
    ]
    return f" ({', '.join(parts)})" if parts else ""


def _baseline_value(probes: Probes, name: str, metric: Metric) -> object:
    base = probes.baseline(name)
    if base is None:
        return None
    value = metric.read(base)
    if value is None and name == "raw_pixels" and metric.k is not None:
        # raw pixels have no layers: their one retrieval (PIXELS) is the baseline of every layer's
        value = base.recall(PIXELS, metric.k)
    return value


def test_images(probes: Probes | None) -> int | None:
    """How many test images the classification probes were scored on (None: not recorded)."""
    split = ((probes.splits or {}) if probes is not None else {}).get("test")
    return split.images if split is not None else None


def is_test_accuracy(metric: Metric) -> bool:
    """An accuracy scored on the test split (linear and kNN), which carries a Wilson interval."""
    return metric.accuracy and metric.key.startswith(("linear_", "knn_"))


def probe_blocks(result: Result) -> list:
    probes = result.probes
    if probes is None:
        return []
    base_names = [b for b in BASELINES if probes.baseline(b) is not None]
    columns = [
        "probe",
        "trained",
        *[{"raw_pixels": "raw pixels", "random_init": "random init"}[b] for b in base_names],
    ]
    rows = []
    n_test = test_images(probes)
    for metric in probe_report_metrics(probes.retrieval or {}):
        if is_test_accuracy(metric):
            show = lambda v: pct_interval(v, n_test)  # noqa: E731
        else:
            show = pct if metric.accuracy else (lambda v: fmt(v, 4))
        values = [metric.read(probes)] + [_baseline_value(probes, b, metric) for b in base_names]
        if all(v is None for v in values):
            continue
        rows.append([metric.report_title, *[show(v) for v in values]])
    raw = probes.baseline("raw_pixels")
    pixel_retrieval = raw is not None and PIXELS in (raw.retrieval or {})
    blocks: list = [
        Heading(2, "Probes"),
        Table(
            columns=columns,
            rows=rows,
            caption=(
                f"Linear, kNN and k-means probes on {probes.layer} features"
                + (" (projector dropped)" if probes.layer == "backbone" else "")
                + ", L2-normalised, un-augmented train/test splits"
                f"{_splits_text(probes.splits)}; retrieval: "
                "rank of v_i among all v for each u_i, on the two augmented views of the layer "
                "named. Accuracies in %, "
                + (
                    "with the 95 % Wilson interval of the test split in brackets, "
                    if n_test is not None
                    else ""
                )
                + "NMI in [0, 1], ARI in [−1, 1]. "
                "Baselines: the same probes on raw input pixels and on the architecture at random "
                "initialisation"
                + (
                    "; raw-pixel retrieval compares the two views' pixels directly, one value for "
                    "every layer."
                    if pixel_retrieval
                    else "."
                )
            ),
        ),
    ]
    for probe, reason in (probes.skipped or {}).items():
        blocks.append(Note(f"The {probe} probe was not run: {reason}."))
    settings_rows = []
    for probe, block in (
        ("linear", probes.linear),
        ("knn", probes.knn),
        ("clustering", probes.clustering),
    ):
        if block is None:
            continue
        if (
            probe == "linear"
            and probes.linear is not None
            and probes.linear.weight_decay is not None
        ):
            settings_rows.append(
                [probe, "weight_decay (chosen)", fmt_setting(probes.linear.weight_decay)]
            )
        for key, value in flatten(block.settings or {}).items():
            settings_rows.append([probe, key, fmt_setting(value)])
    if settings_rows:
        blocks.append(
            Table(
                columns=["probe", "setting", "value"], rows=settings_rows, caption="Probe settings."
            )
        )
    return blocks


def config_blocks(result: Result) -> list:
    if not result.config:
        return []
    rows = [[key, fmt_setting(value)] for key, value in flatten(result.config).items()]
    return [
        Heading(2, "Training config"),
        Table(
            columns=["option", "value"],
            rows=rows,
            caption="The training config stored in the checkpoint.",
        ),
    ]


def layer_blocks(result: Result, name: str, layer: Layer) -> list:
    thresholds = [(result.n_ref, result.threshold)]
    blocks: list = [
        Heading(2, f"Layer '{name}' (n = {fmt(layer.n)}, d = {fmt(layer.d)})"),
        pair_table(result, layer),
    ]
    split = by_class_table(result, layer)
    if split is not None:
        blocks.append(split)
    svg = figures.similarity_distributions(
        {k: s.histogram for k, s in layer.pairs.items()}, thresholds, name
    )
    if svg is not None:
        bins = sorted({s.histogram.bins for s in layer.pairs.values()})
        blocks.append(
            Figure(
                filename=f"similarities_{name}.svg",
                svg=svg,
                alt="Distributions of positive, cross-view and within-view negative cosine "
                f"similarities, layer {name}",
                caption=(
                    f"Densities of the three pair types, drawn from the stored histograms "
                    f"({', '.join(fmt(b) for b in bins)} bins on [−1, 1], at most "
                    f"{figures.MAX_DISPLAY_BINS} bars shown). "
                    f"Dashed line: {threshold_text(result)}; "
                    + (
                        "at this scale it sits visually at 0."
                        if abs(result.threshold) < 0.01
                        else "the ratios above count similarities strictly left of it."
                    )
                ),
            )
        )
    table, notes = geometry_table(result, layer, name)
    blocks += [Heading(3, f"Geometry of '{name}'"), table, *notes]
    spec_svg = figures.spectrum(layer.geometry.spectrum, name)
    if spec_svg is not None:
        blocks.append(
            Figure(
                filename=f"spectrum_{name}.svg",
                svg=spec_svg,
                alt=f"Covariance eigenvalues of each view, layer {name}",
                caption="Eigenvalues of each view's embedding covariance, descending, log scale "
                "(zeros omitted).",
            )
        )
    if layer.collapse is not None:
        table, notes = collapse_table(name, layer.collapse)
        blocks += [Heading(3, f"Class collapse of '{name}'"), table, *notes]
    return blocks


def _views_text(views: dict) -> str:
    parts = []
    if views.get("num_images") is not None:
        pool = f" of {fmt(views.get('pool'))}" if views.get("pool") is not None else ""
        parts.append(f"{fmt(views.get('num_images'))}{pool} training images")
    for key in ("sampling", "augmentation", "mode"):
        if views.get(key):
            parts.append(str(views[key]))
    if "amp" in views:
        parts.append("mixed precision (AMP)" if views.get("amp") else "float32, no AMP")
    parts += [
        f"{k} = {fmt_setting(v)}"
        for k, v in views.items()
        if k not in ("num_images", "pool", "sampling", "augmentation", "mode", "amp")
    ]
    return "; ".join(parts)


def source_rows(source: Source) -> list[list[str]]:
    """What was analysed and how its two views were made: the header rows from ``source``."""
    provenance = source.provenance if isinstance(source.provenance, dict) else {}

    def with_origin(key: str, value: object) -> str:
        origin = provenance.get(key)
        return fmt(value) + (f" (from {origin})" if origin else "")

    path = source.path if source.path is not None else MISSING
    rows = [["source", f"{source.kind or MISSING}: {path}"]]
    if source.format is not None:
        rows.append(["checkpoint format", fmt(source.format)])
    if source.arch is not None:
        rows.append(["architecture", with_origin("arch", source.arch)])
    if source.dataset is not None:
        n_train = f", {fmt(source.n_train)} training images" if source.n_train is not None else ""
        rows.append(["dataset", with_origin("dataset", source.dataset) + n_train])
    step = source.step if source.step is not None else source.global_step
    if source.epoch is not None or step is not None:
        trained = f"epoch {fmt(source.epoch)}, step {fmt(step)}"
        if source.complete is not None:
            trained += (
                " (run complete)"
                if source.complete
                else " (run not complete: an intermediate checkpoint)"
            )
        rows.append(["checkpoint taken at", trained])
    padding = source.cifar_stem_padding
    if isinstance(padding, dict):
        rows.append(
            [
                "CIFAR stem padding",
                f"{fmt(padding.get('value'))} ({padding.get('from', 'origin not recorded')})",
            ]
        )
    elif padding is not None:
        rows.append(["CIFAR stem padding", fmt(padding)])
    if isinstance(source.views, dict) and source.views:
        rows.append(["two views", _views_text(source.views)])
    if source.weights_sha256 is not None:
        rows.append(["weights sha256", fmt(source.weights_sha256)])
    else:
        rows.append(["source sha256", fmt(source.sha256)])
    if isinstance(source.versions, dict) and source.versions:
        rows.append(
            ["trained with", ", ".join(f"{k} {fmt(v)}" for k, v in source.versions.items())]
        )
    for key, value in flatten(source.extra).items():
        if value is None or value == [] or value == {}:
            continue
        rows.append([key.replace("_", " "), fmt_setting(value)])
    return rows


def analysis_findings(result: Result) -> list[Finding]:
    """The claims that apply to one run, on the layer its loss sees: excessive separation,
    the Thm 5.2 ceiling, and without VRN the Thm 5.5 band (cl_diag.report.findings)."""
    from cl_diag.report.comparison import run_facts

    data = RunData.of(result, facts=run_facts(result))
    if data is None:
        return []
    return run_findings([replace(data, label=f"this run, {data.layer}")])


def build_analysis(result: Result) -> Document:
    source = result.source
    layers = result.layers
    tool = result.tool
    header_rows = [
        *source_rows(source),
        *[[f"layer '{name}'", f"n = {fmt(m.n)}, d = {fmt(m.d)}"] for name, m in layers.items()],
        ["n_ref", f"{fmt(result.n_ref)} (training instances the threshold refers to)"],
        ["threshold", threshold_text(result)],
        ["mode", mode_text(result)],
        [
            "seed",
            fmt(result.seed)
            + (
                " (of this analysis: image sample, augmentations, sampled pairs, probes)"
                if source.kind in ("checkpoint", "module")
                else " (of this analysis: sampled pairs)"
            ),
        ],
        ["similarity", SIMILARITY_CONVENTION],
        ["schema / tool", f"{fmt(result.schema)} / {tool.name} {tool.version}".rstrip()],
    ]
    blocks: list = [Heading(1, "cl-diag analysis")]
    blocks += findings_blocks(analysis_findings(result))
    blocks += [
        Heading(2, "Run"),
        Table(columns=["item", "value"], rows=header_rows, caption="Run."),
    ]
    if result.conventions:
        blocks.append(
            Table(
                columns=["convention", "value"],
                rows=[[k, fmt_setting(v)] for k, v in result.conventions.items()],
                caption="Conventions behind every number below.",
            )
        )
    for name, layer in layers.items():
        blocks += layer_blocks(result, name, layer)
    blocks += probe_blocks(result)
    blocks += theory_blocks(result)
    blocks += config_blocks(result)
    blocks += analysis_environment(result)
    return Document(title=f"cl-diag analysis: {source.path or ''}".rstrip(": "), blocks=blocks)
