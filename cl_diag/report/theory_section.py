"""The theory section of one run's report: the paper's predictions next to what was measured.

Built from the run's ``theory`` block (:func:`cl_diag.measurement.theory.theory_panel`, Lee,
Lim, Lee, Sohn, ICML 2025: Thms 5.1-5.5, Eq. 10 and the double-constant optimum of the sigmoid
loss) and, for a supcl run, its SSEM block (the class-collapse threshold α_c and the optimum β*
on the simplex-to-simplex embedding model, paper-notes 11.3) beside the loss layer's pair
statistics and class-collapse diagnostics. Layers other than the loss layer are context only.
"""

from __future__ import annotations

from cl_diag.measurement.ssem import SSEM_VARIANT_TEXT, ssem_alpha_split, ssem_other_variant
from cl_diag.measurement.theory import validity
from cl_diag.report.document import MISSING, Cell, Figure, Heading, Note, Paragraph, Table, fmt
from cl_diag.result import Eq10, Layer, Result, Ssem, Theory, VarianceBand
from cl_diag.runconfig import RunConfig, Vrn
from cl_diag.vocabulary import PairType

__all__ = ["phase_blocks", "ssem_blocks", "theory_blocks", "validity_caveat"]


def _weight_text(vrn: Vrn) -> str:
    """VRN's λ as a report prints it."""
    return "not recorded" if vrn.weight is None else fmt(vrn.weight)


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


def theory_blocks(result: Result, config: RunConfig) -> list:
    """The theory panel of one run beside its measurements: the applicable theorem, the
    N-dependent predictions for one mini-batch and the full batch, the SSEM of a supcl run,
    and per loss layer the predicted and the measured means and variance. ``config`` is the
    run's training config (its VRN decides what the Thm 5.5 band is shown for)."""
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
    vrn = config.vrn
    layers = result.layers
    loss_layer = theory.loss_layer
    # The theorems describe the embedding the loss is computed on; other layers are context.
    # (Results without loss_layer get the predictions beside every layer, as before.)
    main = [loss_layer] if loss_layer in layers else list(layers)
    for name in main:
        layer = layers[name]
        pos_mean = _stat(layer, PairType.POSITIVE, lambda s: s.mean)
        xneg_mean = _stat(layer, PairType.CROSS_VIEW_NEGATIVE, lambda s: s.mean)
        xneg_var = _stat(layer, PairType.CROSS_VIEW_NEGATIVE, lambda s: s.var)
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
                    f" (this run has VRN λ = {_weight_text(vrn)}, which changes the fixed-batch "
                    "optimum: the band is shown for reference only)"
                    if vrn.on
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
    variant = ssem.variant or "B"
    other = ssem_other_variant(ssem)
    other_name, other_opt = other if other is not None else ("A" if variant == "B" else "B", None)

    def beside(read) -> str:
        return MISSING if other_opt is None else fmt(read(other_opt))

    s_w_b = (MISSING, MISSING) if other_opt is None else (fmt(other_opt.s_w), fmt(other_opt.s_b))
    split = ssem_alpha_split(ssem) if variant == "B" else None
    where = f"m = {fmt(ssem.m)}, n = {fmt(ssem.n)}, p = {fmt(ssem.p)}, τ = {fmt(ssem.tau)}"
    k_text = "k = p − 1" if variant == "B" else "k = p"
    rows = [
        [
            "collapse threshold α_c",
            fmt(ssem.alpha_c),
            beside(lambda o: o.alpha_c),
            f"α = {fmt(ssem.alpha)}",
            f"1 − (n−1)p(1−ρ)/(k + (n−1)p + (m−1)np·ρ), ρ = exp(−m/((m−1)τ)), {k_text} "
            f"(variant {other_name}: the other k); {where}",
        ],
        [
            "view-split threshold α_s",
            fmt(split),
            "not derived",
            f"α = {fmt(ssem.alpha)}",
            "(p−1)(1 − mnpρ)/(np − 1 + (m−1)npρ): below it the views of an instance part at "
            "variant B's optimum and the SSEM is not the optimum (docs/ssem.md)",
        ],
        [
            "β* (1 = class collapse)",
            fmt(ssem.beta_star),
            beside(lambda o: o.beta),
            fmt(implied_beta),
            "argmin of the loss on the SSEM (convex in β); measured: 1 − within-class variance",
        ],
        [
            "within-class variance",
            fmt(pred.within_class_variance),
            beside(lambda o: o.within_class_variance),
            got(lambda c: c.within_class_variance),
            "1 − β*",
        ],
        ["s_w", fmt(pred.s_w), s_w_b[0], got(lambda c: c.s_w), "(nβ* − 1)/(n − 1)"],
        ["s_b", fmt(pred.s_b), s_w_b[1], got(lambda c: c.s_b), "−β*/(m − 1)"],
        [
            "SSEM identity residual",
            fmt(0.0),
            fmt(0.0),
            got(lambda c: c.ssem_residual),
            "1 + (n−1)s_w + n(m−1)s_b (measured with n, m of the measured sample)",
        ],
        [
            "class collapse",
            fmt(ssem.regime == "collapse"),
            beside(lambda o: o.regime == "collapse"),
            got(lambda c: c.collapsed),
            "predicted: α ≤ α_c; measured: within-class variance < ε",
        ],
    ]
    name = loss_layer or MISSING
    blocks: list = [
        Table(
            columns=[
                "quantity",
                f"predicted (SSEM, variant {variant})",
                f"variant {other_name}",
                f"measured ({name})",
                "formula",
            ],
            rows=rows,
            caption=(
                f"Supervised contrastive with a self-supervised share (supcl): the "
                f"simplex-to-simplex embedding model on the balanced batch ({where}) beside the "
                f"class-collapse diagnostics of '{name}' (paper-notes 11.3). The prediction is "
                f"variant {variant}'s ({SSEM_VARIANT_TEXT[variant]}), the loss this run "
                f"trained; variant {other_name}'s ({SSEM_VARIANT_TEXT[other_name]}) is beside "
                "it, to show how much the prediction rests on which rows the loss keeps."
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
    alpha_split = ssem_alpha_split(ssem)  # recomputed: older results do not record it
    if ssem.alpha is not None and alpha_split is not None and ssem.alpha < alpha_split:
        blocks.append(
            Note(
                f"Outside the SSEM's region: α = {fmt(ssem.alpha)} < α_s = "
                f"{fmt(alpha_split)}, where the optimum of this loss (variant B) parts the "
                "views of each instance (a same-instance view sits in every denominator but is "
                "never a supervised positive) and lies below the SSEM's loss; the SSEM's "
                "prediction does not describe the optimum here (docs/ssem.md)."
            )
        )
    return blocks


def _theory_context_table(result: Result, loss_layer: str, names: list[str]) -> Table:
    """The other layers' measurements beside the loss layer's, without predictions."""
    shown = [result.layers[n] for n in (loss_layer, *names)]
    rows = [
        [
            "positive mean",
            *[fmt(_stat(layer, PairType.POSITIVE, lambda s: s.mean)) for layer in shown],
        ],
        [
            "Thm 5.2 ceiling on the positive mean",
            *[fmt(layer.geometry.alignment_ceiling.value) for layer in shown],
        ],
        [
            "cross-view negative mean",
            *[fmt(_stat(layer, PairType.CROSS_VIEW_NEGATIVE, lambda s: s.mean)) for layer in shown],
        ],
        [
            "cross-view negative variance",
            *[fmt(_stat(layer, PairType.CROSS_VIEW_NEGATIVE, lambda s: s.var)) for layer in shown],
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


def phase_blocks(result: Result) -> list:
    """The phase diagram of the run's setting, its point starred (:mod:`cl_diag.report.phase`,
    what ``cl-diag theory`` draws before training): the (tau, alpha) plane of a supcl run with
    an SSEM block, the (t, b) plane of a cross-view-only sigmoid run, or the Thm 5.5 band
    against the batch size of a run it applies to; nothing otherwise."""
    from cl_diag.report import phase

    theory = result.theory
    if theory is None:
        return []
    ssem, sig, band = theory.ssem, theory.sigmoid, theory.variance_band
    if ssem is not None and None not in (ssem.alpha, ssem.tau, ssem.m, ssem.n, ssem.p):
        assert ssem.alpha is not None and ssem.tau is not None  # (for the type checker)
        assert ssem.m is not None and ssem.n is not None and ssem.p is not None
        name, svg = (
            "phase_supcl.svg",
            phase.ssem_phase(ssem.tau, ssem.alpha, ssem.m, ssem.n, ssem.p),
        )
        what = (
            f"The (τ, α) plane of the supcl loss on {fmt(ssem.m)} classes × {fmt(ssem.n)} "
            f"instances × {fmt(ssem.p)} views: below α_c(τ) (solid: variant B, this loss; "
            "dashed: variant A) the optimum collapses every class, above it the SSEM keeps "
            "instances apart; below α_s(τ) (dotted) the views of an instance part and the SSEM "
            "is not the optimum (docs/ssem.md)."
        )
    elif sig is not None and sig.t is not None and sig.b is not None and sig.eq10.N is not None:
        name, svg = "phase_sigmoid.svg", phase.sigmoid_phase(sig.t, sig.b, sig.eq10.N)
        what = (
            f"The (t, b) plane of the cross-view-only sigmoid loss over N = {fmt(sig.eq10.N)} "
            "pairs: above the Eq. 10 boundary the optimum is the simplex ETF; below it the "
            "negatives are over-separated, at the CCEM's interior x* down to the antipodal "
            "boundary t + b = log((N−2)/2), antipodal below (paper-notes 11.1)."
        )
    elif band is not None and band.n is not None and band.m is not None:
        name, svg = "band_batch_size.svg", phase.band_phase(band.n, band.m)
        what = (
            f"Thm 5.5's band (Eq. 11) of the negatives' variance at the fixed-batch optimum "
            f"against the batch size, for n = {fmt(band.n)} instances, without VRN."
        )
    else:
        return []
    return [
        Figure(
            filename=name,
            svg=svg,
            alt="Phase diagram of the run's setting, its point starred",
            caption=f"{what} The star is this run's setting; `cl-diag theory` draws the same "
            "before training.",
        )
    ]
