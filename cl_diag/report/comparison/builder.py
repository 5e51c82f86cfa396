"""The comparison report's document (:func:`build_comparison`): the plan, the Findings, the runs,
the per-layer tables and overlays, the probes, each study section of
:data:`~cl_diag.report.comparison.studies.STUDIES` and the environment, opened by the
headline (:func:`comparison_headline`).
"""

from __future__ import annotations

from collections.abc import Sequence

from cl_diag.report import figures
from cl_diag.report.claims import findings_blocks
from cl_diag.report.comparison.frame import (
    _SEED_PAIR_KEYS,
    FACT_COLUMNS,
    SEED_STD_WORDS,
    Comparison,
    Named,
    _col,
    _pooled_histograms,
    _thresholds,
    comparison_warnings,
    primary_layer,
)
from cl_diag.report.comparison.studies import STUDIES
from cl_diag.report.comparison.tables import _metric_table, _seed_table
from cl_diag.report.document import (
    MISSING,
    SIMILARITY_CONVENTION,
    Cell,
    Document,
    Figure,
    Heading,
    Link,
    Note,
    Paragraph,
    Table,
    fmt,
    pct,
)
from cl_diag.report.environment import comparison_environment
from cl_diag.report.metrics import (
    COLLAPSE_METRICS,
    GEOMETRY_METRICS,
    HEADLINE_PROBE_METRICS,
    PAIR_METRICS,
    Metric,
)
from cl_diag.report.overview import HEADLINE_METRICS, arrange, verdict_line
from cl_diag.report.plan_section import plan_blocks
from cl_diag.report.probe_section import test_images
from cl_diag.report.runs import (
    SeedGroup,
    loss_layer,
)
from cl_diag.result import Histogram


def _probe_caption(runs: Sequence[Named]) -> str:
    """Say which features each probe saw: the classification probes one layer, retrieval every
    layer."""
    probes = [r.probes for _, r in runs if r.probes is not None]
    probe_layers = sorted({str(p.layer) for p in probes})
    classifiers = any(
        p.linear is not None or p.knn is not None or p.clustering is not None for p in probes
    )
    retrieval = any(p.retrieval for p in probes)
    parts = []
    if classifiers:
        where = " / ".join(probe_layers) if probe_layers else "backbone"
        dropped = " (projector dropped)" if where == "backbone" else ""
        parts.append(f"linear, kNN and k-means probes on {where} features{dropped}")
    if retrieval:
        parts.append("retrieval: rank of the positive v_i among all v, on each named layer")
    text = "; ".join(parts) or "probes"
    wilson = any(test_images(p) is not None for p in probes)
    return (
        text[0].upper()
        + text[1:]
        + "; accuracies in %"
        + (", test-split accuracies with their 95 % Wilson interval." if wilson else ".")
    )


# ---- the report ---------------------------------------------------------------------------------


def build_comparison(
    runs: Sequence[Named] | Comparison, *, baseline: str | None = None
) -> Document:
    """The comparison report's content. ``runs`` = [(name, result)], name = the run's folder or
    file (or a :class:`Comparison` already made)."""
    if isinstance(runs, Comparison):
        cmp = runs
    else:
        if not runs:
            raise ValueError("a comparison needs at least one run")
        cmp = Comparison(runs, baseline=baseline)
    labels, base_index, n_runs = cmp.labels, cmp.baseline, len(cmp.runs)
    studies = [block for study in STUDIES for block in study(cmp, primary_layer(cmp.runs))]
    # the figures that carry a finding sit next to it; the study sections keep the others
    carried = {f.figure for f in cmp.findings if f.figure is not None}
    beside = [b for b in studies if isinstance(b, Figure) and b.filename in carried]
    studies = [b for b in studies if not (isinstance(b, Figure) and b.filename in carried)]
    blocks: list = [Heading(1, "cl-diag comparison")]
    primary: tuple[str, ...] = ()
    if cmp.plan is not None:
        blocks += plan_blocks(cmp.plan, cmp.configs)
        primary = cmp.plan.plan.primary
    blocks += findings_blocks(cmp.findings, beside, primary)
    blocks.append(Heading(2, "Runs"))
    blocks.append(
        Table(
            columns=[
                "run",
                "source",
                "loss",
                "batch size",
                "temperature",
                "VRN λ",
                "n_ref",
                "threshold δ",
                "mode",
                "layers",
                "report",
            ],
            rows=[
                [
                    label + (" (baseline)" if i == base_index else ""),
                    name,
                    *[fmt(cmp.fact(i, key)) for key in FACT_COLUMNS],
                    fmt(r.n_ref),
                    fmt(r.delta),
                    fmt(r.mode),
                    ", ".join(r.layers),
                    Link("report", cmp.reports[name]) if name in cmp.reports else MISSING,
                ]
                for i, ((name, r), label) in enumerate(zip(cmp.runs, labels, strict=True))
            ],
            caption=(
                "Runs, labelled by what differs between their training configs; each run's own "
                "report is linked."
            ),
        )
    )
    for warning in comparison_warnings(cmp.runs, dict(zip(cmp.names, labels, strict=True))):
        blocks.append(Note(warning))
    thresholds = _thresholds(cmp.runs)
    threshold_words = "; ".join(f"n_ref = {fmt(n)}: δ = {fmt(t)}" for n, t in thresholds)
    blocks.append(
        Paragraph(
            f"Conventions: {SIMILARITY_CONVENTION}; variance is the population variance (ddof 0); "
            "cross-view negatives are (u_i, v_j), i ≠ j, all ordered pairs; within-view negatives "
            "are (u_i, u_j) and (v_i, v_j), i < j; the excessive ratio is the fraction of "
            f"negatives strictly below δ = −1/(n_ref − 1) ({threshold_words}). Accuracies are in "
            "%; differences from the baseline in percentage points (pp). comparison.csv holds the "
            "same numbers as fractions, one row per run and layer."
        )
    )
    groups = cmp.groups
    if groups:
        blocks.append(
            Paragraph(
                "Seed groups: runs whose training configs differ only in their seed are also "
                "summarised \u201cover seeds\u201d, as mean ± "
                + SEED_STD_WORDS
                + " ("
                + "; ".join(f"{g.label}: seeds {g.seeds_text}" for g in groups)
                + "). comparison_by_seed.csv holds those means and standard deviations for every "
                "metric."
            )
        )
    base_label = labels[base_index] if base_index is not None else None
    seed_pair_metrics = [m for m in PAIR_METRICS if m.key in _SEED_PAIR_KEYS]
    for layer in cmp.layers:
        in_layer = [i for i in range(n_runs) if cmp.has_layer(i, layer)]
        blocks.append(Heading(2, f"Layer '{layer}'"))
        for metrics, what in (
            (PAIR_METRICS, "Pair similarities"),
            (GEOMETRY_METRICS, "Geometry"),
            (COLLAPSE_METRICS, "Class collapse (labelled runs)"),
        ):
            rows = [(labels[i], cmp.row(i, metrics, layer)) for i in in_layer]
            table = _metric_table(rows, metrics, caption=f"{what}, layer '{layer}'.")
            if table is not None:
                blocks.append(table)
            if base_index is not None and cmp.has_layer(base_index, layer):
                rows = [(labels[i], cmp.row(i, metrics, layer, delta=True)) for i in in_layer]
                diff = _metric_table(
                    rows,
                    metrics,
                    caption=f"{what}, layer '{layer}': run − baseline ({base_label}).",
                    delta=True,
                )
                if diff is not None:
                    blocks.append(diff)
        seed_rows = [
            (g, cmp.seed_values(k, layer))
            for k, g in enumerate(groups)
            if all(cmp.has_layer(i, layer) for i in g.members)
        ]
        seed_table = _seed_table(
            seed_rows,
            seed_pair_metrics,
            caption=(
                f"Over seeds, layer '{layer}': mean ± {SEED_STD_WORDS} of each run's statistic "
                "(a run's own std is the population std of its pair similarities)."
            ),
        )
        if seed_table is not None:
            blocks.append(seed_table)
        # one curve per seed group (its seeds' histograms summed), one per ungrouped run:
        # ten overlaid runs of two configs would hide the difference between the configs
        pooled_at: dict[int, tuple[SeedGroup, dict[str, Histogram]]] = {}
        for g in groups:
            pooled = _pooled_histograms(cmp.runs, g, layer)
            if pooled is not None:
                pooled_at[g.members[0]] = (g, pooled)
        skipped = {i for g, _ in pooled_at.values() for i in g.members[1:]}
        curves: list[tuple[str, dict[str, Histogram]]] = []
        for i, (label, r) in enumerate(zip(labels, cmp.results, strict=True)):
            if i in pooled_at:
                g, pooled = pooled_at[i]
                curves.append((f"{g.label} ({len(g.members)} seeds pooled)", pooled))
            elif i not in skipped:
                pairs = r.layers[layer].pairs if layer in r.layers else {}
                curves.append((label, {kind: stats.histogram for kind, stats in pairs.items()}))
        pooled_any = bool(pooled_at)
        overlay = figures.negative_overlay(curves, thresholds, layer)
        if overlay is not None:
            at_zero = all(abs(t or 0.0) < 0.01 for _, t in thresholds)
            blocks.append(
                Figure(
                    filename=f"negatives_{layer}.svg",
                    svg=overlay,
                    alt=f"Overlaid negative-similarity distributions of every run, layer {layer}",
                    caption=(
                        f"Negative-similarity densities (stored histograms), layer '{layer}', "
                        + (
                            "one curve per seed group (its seeds' histogram counts summed) and per "
                            "ungrouped run. "
                            if pooled_any
                            else "one curve per run. "
                        )
                        + f"Dashed threshold line(s): {threshold_words}"
                        + (
                            "; at this scale δ sits visually at 0."
                            if at_zero
                            else "; the excessive ratios count similarities strictly left of it."
                        )
                    ),
                )
            )
    probe_rows = [(labels[i], cmp.row(i, cmp.probe_metrics)) for i in range(n_runs)]
    probe_table = _metric_table(
        probe_rows,
        cmp.probe_metrics,
        caption=_probe_caption(cmp.runs),
        test_images=[test_images(r.probes) for r in cmp.results],
    )
    if probe_table is not None:
        blocks += [Heading(2, "Probes"), probe_table]
        seed_probe = _seed_table(
            [(g, cmp.seed_values(k)) for k, g in enumerate(groups)],
            cmp.probe_metrics,
            caption=(
                f"Probes over seeds: mean ± {SEED_STD_WORDS}; accuracies in %, with the 95 % "
                "Student-t interval of the mean over the seeds in brackets."
            ),
        )
        if seed_probe is not None:
            blocks.append(seed_probe)
        if base_index is not None:
            diff = _metric_table(
                [(labels[i], cmp.row(i, cmp.probe_metrics, delta=True)) for i in range(n_runs)],
                cmp.probe_metrics,
                caption=f"Probes: run − baseline ({base_label}); accuracies in percentage points.",
                delta=True,
            )
            if diff is not None:
                blocks.append(diff)
    blocks += studies
    blocks += comparison_environment(cmp.results)
    figure = beside[0].filename if beside else f"negatives_{primary_layer(cmp.runs)}.svg"
    return Document(
        title="cl-diag comparison: " + ", ".join(labels),
        blocks=arrange(
            blocks,
            verdicts=verdict_line(cmp.findings),
            table=comparison_headline(cmp),
            figure=figure,
        ),
    )


def _headline_probe(cmp: Comparison) -> Metric | None:
    """The probe accuracy a comparison's headline shows: of linear and kNN top-1, the one most
    runs have, the higher mean breaking ties."""
    best: tuple[int, float, int] | None = None
    chosen = None
    for k, metric in enumerate(HEADLINE_PROBE_METRICS):
        values = [v for i in range(len(cmp.runs)) if (v := cmp.value(i, metric.key)) is not None]
        if values:
            rank = (len(values), sum(values) / len(values), -k)
            if best is None or rank > best:
                best, chosen = rank, metric
    return chosen


def comparison_headline(cmp: Comparison) -> Table:
    """The headline numbers of a comparison, each run on the layer its loss sees
    (:func:`~cl_diag.report.runs.loss_layer`): one row per seed group (mean ± sample std over
    its seeds) and per run outside a group; the pair numbers of
    :data:`~cl_diag.report.overview.HEADLINE_METRICS` and one probe accuracy."""
    probe = _headline_probe(cmp)
    metrics = [*HEADLINE_METRICS, *([probe] if probe is not None else [])]

    def key(metric: Metric, layer: str) -> str:
        return metric.key if metric is probe else _col(layer, metric.key)

    def percent(metric: Metric) -> bool:
        return metric.accuracy or metric.key.endswith("excessive_ratio")

    def single(metric: Metric, value: float | None) -> str:
        return pct(value) if percent(metric) else fmt(value)

    def grouped(metric: Metric, stats: tuple[float, float] | None) -> str:
        if stats is None:
            return MISSING
        mean, std = stats
        if percent(metric):
            return f"{100.0 * mean:.2f} ± {100.0 * std:.2f} %"
        return f"{fmt(mean, 4)} ± {fmt(std, 2)}"

    rows: list[tuple[str, str, list[Cell]]] = []
    grouped_runs = {i for g in cmp.groups for i in g.members}
    for i, result in enumerate(cmp.results):
        layer = loss_layer(result)
        group = next((k for k, g in enumerate(cmp.groups) if g.members[0] == i), None)
        if group is not None:
            g, stats = cmp.groups[group], cmp.over_seeds[group]
            cells: list[Cell] = [grouped(m, stats[key(m, layer)]) for m in metrics]
            rows.append((f"{g.label} ({len(g.members)} seeds)", layer, cells))
        elif i not in grouped_runs:
            cells = [single(m, cmp.value(i, key(m, layer))) for m in metrics]
            rows.append((cmp.labels[i], layer, cells))
    layers = sorted({layer for _, layer, _ in rows})
    titles = [m.title for m in HEADLINE_METRICS]
    if probe is not None:
        probed = sorted({r.probes.layer for r in cmp.results if r.probes is not None})
        titles.append(f"{probe.title} ({'/'.join(probed)})")
    return Table(
        columns=["run", *(["layer"] if len(layers) > 1 else []), *titles],
        rows=[
            [label, *([layer] if len(layers) > 1 else []), *cells] for label, layer, cells in rows
        ],
        caption=(
            f"On the layer each run's loss sees ({', '.join(repr(x) for x in layers)}); seed "
            "groups as mean ± sample standard deviation over their seeds; every run's numbers "
            "are in the tables below."
        ),
    )
