"""A report's first screen and its frame: the headline, the contents and the appendix.

Both report kinds open the same way (issue 24): the title, a
:class:`~cl_diag.report.document.Headline` (the verdict counts of the findings,
:func:`verdict_line`; the few numbers a run is read by, :data:`HEADLINE_METRICS`; the one
figure that carries them), then the contents. Probe internals and fit diagnostics go to a
collapsed appendix (:func:`appendix`). :func:`arrange` moves the headline figure and the
appendix into place among the blocks the sections made.
"""

from __future__ import annotations

from collections.abc import Sequence

from cl_diag.measurement.pairs import EXCESS_MARGIN
from cl_diag.report.claims import NOT_APPLICABLE, Finding
from cl_diag.report.document import (
    Block,
    Cell,
    Contents,
    Details,
    Figure,
    Headline,
    Paragraph,
    Table,
    fmt,
    pct,
    pct_interval,
)
from cl_diag.report.metrics import HEADLINE_PROBE_METRICS, PAIR_METRICS, Metric
from cl_diag.report.probe_section import baseline_value, test_images
from cl_diag.result import Probes, Result
from cl_diag.vocabulary import PairType

__all__ = [
    "APPENDIX",
    "HEADLINE_METRICS",
    "appendix",
    "arrange",
    "best_probe",
    "headline_rows",
    "verdict_line",
]

#: the title of the collapsed appendix
APPENDIX = "Appendix: probe internals and fit diagnostics"

#: what to count, in the order a headline names them: the predictions' verdicts
_VERDICTS = ("supported", "not borne out", "contradicted", "inconclusive", NOT_APPLICABLE)


def _pair_metric(kind: PairType, statistic: str, title: str) -> Metric:
    metric = next(m for m in PAIR_METRICS if m.key == f"{kind.value}_{statistic}")
    return Metric(metric.key, title, metric.read, metric.unit)


#: the pair numbers a headline shows, on the layer the loss sees: alignment of the positives,
#: the cross-view negatives' mean and spread, and their share below δ = −1/(n_ref − 1) (the
#: excessive separation of Lee et al., ICML 2025)
HEADLINE_METRICS = (
    _pair_metric(PairType.POSITIVE, "mean", "positive mean (alignment)"),
    _pair_metric(PairType.CROSS_VIEW_NEGATIVE, "mean", "cross-view negative mean"),
    _pair_metric(PairType.CROSS_VIEW_NEGATIVE, "std", "cross-view negative std"),
    _pair_metric(
        PairType.CROSS_VIEW_NEGATIVE, "excessive_ratio", "excessive separation (share below δ)"
    ),
)


def verdict_line(findings: Sequence[Finding]) -> str:
    """The verdict counts of a report's findings, one line: each prediction verdict (zeros
    included, so that "0 contradicted" is read, not inferred), the descriptions, and how many
    consistency checks hold."""
    predictions = [f for f in findings if f.kind == "prediction"]
    descriptions = [f for f in findings if f.kind == "description"]
    checks = [f for f in findings if f.kind == "consistency"]
    if not findings:
        return "Findings: no claim of the registry (docs/claims.md) applies."
    parts = [
        ", ".join(f"{sum(f.verdict == v for f in predictions)} {v}" for v in _VERDICTS)
        + " (predictions of the registry)"
        if predictions
        else "no prediction of the registry applies"
    ]
    if descriptions:
        parts.append(f"{len(descriptions)} described without a verdict")
    if checks:
        holding = sum(f.verdict == "holds" for f in checks)
        parts.append(f"consistency checks: {holding} of {len(checks)} hold")
    return "Findings: " + "; ".join(parts) + "."


def best_probe(probes: Probes | None) -> tuple[Metric, float] | None:
    """The highest headline probe accuracy (linear top-1, kNN top-1) and its metric."""
    if probes is None:
        return None
    found = [(m, v) for m in HEADLINE_PROBE_METRICS if isinstance(v := m.read(probes), float)]
    return max(found, key=lambda mv: mv[1]) if found else None


def _value(metric: Metric, value: object) -> str:
    if metric.key.endswith("excessive_ratio"):
        return pct(value)
    return fmt(value)


def view_names(result: Result) -> tuple[str, str]:
    """What the two views are called: the arrays ``--keys`` named (``image_embeds``), else
    "view 1" and "view 2"."""
    views = result.source.views or {}
    first, second = views.get("view 1"), views.get("view 2")
    if isinstance(first, str) and isinstance(second, str):
        return first, second
    return "view 1", "view 2"


def _cross_modal_rows(result: Result, layer: str) -> list[list[Cell]]:
    """For views from two encoders, what a reader needs first: the modality gap, retrieval
    R@1 in both directions, and the cross-view negatives once the gap is removed (the pooled
    statistics below them are mostly the gap)."""
    here = result.layers.get(layer)
    gap = None if here is None else here.modality_gap
    if gap is None:
        return []
    first, second = view_names(result)
    rows: list[list[Cell]] = [
        ["modality gap ||μ₁ − μ₂||", fmt(gap.centroid_distance)],
        ["modality gap, share of the pooled variance", pct(gap.variance_share)],
    ]
    retrieval = None if result.probes is None else result.probes.retrieval
    block = None if retrieval is None else retrieval.get(layer)
    if block is not None:
        rows.append([f"retrieval R@1, {first} → {second}", pct(block.recall.get(1))])
        if block.reverse is not None:
            rows.append([f"retrieval R@1, {second} → {first}", pct(block.reverse.recall.get(1))])
    if gap.after is not None:
        rows.append(["cross-view negative mean, gap removed", fmt(gap.after.negative_mean)])
    return rows


def headline_rows(result: Result, layer: str) -> list[list[Cell]]:
    """One run's headline numbers (quantity, value) on ``layer``, and its best probe; views
    from two encoders lead with their modality gap and retrieval."""
    here = result.layers.get(layer)
    rows: list[list[Cell]] = _cross_modal_rows(result, layer)
    cross = None if here is None else here.pairs.get(PairType.CROSS_VIEW_NEGATIVE)
    beyond = None if cross is None else cross.excessive_margin_ratio
    for metric in HEADLINE_METRICS:
        value = None if here is None else metric.read(here)
        if metric is HEADLINE_METRICS[-1] and beyond is not None:
            # below δ − ε: at a simplex ETF the strict share is float residue (issue 32)
            margin = f"share below δ − {fmt(EXCESS_MARGIN)}"
            rows.append([f"excessive separation ({margin})", pct(beyond)])
            continue
        if value is not None:
            rows.append([metric.title, _value(metric, value)])
    best = best_probe(result.probes)
    if best is not None:
        metric, value = best
        assert result.probes is not None
        shown = pct_interval(value, test_images(result.probes))
        # what training added is read against the same probe on raw pixels
        pixels = baseline_value(result.probes, "raw_pixels", metric)
        if isinstance(pixels, float):
            shown += f"; raw pixels {pct(pixels)}"
        rows.append([f"best probe accuracy ({metric.title}, {result.probes.layer})", shown])
    return rows


def appendix(tables: Sequence[Table]) -> list[Details]:
    """The collapsed appendix holding ``tables`` (nothing without them)."""
    if not tables:
        return []
    intro = Paragraph(
        "What the probes were fitted with and how their fits went; every number is also in "
        "result.json."
    )
    return [Details(APPENDIX, (intro, *tables))]


def _take_figure(blocks: list[Block], filename: str | None) -> Figure | None:
    """Remove the figure ``filename`` from ``blocks`` (a pointer to the headline in its
    place) and return it."""
    for i, block in enumerate(blocks):
        if isinstance(block, Figure) and block.filename == filename:
            blocks[i] = Paragraph(
                f"Figure {filename} is the headline's, at the top of the page: {block.caption}"
            )
            return block
    return None


def arrange(
    blocks: Sequence[Block],
    *,
    verdicts: str,
    table: Table,
    figure: str | None,
    appendix_blocks: Sequence[Block] = (),
) -> list[Block]:
    """The report's blocks in their reading order: the title (``blocks[0]``), the headline
    (``verdicts``, ``table`` and the figure named ``figure``, moved out of its section),
    the contents, the sections, then ``appendix_blocks`` before the trailing collapsed sections
    (the environment)."""
    body = list(blocks[1:])
    headline = Headline(verdicts, table, _take_figure(body, figure))
    end = len(body)
    while end > 0 and isinstance(body[end - 1], Details):
        end -= 1
    body[end:end] = list(appendix_blocks)
    return [blocks[0], headline, Contents(), *body]
