"""The probes section of a run's report, and how a probe's accuracy is read everywhere.

The linear, kNN and k-means probes and the retrieval of :mod:`cl_diag.measurement.probes`,
beside their baselines (raw pixels, the architecture at random initialisation): one table of
the metrics (:func:`cl_diag.report.metrics.probe_report_metrics`), the probes that could not
run, and their settings. :func:`test_images` and :func:`is_test_accuracy` say which accuracies
carry the Wilson interval of their test split, for this section and for the comparison's
tables.
"""

from __future__ import annotations

from cl_diag.report.document import (
    Heading,
    Note,
    Table,
    flatten,
    fmt,
    fmt_setting,
    pct,
    pct_interval,
)
from cl_diag.report.metrics import Metric, probe_report_metrics
from cl_diag.result import (
    BASELINES,
    EMBEDDING_SOURCES,
    PIXELS,
    RETRIEVAL_KS,
    Probes,
    Result,
    SplitSize,
)

__all__ = [
    "baseline_value",
    "is_test_accuracy",
    "probe_blocks",
    "probe_settings_tables",
    "test_images",
]


def _splits_text(splits: dict[str, SplitSize] | None) -> str:
    if not splits:
        return ""
    parts = [
        f"{name} {fmt(split.images)} of {fmt(split.of)} images" for name, split in splits.items()
    ]
    return f" ({', '.join(parts)})" if parts else ""


def baseline_value(probes: Probes, name: str, metric: Metric) -> object:
    """``metric`` of the baseline ``name`` (raw_pixels, random_init); None when not run."""
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


def validation_top1(probes: Probes | None) -> float | None:
    """The linear probe's top-1 on the validation split carved from the train split
    (``analyze --validation-fraction``), None when none was carved."""
    block = None if probes is None else probes.validation
    linear = None if block is None else block.linear
    return None if linear is None else linear.top1


def is_test_accuracy(metric: Metric) -> bool:
    """An accuracy scored on the test split (linear and kNN), which carries a Wilson interval."""
    return metric.accuracy and metric.key.startswith(("linear_", "knn_"))


def _row_probe_table(probes: Probes) -> Table | None:
    """The classification probes of a labelled embeddings file, on view 1's rows (None when
    none ran)."""
    n_test = test_images(probes)
    rows = []
    for metric in probe_report_metrics({}):  # no retrieval: it has its own table
        value = metric.read(probes)
        if value is None:
            continue
        if is_test_accuracy(metric):
            shown = pct_interval(value, n_test)
        else:
            shown = pct(value) if metric.accuracy else fmt(value, 4)
        rows.append([metric.report_title, shown])
    if not rows:
        return None
    sizes = probes.splits or {}
    train, test = sizes.get("train"), sizes.get("test")
    split = (
        f"{fmt(train.images)} rows fit them and {fmt(test.images)} are held out as the test split"
        if train is not None and test is not None
        else "the rows split per class"
    )
    return Table(
        columns=["probe", "view 1's rows"],
        rows=rows,
        caption=(
            "Linear, kNN and k-means probes on view 1's rows, L2-normalised, with the file's "
            f"labels: {split} (20 % of each class, drawn with the analysis seed); k-means "
            "clusters the test split. Accuracies in %, with the 95 % Wilson interval of the test "
            "split in "
            "brackets; NMI in [0, 1], ARI in [−1, 1]."
        ),
    )


def _embedding_probe_blocks(probes: Probes) -> list:
    """The probes of an embeddings file: with labels the classification probes on view 1's
    rows, retrieval of the positive in both directions (no labels needed), and why the other
    probes asked for did not run."""
    blocks: list = [Heading(2, "Probes")]
    classification = _row_probe_table(probes)
    if classification is not None:
        blocks.append(classification)
    rows = []
    for layer, block in (probes.retrieval or {}).items():
        directions = [("view 1 → view 2 (u_i among all v)", block.recall, block.median_rank)]
        if block.reverse is not None:
            directions.append(
                (
                    "view 2 → view 1 (v_i among all u)",
                    block.reverse.recall,
                    block.reverse.median_rank,
                )
            )
        for title, recall, median in directions:
            rows.append(
                [f"{layer}: {title}", *[pct(recall.get(k)) for k in RETRIEVAL_KS], fmt(median)]
            )
    if rows:
        blocks.append(
            Table(
                columns=["retrieval", *[f"Recall@{k}" for k in RETRIEVAL_KS], "median rank"],
                rows=rows,
                caption=(
                    "Retrieval of the positive, label-free and exact over every pair (in row "
                    "blocks, never an n × n matrix): for each query row i of one view, its rank "
                    "among all n rows of the other view by cosine similarity, rank_i = 1 + "
                    "#{j ≠ i : s_ij ≥ s_ii} (ties counted against the positive), the positive "
                    "being the same row; Recall@k = share of queries with rank ≤ k; median rank "
                    "1 = best. For image and text embeddings: image → text and text → image."
                ),
            )
        )
    for probe, reason in (probes.skipped or {}).items():
        blocks.append(Note(f"The {probe} probe was not run: {reason}."))
    return blocks


def probe_blocks(result: Result) -> list:
    probes = result.probes
    if probes is None:
        return []
    if result.source.kind in EMBEDDING_SOURCES:
        return _embedding_probe_blocks(probes)
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
        values = [metric.read(probes)] + [baseline_value(probes, b, metric) for b in base_names]
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
    validation = probes.validation
    if validation is not None and validation.linear is not None:
        blocks.append(
            Note(
                "Validation split (for choosing a training option, never the test split): "
                f"{fmt(validation.n_val)} of the {fmt(validation.n_fit + validation.n_val)} "
                f"train-split images ({pct(validation.fraction)} of each class, seed "
                f"{fmt(validation.seed)}) held out; the linear probe fitted on the other "
                f"{fmt(validation.n_fit)} scores linear top-1 "
                f"{pct_interval(validation.linear.top1, validation.n_val)} on them."
                if validation.n_fit is not None and validation.n_val is not None
                else "A validation split was carved, but its sizes are not recorded."
            )
        )
    for probe, reason in (probes.skipped or {}).items():
        blocks.append(Note(f"The {probe} probe was not run: {reason}."))
    return blocks


def probe_settings_tables(result: Result) -> list[Table]:
    """The probes' settings and fit diagnostics (the weight decay chosen, each L-BFGS fit's
    iterations, line trials and stop reason): what a report's appendix holds."""
    probes = result.probes
    if probes is None:
        return []
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
    if not settings_rows:
        return []
    return [
        Table(
            columns=["probe", "setting", "value"],
            rows=settings_rows,
            caption="Probe settings and fit diagnostics.",
        )
    ]
