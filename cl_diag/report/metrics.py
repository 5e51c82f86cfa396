"""The numbers the reports, ``compare`` and the CLI summary print, each read off the typed result.

A :class:`Metric` names one number (its comparison.csv column, its titles, its unit) and reads
it from the block it lives in: :data:`PAIR_METRICS`, :data:`GEOMETRY_METRICS` and
:data:`COLLAPSE_METRICS` from a :class:`~cl_diag.result.Layer`, :data:`PROBE_METRICS` and
:func:`retrieval_metric` from a :class:`~cl_diag.result.ProbeSet`. The result model
(:mod:`cl_diag.result`) says what result.json holds; these tables say how the reports show it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cl_diag.result import RETRIEVAL_KS, Layer, ProbeSet
from cl_diag.vocabulary import NEGATIVE_TYPES, PairType

__all__ = [
    "COLLAPSE_METRICS",
    "GEOMETRY_METRICS",
    "HEADLINE_LAYER_METRICS",
    "HEADLINE_PAIR_METRICS",
    "HEADLINE_PROBE_METRICS",
    "INSTANCE_COLLAPSE_METRICS",
    "MODALITY_GAP_METRICS",
    "PAIR_METRICS",
    "PROBE_METRICS",
    "Metric",
    "headline_retrieval_metrics",
    "probe_report_metrics",
    "retrieval_metric",
    "reverse_retrieval_metric",
]


@dataclass(frozen=True)
class Metric:
    """One number the reports, ``compare`` and the CLI summary print.

    ``key`` names the comparison.csv column; ``title`` is the compact title (comparison
    tables, CLI summary), ``report_title`` the single-run report's; ``unit`` is
    "accuracy" (a fraction printed in %), "score" (NMI, ARI) or "value"; ``read`` takes
    the block the metric lives in (a :class:`Layer` for pair and geometry metrics, a
    :class:`ProbeSet` for probes) and returns the number or None.
    """

    key: str
    title: str
    read: Callable[[Any], Any] = field(repr=False, compare=False)
    unit: str = "value"
    report_title: str = ""
    #: retrieval metrics only: the k of Recall@k
    k: int | None = None

    @property
    def accuracy(self) -> bool:
        return self.unit == "accuracy"


def _pair(kind: PairType, statistic: str) -> Callable[[Layer], Any]:
    def read(layer: Layer) -> Any:
        stats = layer.pairs.get(kind)
        return None if stats is None else getattr(stats, statistic)

    return read


#: per layer: the pair statistics compared across runs
PAIR_METRICS = (
    Metric(f"{PairType.POSITIVE.value}_mean", "positive mean", _pair(PairType.POSITIVE, "mean")),
    *(
        Metric(f"{kind.value}_{stat}", f"{kind.label.split()[0]} {title}", _pair(kind, stat))
        for kind in NEGATIVE_TYPES
        for stat, title in (
            ("mean", "neg. mean"),
            ("var", "neg. var"),
            ("std", "neg. std"),
            ("excessive_ratio", "excessive ratio"),
        )
    ),
)

#: per layer: the geometry compared across runs
GEOMETRY_METRICS = (
    Metric("alignment", "alignment", lambda layer: layer.geometry.alignment),
    Metric("uniformity_u", "uniformity u", lambda layer: layer.geometry.uniformity.u),
    Metric("uniformity_v", "uniformity v", lambda layer: layer.geometry.uniformity.v),
    Metric("effective_rank_u", "effective rank u", lambda layer: layer.geometry.effective_rank.u),
    Metric("effective_rank_v", "effective rank v", lambda layer: layer.geometry.effective_rank.v),
    Metric("frontier_gap", "frontier gap", lambda layer: layer.geometry.frontier_gap),
    Metric(
        "alignment_ceiling",
        "alignment ceiling",
        lambda layer: layer.geometry.alignment_ceiling.value,
    ),
)


def _collapse(name: str, title: str) -> Metric:
    def read(layer: Layer) -> Any:
        return None if layer.collapse is None else getattr(layer.collapse, name)

    return Metric(name, title, read)


#: per layer, with labels: the class-collapse diagnostics compared across runs
COLLAPSE_METRICS = (
    _collapse("within_class_variance", "within-class var"),
    _collapse("between_class_variance", "between-class var"),
    _collapse("total_variance", "total var"),
    _collapse("s_w", "s_w (same class)"),
    _collapse("s_b", "s_b (between classes)"),
    _collapse("ssem_residual", "SSEM residual"),
)
#: per layer, with labels, only in the study views over a swept option (not comparison.csv,
#: whose columns results written before it was measured keep): the within-class variance of
#: the instance means (docs/ssem.md)
INSTANCE_COLLAPSE_METRICS = (
    _collapse("instance_within_class_variance", "within-class var of instance means"),
)


def _probe(
    key: str, title: str, block: str, read: Callable[[Any], Any], unit: str, report_title: str
) -> Metric:
    def value(probes: ProbeSet) -> Any:
        part = getattr(probes, block)
        return None if part is None else read(part)

    return Metric(key, title, value, unit, report_title)


#: the classification and clustering probes, in the comparison's order (retrieval is per
#: layer: :func:`retrieval_metric`)
PROBE_METRICS = (
    _probe(
        "linear_top1", "linear top-1", "linear", lambda b: b.top1, "accuracy", "linear probe top-1"
    ),
    _probe(
        "linear_top5", "linear top-5", "linear", lambda b: b.top5, "accuracy", "linear probe top-5"
    ),
    _probe(
        "knn_k20_top1",
        "kNN k=20 top-1",
        "knn",
        lambda b: b.top1.get(20),
        "accuracy",
        "kNN top-1, k = 20",
    ),
    _probe(
        "knn_k200_top1",
        "kNN k=200 top-1",
        "knn",
        lambda b: b.top1.get(200),
        "accuracy",
        "kNN top-1, k = 200",
    ),
    _probe("clustering_nmi", "k-means NMI", "clustering", lambda b: b.nmi, "score", "k-means NMI"),
    _probe("clustering_ari", "k-means ARI", "clustering", lambda b: b.ari, "score", "k-means ARI"),
)


#: per layer: the headline of a result, what its short form (``repr`` and the HTML table in a
#: notebook, :mod:`cl_diag.report.headline`) shows: the positive mean and, for each negative
#: type, the mean, the variance and the excessive ratio (the share of its similarities below
#: delta), the numbers Lee et al. (ICML 2025) read a run by
HEADLINE_PAIR_METRICS = tuple(
    m for m in PAIR_METRICS if m.key.endswith(("_mean", "_var", "_excessive_ratio"))
)

#: of the trained representation's probes: the headline accuracies, when they were measured
HEADLINE_PROBE_METRICS = tuple(
    m for m in PROBE_METRICS if m.key in ("linear_top1", "knn_k20_top1", "knn_k200_top1")
)


def _gap(name: str, title: str) -> Metric:
    def read(layer: Layer) -> Any:
        return None if layer.modality_gap is None else getattr(layer.modality_gap, name)

    return Metric(f"modality_gap_{name}", title, read)


#: per layer whose views come from two encoders: the modality gap (Liang et al., NeurIPS
#: 2022), the distance between the two views' centroids and its share of the variance
MODALITY_GAP_METRICS = (
    _gap("centroid_distance", "modality gap ‖μ₁ − μ₂‖"),
    _gap("variance_share", "modality gap's var share"),
)

#: per layer: every headline number of a layer, the pair statistics' and, for two encoders'
#: views, the modality gap's (no row where no run measured it)
HEADLINE_LAYER_METRICS = HEADLINE_PAIR_METRICS + MODALITY_GAP_METRICS


def headline_retrieval_metrics(probes: ProbeSet, layer: str) -> tuple[Metric, ...]:
    """The retrieval headline of ``layer``: Recall@1 in both directions when both were
    measured (embeddings, where no labelled probe runs and retrieval is what a cross-modal
    user reads first); none for a checkpoint's one-way retrieval, whose headline is its
    classification probes."""
    block = (probes.retrieval or {}).get(layer)
    if block is None or block.reverse is None:
        return ()
    return retrieval_metric(layer, 1), reverse_retrieval_metric(layer, 1)


def reverse_retrieval_metric(layer: str, k: int) -> Metric:
    """Recall@k of the reverse direction (view 2 -> view 1) of the retrieval on ``layer``,
    measured for embeddings; None where only one direction was measured."""

    def read(probes: ProbeSet) -> Any:
        block = (probes.retrieval or {}).get(layer)
        return None if block is None or block.reverse is None else block.reverse.recall.get(k)

    return Metric(
        f"retrieval_{layer}_reverse_recall_at_{k}",
        f"retrieval {layer} R@{k} (2→1)",
        read,
        "accuracy",
        f"retrieval of the positive, {layer}, view 2 → view 1, Recall@{k}",
        k,
    )


def retrieval_metric(layer: str, k: int, *, row: bool = False) -> Metric:
    """Recall@k of the retrieval probe on ``layer``. ``row``: keyed as comparison.csv's
    ``retrieval_recall_at_<k>``, one column for every layer (the row names the layer)."""
    if row:
        key, title = f"retrieval_recall_at_{k}", f"retrieval R@{k}"
    else:
        key, title = f"retrieval_{layer}_recall_at_{k}", f"retrieval {layer} R@{k}"
    return Metric(
        key,
        title,
        lambda probes: probes.recall(layer, k),
        "accuracy",
        f"retrieval of the positive, {layer}, Recall@{k}",
        k,
    )


def probe_report_metrics(retrieval_layers: Iterable[str]) -> tuple[Metric, ...]:
    """The probe rows of a single run (report and CLI summary): linear, kNN, retrieval of
    each layer named, then k-means."""
    classification = tuple(m for m in PROBE_METRICS if m.unit == "accuracy")
    scores = tuple(m for m in PROBE_METRICS if m.unit != "accuracy")
    retrieval = tuple(
        metric
        for layer in retrieval_layers
        for make in (retrieval_metric, reverse_retrieval_metric)
        for metric in (make(layer, k) for k in RETRIEVAL_KS)
    )
    return classification + retrieval + scores
