"""The content of one run's report, built from its result.json dict alone.

Every number is printed next to its convention (normalisation, which pairs,
n_ref and the threshold, exact or sampled, quantile error, epsilon), as the
foundation issue asks. Blocks that a result lacks (``by_class`` without labels,
``probes``/``theory``/``config`` for an embeddings file) are left out.
"""

from __future__ import annotations

from cl_diag.report import figures
from cl_diag.report.document import (
    MISSING,
    Document,
    Figure,
    Heading,
    Note,
    Paragraph,
    Table,
    flatten,
    fmt,
    fmt_setting,
    get,
    pct,
)

PAIR_TYPES = ("positive", "cross_view_negative", "within_view_negative")
NEGATIVE_TYPES = ("cross_view_negative", "within_view_negative")
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
QUANTILES = ("1", "5", "25", "50", "75", "95", "99")

SIMILARITY_CONVENTION = "cosine similarity of L2-normalised rows"


def threshold_text(result: dict) -> str:
    n_ref = result.get("n_ref")
    return f"δ = −1/(n_ref − 1) = {fmt(result.get('threshold'))} with n_ref = {fmt(n_ref)}"


def mode_text(result: dict) -> str:
    if result.get("mode") == "sampled":
        return (
            f"sampled: {fmt(result.get('num_pairs'))} pairs of each type drawn uniformly with seed "
            f"{fmt(result.get('seed'))} (estimates)"
        )
    return "exact: all pairs, streamed in row blocks"


def _stat_rows(stats_by_column: list[dict | None], *, negatives: list[bool]) -> list[list[str]]:
    """Rows 'statistic | value per column' shared by the pair and by_class tables."""

    def row(name: str, key: str, *, neg_only: bool = False, formatter=fmt) -> list[str]:
        cells = []
        for stats, is_neg in zip(stats_by_column, negatives):
            if stats is None or (neg_only and not is_neg):
                cells.append(MISSING)
            else:
                cells.append(formatter(stats.get(key)))
        return [name, *cells]

    def sampled(stats: dict | None) -> str:
        if stats is None:
            return MISSING
        return "sampled estimate" if stats.get("estimate") else "exact"

    rows = [
        row("count", "count"),
        ["exact / sampled", *[sampled(s) for s in stats_by_column]],
        row("mean", "mean"),
        row("var (population, ddof 0)", "var"),
        row("std (ddof 0)", "std"),
        row("min", "min"),
        row("max", "max"),
    ]
    for q in QUANTILES:
        rows.append(
            [f"quantile {q} %", *[fmt(get(s, "quantiles", q)) if s is not None else MISSING for s in stats_by_column]]
        )
    rows.append(row("quantile error bound (|reported − exact|)", "quantile_error"))
    rows.append(row("excessive count (s < δ)", "excessive_count", neg_only=True))
    rows.append(row("excessive ratio (s < δ)", "excessive_ratio", neg_only=True))
    return rows


def pair_table(result: dict, layer: dict) -> Table:
    pairs = layer.get("pairs", {})
    kinds = [k for k in PAIR_TYPES if k in pairs]
    stats = [pairs[k] for k in kinds]
    rows = [["which pairs", *[PAIR_DEFINITIONS[k] for k in kinds]]]
    rows += _stat_rows(stats, negatives=[k in NEGATIVE_TYPES for k in kinds])
    bins = [get(pairs[k], "histogram", "bins") for k in kinds]
    rows.append(["histogram bins on [−1, 1]", *[fmt(b) for b in bins]])
    return Table(
        columns=["statistic", *[PAIR_TITLES[k] for k in kinds]],
        rows=rows,
        caption=(
            f"Pair similarities ({SIMILARITY_CONVENTION}); {threshold_text(result)}; {mode_text(result)}."
        ),
    )


def by_class_table(result: dict, layer: dict) -> Table | None:
    pairs = layer.get("pairs", {})
    columns, stats = [], []
    for kind in NEGATIVE_TYPES:
        split = get(pairs, kind, "by_class")
        if not isinstance(split, dict):
            continue
        for part, title in (("same_class", "same class"), ("different_class", "different class")):
            columns.append(f"{PAIR_TITLES[kind]}, {title}")
            stats.append(split.get(part))
    if not columns:
        return None
    return Table(
        columns=["statistic", *columns],
        rows=_stat_rows(stats, negatives=[True] * len(stats)),
        caption=(
            "Negatives split by class label. Same-class negatives are the false negatives of instance "
            f"discrimination; {threshold_text(result)}."
        ),
    )


def geometry_table(result: dict, layer: dict) -> tuple[Table, list[Note]]:
    geo = layer.get("geometry", {})
    eps = get(geo, "effective_rank", "epsilon")
    ceiling = geo.get("alignment_ceiling", {}) or {}
    rows = [
        ["alignment", fmt(geo.get("alignment")), "E ||u_i − v_i||² over positives (Wang & Isola, α = 2), normalised rows"],
    ]
    for view in ("u", "v"):
        rows.append(
            [
                f"uniformity, view {view}",
                fmt(get(geo, "uniformity", view)),
                "log E_{i<j} exp(−2 ||x_i − x_j||²) within the view (t = 2), log-sum-exp",
            ]
        )
    for view in ("u", "v"):
        rows.append(
            [
                f"effective rank, view {view}",
                fmt(get(geo, "effective_rank", view)),
                f"RankMe: exp(entropy of normalised singular values + ε) of the uncentred normalised matrix, ε = {fmt(eps)}",
            ]
        )
    spec = geo.get("spectrum", {}) or {}
    for view in ("u", "v"):
        values = spec.get(view) or []
        if values:
            head = ", ".join(fmt(x, 4) for x in values[:5])
            rows.append(
                [
                    f"covariance spectrum, view {view}",
                    f"{head}{', …' if len(values) > 5 else ''}",
                    f"largest 5 of {len(values)} eigenvalues of the view's embedding covariance, descending",
                ]
            )
    rows.append(
        [
            "frontier gap",
            fmt(geo.get("frontier_gap")),
            "mean_xneg − ((N−2)·mean_pos − N)/(2(N−1)), N = n pairs, ≥ 0 (paper-notes 11.2); 0 = as separated as the alignment allows",
        ]
    )
    rows.append(
        [
            "alignment ceiling",
            fmt(ceiling.get("value")),
            f"Thm 5.2: 1 + mean cross-view negative + 1/(n_ref − 1), n_ref = {fmt(result.get('n_ref'))}; "
            f"below 1: {fmt(ceiling.get('below_one'))}",
        ]
    )
    notes = []
    if ceiling.get("below_one"):
        notes.append(
            Note(
                "The Theorem 5.2 alignment ceiling is below 1: the mean cross-view negative similarity is below "
                "δ = −1/(n_ref − 1), so perfect alignment of positives is impossible (excessive separation)."
            )
        )
    return Table(columns=["quantity", "value", "convention"], rows=rows, caption="Geometry."), notes


def validity_caveat(d: object, result: dict, batch_size: object = None) -> Note | None:
    n_ref = result.get("n_ref")
    if not isinstance(d, int) or not isinstance(n_ref, int) or d >= n_ref - 1:
        return None
    extra = ""
    if isinstance(batch_size, int) and d < batch_size - 1:
        extra = f" Here d < m − 1 = {batch_size - 1} as well, below what Theorem 5.5 assumes."
    return Note(
        f"Validity: d = {d} < n_ref − 1 = {n_ref - 1}. The optimum predictions (Thm 5.1, 5.3, 5.5) assume a "
        "simplex fits (d ≥ n_ref − 1, and d ≥ m − 1 per batch); with a narrower embedding they are "
        f"qualitative (paper-notes 11.4): compare trends, not values.{extra}"
    )


def _band_text(band: object) -> str:
    if not isinstance(band, dict):
        return MISSING
    return f"[{fmt(band.get('lo'))}, {fmt(band.get('hi'))}]"


def theory_blocks(result: dict) -> list:
    theory = result.get("theory")
    if not isinstance(theory, dict) or not theory:
        return []
    loss = theory.get("loss", {}) or {}
    m = theory.get("batch_size")
    blocks: list = [Heading(2, "Theory panel: predicted next to measured")]
    blocks.append(
        Paragraph(
            f"Loss {fmt(loss.get('name'))}, family {fmt(loss.get('family'))}, (c1, c2) = "
            f"({fmt(loss.get('c1'))}, {fmt(loss.get('c2'))}); applicable theorem: {fmt(theory.get('theorem'))}. "
            f"{theory.get('statement') or ''}".rstrip()
            + f" Training batch size m = {fmt(m)}; n = n_ref = {fmt(theory.get('n_ref', result.get('n_ref')))}."
        )
    )
    sig = theory.get("sigmoid")
    if isinstance(sig, dict):
        eq10 = sig.get("eq10", {}) or {}
        ccem = sig.get("ccem", {}) or {}
        blocks.append(
            Paragraph(
                f"Sigmoid loss, t = {fmt(sig.get('t'))}, b = {fmt(sig.get('b'))} (paper convention, b = −b_SigLIP). "
                f"Eq. 10: (1 + exp(t/(n−1) + b)) / (1 + exp(t − b)) = {fmt(eq10.get('lhs'))} vs (n−2)/2 = "
                f"{fmt(eq10.get('rhs'))}: {'holds, excessive separation predicted (Thm 5.3)' if eq10.get('holds') else 'does not hold'}. "
                f"Double-constant (CCEM) optimum at N = {fmt(ccem.get('N'))}: regime {fmt(ccem.get('regime'))}, "
                f"x* = {fmt(ccem.get('x_star'))} (paper-notes 11.1)."
            )
        )
    predicted = theory.get("predicted", {}) or {}
    band = theory.get("variance_band")
    layers = result.get("layers") or {}
    loss_layer = theory.get("loss_layer")
    # The theorems describe the embedding the loss is computed on; other layers are context.
    # (Results without loss_layer get the predictions beside every layer, as before.)
    main = [loss_layer] if loss_layer in layers else list(layers)
    for name in main:
        layer = layers[name]
        pairs = layer.get("pairs", {})
        pos_mean = get(pairs, "positive", "mean")
        xneg_mean = get(pairs, "cross_view_negative", "mean")
        xneg_var = get(pairs, "cross_view_negative", "var")
        d = layer.get("d")
        rows = [
            ["positive mean", fmt(predicted.get("positive_mean")), fmt(pos_mean), "full-batch optimum (Thm 5.1; Thm 5.5 per batch)"],
            [
                "positive mean, upper bound",
                f"≤ {fmt(get(layer, 'geometry', 'alignment_ceiling', 'value'))}",
                fmt(pos_mean),
                "Thm 5.2: 1 + mean cross-view negative + 1/(n_ref − 1), from this layer's measurement",
            ],
            ["cross-view negative mean", fmt(predicted.get("negative_mean")), fmt(xneg_mean), "−1/(n_ref − 1) (Thm 5.1, 5.5)"],
            [
                "cross-view negative variance",
                _band_text(band),
                fmt(xneg_var),
                f"Thm 5.5 band (Eq. 11), n = {fmt(get(band, 'n'))}, m = {fmt(get(band, 'm'))}, fixed batches",
            ],
            [
                "variance of random unit vectors",
                fmt(1.0 / d) if isinstance(d, int) and d > 0 else MISSING,
                fmt(xneg_var),
                f"1/d, d = {fmt(d)} (paper-notes 11.4 reference)",
            ],
        ]
        if theory.get("within_batch_optimum") is not None:
            rows.append(
                [
                    "within-batch negative (per-batch simplex)",
                    fmt(theory.get("within_batch_optimum")),
                    MISSING,
                    "−1/(m − 1): each batch's own simplex at the mini-batch optimum (Thm 5.5); not measurable from pairs",
                ]
            )
        if isinstance(sig, dict):
            ccem = sig.get("ccem", {}) or {}
            rows.append(["positive mean (CCEM, N = m)", fmt(ccem.get("s_pos")), fmt(pos_mean), "paper-notes 11.1"])
            rows.append(["negative mean (CCEM, N = m)", fmt(ccem.get("s_neg")), fmt(xneg_mean), "paper-notes 11.1"])
        blocks.append(
            Table(
                columns=["quantity", "predicted", f"measured ({name})", "source"],
                rows=rows,
                caption=f"Layer '{name}' (d = {fmt(d)})"
                + (": the layer the loss sees, which the theorems describe." if name == loss_layer else "."),
            )
        )
        caveat = validity_caveat(d, result, m)
        if caveat is not None:
            blocks.append(caveat)
    context = [n for n in layers if n not in main]
    if context:
        blocks.append(_theory_context_table(result, loss_layer, context))
    return blocks


def _theory_context_table(result: dict, loss_layer: str, names: list[str]) -> Table:
    """The other layers' measurements beside the loss layer's, without predictions."""
    layers = result.get("layers") or {}
    shown = [loss_layer, *names]

    def measured(*path: str) -> list[str]:
        return [fmt(get(layers[n], *path)) for n in shown]

    def inverse_d(name: str) -> str:
        d = layers[name].get("d")
        return fmt(1.0 / d) if isinstance(d, int) and d > 0 else MISSING

    rows = [
        ["positive mean", *measured("pairs", "positive", "mean")],
        ["Thm 5.2 ceiling on the positive mean", *measured("geometry", "alignment_ceiling", "value")],
        ["cross-view negative mean", *measured("pairs", "cross_view_negative", "mean")],
        ["cross-view negative variance", *measured("pairs", "cross_view_negative", "var")],
        ["1/d (random unit vectors)", *[inverse_d(n) for n in shown]],
    ]
    return Table(
        columns=["measured", f"{loss_layer} (loss layer)", *[f"{n} (context only)" for n in names]],
        rows=rows,
        caption=(
            f"Context only: {', '.join(repr(n) for n in names)} measured beside '{loss_layer}'. The loss is computed on "
            f"'{loss_layer}', so the theorems' predictions are not expected to hold for the other layers; the "
            "Thm 5.2 ceiling is each layer's own."
        ),
    )


PROBE_ROWS = (
    ("linear probe top-1", ("linear", "top1"), "acc"),
    ("linear probe top-5", ("linear", "top5"), "acc"),
    ("kNN top-1, k = 20", ("knn", "k20", "top1"), "acc"),
    ("kNN top-1, k = 200", ("knn", "k200", "top1"), "acc"),
    ("k-means NMI", ("clustering", "nmi"), "score"),
    ("k-means ARI", ("clustering", "ari"), "score"),
)


def probe_rows(probes: dict) -> list[tuple[str, tuple[str, ...], str]]:
    rows = list(PROBE_ROWS[:4])
    for layer in (probes.get("retrieval") or {}):
        for k in (1, 5, 10):
            rows.append((f"retrieval of the positive, {layer}, Recall@{k}", ("retrieval", layer, f"recall_at_{k}"), "acc"))
    rows += PROBE_ROWS[4:]
    return rows


def _splits_text(splits: object) -> str:
    if not isinstance(splits, dict) or not splits:
        return ""
    parts = [
        f"{name} {fmt(get(split, 'images'))} of {fmt(get(split, 'of'))} images"
        for name, split in splits.items()
        if isinstance(split, dict)
    ]
    return f" ({', '.join(parts)})" if parts else ""


def _baseline_value(baselines: dict, name: str, path: tuple[str, ...]) -> object:
    value = get(baselines, name, *path)
    if value is None and name == "raw_pixels" and path[0] == "retrieval":
        # raw pixels have no layers: their one retrieval ("pixels") is the baseline of every layer's
        value = get(baselines, name, "retrieval", "pixels", path[-1])
    return value


def probe_blocks(result: dict) -> list:
    probes = result.get("probes")
    if not isinstance(probes, dict) or not probes:
        return []
    baselines = probes.get("baselines", {}) or {}
    base_names = [b for b in ("raw_pixels", "random_init") if b in baselines]
    columns = ["probe", "trained", *[{"raw_pixels": "raw pixels", "random_init": "random init"}[b] for b in base_names]]
    rows = []
    for title, path, kind in probe_rows(probes):
        show = pct if kind == "acc" else (lambda v: fmt(v, 4))
        values = [get(probes, *path)] + [_baseline_value(baselines, b, path) for b in base_names]
        if all(v is None for v in values):
            continue
        rows.append([title, *[show(v) for v in values]])
    blocks: list = [
        Heading(2, "Probes"),
        Table(
            columns=columns,
            rows=rows,
            caption=(
                f"Linear, kNN and k-means probes on {probes.get('layer', 'backbone')} features"
                + (" (projector dropped)" if probes.get("layer", "backbone") == "backbone" else "")
                + f", L2-normalised, un-augmented train/test splits{_splits_text(probes.get('splits'))}; retrieval: "
                "rank of v_i among all v for each u_i, on the two augmented views of the layer named. Accuracies in %, "
                "NMI in [0, 1], ARI in [−1, 1]. "
                "Baselines: the same probes on raw input pixels and on the architecture at random initialisation"
                + (
                    "; raw-pixel retrieval compares the two views' pixels directly, one value for every layer."
                    if get(baselines, "raw_pixels", "retrieval", "pixels") is not None
                    else "."
                )
            ),
        ),
    ]
    settings_rows = []
    for probe in ("linear", "knn", "clustering"):
        block = probes.get(probe)
        if not isinstance(block, dict):
            continue
        if probe == "linear" and "weight_decay" in block:
            settings_rows.append([probe, "weight_decay (chosen)", fmt_setting(block["weight_decay"])])
        for key, value in flatten(block.get("settings", {})).items():
            settings_rows.append([probe, key, fmt_setting(value)])
    if settings_rows:
        blocks.append(Table(columns=["probe", "setting", "value"], rows=settings_rows, caption="Probe settings."))
    return blocks


def config_blocks(result: dict) -> list:
    config = result.get("config")
    if not isinstance(config, dict) or not config:
        return []
    rows = [[key, fmt_setting(value)] for key, value in flatten(config).items()]
    return [
        Heading(2, "Training config"),
        Table(columns=["option", "value"], rows=rows, caption="The training config stored in the checkpoint."),
    ]


def layer_blocks(result: dict, name: str, layer: dict) -> list:
    thresholds = [(result.get("n_ref"), result.get("threshold"))]
    blocks: list = [
        Heading(2, f"Layer '{name}' (n = {fmt(layer.get('n'))}, d = {fmt(layer.get('d'))})"),
        pair_table(result, layer),
    ]
    split = by_class_table(result, layer)
    if split is not None:
        blocks.append(split)
    svg = figures.similarity_distributions(layer.get("pairs", {}), thresholds, name)
    if svg is not None:
        bins = sorted({get(p, "histogram", "bins") for p in layer.get("pairs", {}).values()} - {None})
        blocks.append(
            Figure(
                filename=f"similarities_{name}.svg",
                svg=svg,
                alt=f"Distributions of positive, cross-view and within-view negative cosine similarities, layer {name}",
                caption=(
                    f"Densities of the three pair types, drawn from the stored histograms "
                    f"({', '.join(fmt(b) for b in bins)} bins on [−1, 1], at most {figures.MAX_DISPLAY_BINS} bars shown). "
                    f"Dashed line: {threshold_text(result)}; "
                    + (
                        "at this scale it sits visually at 0."
                        if abs(result.get("threshold") or 0.0) < 0.01
                        else "the ratios above count similarities strictly left of it."
                    )
                ),
            )
        )
    table, notes = geometry_table(result, layer)
    blocks += [Heading(3, f"Geometry of '{name}'"), table, *notes]
    spec_svg = figures.spectrum(get(layer, "geometry", "spectrum", default={}) or {}, name)
    if spec_svg is not None:
        blocks.append(
            Figure(
                filename=f"spectrum_{name}.svg",
                svg=spec_svg,
                alt=f"Covariance eigenvalues of each view, layer {name}",
                caption="Eigenvalues of each view's embedding covariance, descending, log scale (zeros omitted).",
            )
        )
    return blocks


# source keys rendered by source_rows under their own names; any other key is listed as is
_SOURCE_KNOWN = frozenset(
    {"kind", "path", "sha256", "weights_sha256", "format", "arch", "dataset", "n_train", "epoch", "step", "global_step", "complete",
     "cifar_stem_padding", "views", "versions", "provenance"}
)


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
    parts += [f"{k} = {fmt_setting(v)}" for k, v in views.items() if k not in ("num_images", "pool", "sampling", "augmentation", "mode", "amp")]
    return "; ".join(parts)


def source_rows(source: dict) -> list[list[str]]:
    """What was analysed and how its two views were made: the header rows from ``source``."""
    provenance = source.get("provenance") if isinstance(source.get("provenance"), dict) else {}

    def with_origin(key: str) -> str:
        origin = provenance.get(key)
        return fmt(source.get(key)) + (f" (from {origin})" if origin else "")

    rows = [["source", f"{source.get('kind', MISSING)}: {source.get('path', MISSING)}"]]
    if source.get("format") is not None:
        rows.append(["checkpoint format", fmt(source["format"])])
    if source.get("arch") is not None:
        rows.append(["architecture", with_origin("arch")])
    if source.get("dataset") is not None:
        n_train = f", {fmt(source['n_train'])} training images" if source.get("n_train") is not None else ""
        rows.append(["dataset", with_origin("dataset") + n_train])
    step = source.get("step", source.get("global_step"))
    if source.get("epoch") is not None or step is not None:
        trained = f"epoch {fmt(source.get('epoch'))}, step {fmt(step)}"
        if source.get("complete") is not None:
            trained += " (run complete)" if source.get("complete") else " (run not complete: an intermediate checkpoint)"
        rows.append(["checkpoint taken at", trained])
    padding = source.get("cifar_stem_padding")
    if isinstance(padding, dict):
        rows.append(["CIFAR stem padding", f"{fmt(padding.get('value'))} ({padding.get('from', 'origin not recorded')})"])
    elif padding is not None:
        rows.append(["CIFAR stem padding", fmt(padding)])
    views = source.get("views")
    if isinstance(views, dict) and views:
        rows.append(["two views", _views_text(views)])
    if source.get("weights_sha256") is not None:
        rows.append(["weights sha256", fmt(source["weights_sha256"])])
    else:
        rows.append(["source sha256", fmt(source.get("sha256"))])
    versions = source.get("versions")
    if isinstance(versions, dict) and versions:
        rows.append(["trained with", ", ".join(f"{k} {fmt(v)}" for k, v in versions.items())])
    for key, value in flatten({k: v for k, v in source.items() if k not in _SOURCE_KNOWN}).items():
        if value is None or value == [] or value == {}:
            continue
        rows.append([key.replace("_", " "), fmt_setting(value)])
    return rows


def build_analysis(result: dict) -> Document:
    source = result.get("source", {}) or {}
    layers = result.get("layers") or {}
    tool = result.get("tool", {}) or {}
    header_rows = [
        *source_rows(source),
        *[[f"layer '{name}'", f"n = {fmt(l.get('n'))}, d = {fmt(l.get('d'))}"] for name, l in layers.items()],
        ["n_ref", f"{fmt(result.get('n_ref'))} (training instances the threshold refers to)"],
        ["threshold", threshold_text(result)],
        ["mode", mode_text(result)],
        [
            "seed",
            fmt(result.get("seed"))
            + (
                " (of this analysis: image sample, augmentations, sampled pairs, probes)"
                if source.get("kind") == "checkpoint"
                else " (of this analysis: sampled pairs)"
            ),
        ],
        ["similarity", SIMILARITY_CONVENTION],
        ["schema / tool", f"{fmt(result.get('schema'))} / {tool.get('name', 'cl-diag')} {tool.get('version', '')}".rstrip()],
    ]
    blocks: list = [
        Heading(1, "cl-diag analysis"),
        Table(columns=["item", "value"], rows=header_rows, caption="Run."),
    ]
    conventions = result.get("conventions")
    if isinstance(conventions, dict) and conventions:
        blocks.append(
            Table(
                columns=["convention", "value"],
                rows=[[k, fmt_setting(v)] for k, v in conventions.items()],
                caption="Conventions behind every number below.",
            )
        )
    for name, layer in layers.items():
        blocks += layer_blocks(result, name, layer)
    blocks += probe_blocks(result)
    blocks += theory_blocks(result)
    blocks += config_blocks(result)
    return Document(title=f"cl-diag analysis: {source.get('path', '')}".rstrip(": "), blocks=blocks)
