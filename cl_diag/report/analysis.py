"""The content of one run's report, built from its :class:`~cl_diag.result.Result` alone.

Every number is printed next to its convention (normalisation, which pairs,
n_ref and the threshold, exact or sampled, quantile error, epsilon), as the
foundation issue asks. Blocks that a result lacks (``by_class`` without labels,
``probes``/``theory``/``config`` for an embeddings file) are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cl_diag.measurement.pairs import EXCESS_MARGIN
from cl_diag.measurement.stats import pair_mean_se, z_value
from cl_diag.report import figures
from cl_diag.report.claims import Finding, RunData, findings_blocks, run_findings
from cl_diag.report.document import (
    MISSING,
    SIMILARITY_CONVENTION,
    Document,
    Figure,
    Heading,
    Note,
    Table,
    flatten,
    fmt,
    fmt_setting,
)
from cl_diag.report.embedding_view import embedding_view_blocks
from cl_diag.report.environment import analysis_environment
from cl_diag.report.overview import appendix, arrange, headline_rows, verdict_line
from cl_diag.report.probe_section import probe_blocks, probe_settings_tables
from cl_diag.report.runs import loss_layer
from cl_diag.report.theory_section import phase_blocks, theory_blocks
from cl_diag.result import QUANTILES, Collapse, ImageSize, Layer, PairStats, Result, Source
from cl_diag.runconfig import RunConfig
from cl_diag.vocabulary import NEGATIVE_TYPES, PAIR_TYPES, PairType


def threshold_text(result: Result) -> str:
    return f"δ = −1/(n_ref − 1) = {fmt(result.delta)} with n_ref = {fmt(result.n_ref)}"


def mode_text(result: Result) -> str:
    if result.mode == "sampled":
        return (
            f"sampled: {fmt(result.num_pairs)} pairs of each type drawn uniformly with seed "
            f"{fmt(result.seed)} (estimates)"
        )
    if result.mode == "moments":
        return (
            "moments: exact count, mean, variance and std of every pair in closed form; min, "
            f"max, quantiles, histogram and excessive ratio from {fmt(result.num_pairs)} pairs "
            f"of each type drawn uniformly with seed {fmt(result.seed)} (estimates with 95 % "
            "intervals in result.json), uniformity likewise"
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
        if stats.exact:
            return f"exact {', '.join(stats.exact)}; rest sampled"
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
    if any(s is not None and s.excessive_margin_count is not None for s in stats_by_column):
        # results written before the margin count was measured render as they did
        margin = f"s < δ − {fmt(EXCESS_MARGIN)}"
        rows.append(
            row(f"excessive count ({margin})", lambda s: s.excessive_margin_count, neg_only=True)
        )
        rows.append(
            row(f"excessive ratio ({margin})", lambda s: s.excessive_margin_ratio, neg_only=True)
        )
    return rows


def pair_table(result: Result, layer: Layer) -> Table:
    kinds = [k for k in PAIR_TYPES if k in layer.pairs]
    stats = [layer.pairs[k] for k in kinds]
    rows = [["which pairs", *[k.definition for k in kinds]]]
    rows += _stat_rows(stats, negatives=[k in NEGATIVE_TYPES for k in kinds])
    rows.append(["histogram bins on [−1, 1]", *[fmt(s.histogram.bins) for s in stats]])
    return Table(
        columns=["statistic", *[k.label for k in kinds]],
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
            columns.append(f"{kind.label}, {title}")
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


def by_view_table(layer: Layer) -> Table | None:
    """The within-view negatives of each view beside the pooled ones (embeddings)."""
    pooled = layer.pairs.get(PairType.WITHIN_VIEW_NEGATIVE)
    if pooled is None or pooled.by_view is None:
        return None
    u, v = pooled.by_view.u, pooled.by_view.v
    columns = [
        ("view 1 (u_i, u_j), i < j", u.count, u.mean, u.var, u.std),
        ("view 2 (v_i, v_j), i < j", v.count, v.mean, v.var, v.std),
        ("pooled", pooled.count, pooled.mean, pooled.var, pooled.std),
    ]
    rows = [
        [title, *[fmt(c[k]) for c in columns]]
        for k, title in ((1, "count"), (2, "mean"), (3, "var (population, ddof 0)"), (4, "std"))
    ]
    return Table(
        columns=["statistic", *[c[0] for c in columns]],
        rows=rows,
        caption=(
            f"{PairType.WITHIN_VIEW_NEGATIVE.label.capitalize()} by view: each view's own "
            "pairs, exact over "
            "every pair in closed form (in every mode), beside the pooled column of the table "
            "above. The pooled mean is the count-weighted mean of the two; for views from two "
            "encoders the two can differ widely, which the pooled numbers hide."
        ),
    )


def modality_gap_blocks(name: str, layer: Layer) -> list:
    """The modality gap of a layer whose views come from two encoders (Liang et al. 2022)."""
    gap = layer.modality_gap
    if gap is None:
        return []
    rows = [
        [
            "centroid distance ||μ₁ − μ₂||",
            fmt(gap.centroid_distance),
            "μ₁ = mean of the normalised view-1 rows, μ₂ likewise (Liang et al. 2022)",
        ],
        [
            "centroid norms ||μ₁||, ||μ₂||",
            f"{fmt(gap.centroid_norms.u)}, {fmt(gap.centroid_norms.v)}",
            "1 − ||μ_k||² is view k's own variance",
        ],
        [
            "between-view variance",
            fmt(gap.between_view_variance),
            "||μ₁ − μ₂||² / 4: the pooled rows' variance explained by their view",
        ],
        [
            "total variance",
            fmt(gap.total_variance),
            "1 − ||μ||² of the pooled 2n rows, μ = (μ₁ + μ₂)/2",
        ],
        [
            "gap's share of the variance",
            fmt(gap.variance_share),
            "between-view / total, in [0, 1]: 0 = the centroids coincide",
        ],
    ]
    stats = [
        ("positive mean", "positive_mean"),
        ("positive var", "positive_var"),
        ("cross-view negative mean", "negative_mean"),
        ("cross-view negative var", "negative_var"),
    ]
    before, after = gap.before, gap.after
    removed = [
        [title, fmt(getattr(before, key)), fmt(None if after is None else getattr(after, key))]
        for title, key in stats
    ]
    blocks: list = [
        Heading(3, f"Modality gap of '{name}'"),
        Table(
            columns=["quantity", "value", "convention"],
            rows=rows,
            caption="The two views come from two encoders: where their distributions sit on "
            "the sphere (exact, from the views' sums).",
        ),
        Table(
            columns=["statistic", "as measured", "gap removed"],
            rows=removed,
            caption="Cross-view statistics with the gap removed: each view centred on its own "
            "centroid and its rows re-normalised, u′_i = (u_i − μ₁)/||u_i − μ₁||, likewise v "
            "(exact over every pair, closed form).",
        ),
    ]
    if after is None:
        blocks.append(
            Note(
                "A row equals its view's centroid, so it has no direction once centred: the "
                "statistics with the gap removed are not defined."
            )
        )
    return blocks


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
    neg = layer.pairs.get(PairType.CROSS_VIEW_NEGATIVE)
    if ceiling.value is not None and neg is not None and neg.var is not None:
        # the ceiling is estimated from the sample's mean negative: call it below 1 only beyond
        # that mean's sampling error (a conservative U-statistic bound, cl_diag.measurement.stats),
        # and never within ε = EXCESS_MARGIN of 1, where a simplex ETF's float residue sits
        margin = max(z_value() * pair_mean_se(neg.var, layer.n), EXCESS_MARGIN)
        if ceiling.value + margin < 1.0:
            notes.append(
                Note(
                    f"The Theorem 5.2 alignment ceiling ({fmt(ceiling.value)}) is below 1 beyond "
                    f"its sampling error (± {fmt(margin, 2)} at 95 %): the mean cross-view "
                    "negative similarity is below δ = −1/(n_ref − 1), so perfect alignment of "
                    "positives is impossible (excessive separation)."
                )
            )
    if neg is not None and neg.min is not None and neg.min >= 0.0 and result.delta < 0:
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
        *(
            [
                [
                    "within-class variance of instance means",
                    fmt(c.instance_within_class_variance),
                    "mean over classes of the variance of (u_i + v_i)/2 about the class mean: "
                    "class collapse of the instances, their views' spread left out",
                ],
                *(
                    [
                        [
                            f"… at the batch's scope ({fmt(c.batch_instances)} per class)",
                            fmt(c.batch_instance_within_class_variance),
                            "the same in one balanced batch of the run's n instances per class, "
                            "the SSEM's scope: its expectation over such batches drawn from "
                            "this sample, (n−1)/n · N_c/(N_c−1) per class (docs/ssem.md); "
                            "what the SSEM claims read",
                        ]
                    ]
                    if c.batch_instances is not None
                    else []
                ),
                [
                    "views' spread",
                    fmt(c.view_spread),
                    "mean over classes of (1 − u_i·v_i)/2; within-class variance = this + the "
                    "instance means' (docs/ssem.md)",
                ],
            ]
            if c.instance_within_class_variance is not None
            else []
        ),
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


def training_blocks(source: Source) -> list:
    """The training curves of a cl-diag checkpoint's run (its metrics rows, thinned: the figure
    ``cl-diag train`` leaves in the run folder); nothing for any other source."""
    if source.curves is None:
        return []
    svg = figures.training_curves(source.curves.as_rows(), title="training curves (checkpoint)")
    if svg is None:
        return []
    kept = len(source.curves.columns.get("step") or [])
    return [
        Heading(2, "Training"),
        Figure(
            filename="training_curves.svg",
            svg=svg,
            alt="Training loss, VRN term, in-batch similarity means and online kNN against step",
            caption=(
                f"The run's metrics rows as the checkpoint holds them ({fmt(kept)} of "
                f"{fmt(source.curves.rows)} drawn), against the optimiser step: the loss and its "
                "contrastive term, the VRN term, the in-batch means of each pair type (the "
                "training batches', not the analysed views') and the online kNN top-1 when "
                "logged."
            ),
        ),
    ]


def layer_blocks(result: Result, name: str, layer: Layer) -> list:
    thresholds = [(result.n_ref, result.delta)]
    blocks: list = [
        Heading(2, f"Layer '{name}' (n = {fmt(layer.n)}, d = {fmt(layer.d)})"),
        pair_table(result, layer),
    ]
    split = by_class_table(result, layer)
    if split is not None:
        blocks.append(split)
    views = by_view_table(layer)
    if views is not None:
        blocks.append(views)
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
                        if abs(result.delta) < 0.01
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
    blocks += embedding_view_blocks(name, layer)
    if layer.collapse is not None:
        table, notes = collapse_table(name, layer.collapse)
        blocks += [Heading(3, f"Class collapse of '{name}'"), table, *notes]
    blocks += modality_gap_blocks(name, layer)
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


def image_size_text(size: ImageSize) -> str:
    """``32 px (--image-size; trained at 32 px)``: the side encoded, why, and the training
    side when the checkpoint records one (flagged when they differ)."""
    notes = [size.source]
    if size.trained is not None:
        differs = "" if size.trained == size.value else ", NOT the size analysed"
        notes.append(f"trained at {size.trained} px{differs}")
    if size.channels is not None:
        notes.append(f"grey repeated to {size.channels} channels")
    return f"{size.value} px ({'; '.join(notes)})"


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
    if source.image_size is not None:
        rows.append(["image size", image_size_text(source.image_size)])
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


def analysis_findings(result: Result, config: RunConfig) -> list[Finding]:
    """The claims that apply to one run, on the layer its loss sees: excessive separation,
    the Thm 5.2 ceiling, and without VRN the Thm 5.5 band (cl_diag.report.claims)."""
    data = RunData.of(result, config=config)
    if data is None:
        return []
    return run_findings([replace(data, label=f"this run, {data.layer}")])


def build_analysis(result: Result) -> Document:
    """The report of one run, from its result alone (its training config parsed once)."""
    config = RunConfig.of(result)
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
    findings = analysis_findings(result, config)
    blocks += findings_blocks(findings)
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
    blocks += training_blocks(source)
    blocks += theory_blocks(result, config)
    blocks += phase_blocks(result)  # the setting's phase diagram, in the theory section
    blocks += config_blocks(result)
    blocks += analysis_environment(result)
    return Document(
        title=f"cl-diag analysis: {source.path or ''}".rstrip(": "),
        blocks=analysis_overview(result, findings, blocks),
    )


def analysis_overview(result: Result, findings: list[Finding], blocks: list) -> list:
    """``blocks`` opened by the headline (the verdict counts, the numbers of the layer the loss
    sees beside its similarity distributions) and the contents; the probe settings and fit
    diagnostics in the appendix (cl_diag.report.overview)."""
    layer = loss_layer(result)
    here = result.layers[layer]
    table = Table(
        columns=["headline", "value"],
        rows=headline_rows(result, layer),
        caption=(
            f"Layer '{layer}' (n = {fmt(here.n)}, d = {fmt(here.d)}); {threshold_text(result)}."
        ),
    )
    return arrange(
        blocks,
        verdicts=verdict_line(findings),
        table=table,
        figure=f"similarities_{layer}.svg",
        appendix_blocks=appendix(probe_settings_tables(result)),
    )
