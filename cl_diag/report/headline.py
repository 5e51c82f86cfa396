"""A result's short form: what a notebook shows for it (``repr`` and ``_repr_html_``).

``print(res)`` is a few lines: what was measured (source, pair mode, n_ref, δ), each layer's
n and d and its headline numbers (:data:`cl_diag.report.metrics.HEADLINE_LAYER_METRICS`), and
the headline probes. The metric tables say *what* is headline; this module lays it out as one
:class:`~cl_diag.report.document.Table`, aligned text or escaped HTML.
:func:`comparison_table` is a comparison's, one column per run. The package root hands
:func:`result_text` and :func:`result_html` to the result model (:func:`cl_diag.upcalls.install`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cl_diag.report.document import MISSING, Cell, Paragraph, Table, fmt, pct
from cl_diag.report.html import render_fragment
from cl_diag.report.metrics import (
    HEADLINE_LAYER_METRICS,
    HEADLINE_PROBE_METRICS,
    Metric,
    headline_retrieval_metrics,
)
from cl_diag.result import Layer, Result

__all__ = [
    "comparison_html",
    "comparison_table",
    "comparison_text",
    "describe",
    "headline_table",
    "result_html",
    "result_text",
    "table_text",
]

#: the longest source path a short form prints in full (a longer one keeps its end)
_MAX_PATH = 60
#: the most runs a comparison's text form prints as columns (all are in its HTML and .frame)
MAX_TEXT_RUNS = 8
#: what a result's short form ends with: what the ratio is, where the rest is
_EXCESSIVE = "excessive ratio: the share of a negative type's similarities below δ"
_MORE = "every number: .layers, .probes, .to_frame(); the report: .save(folder)"


def _value(metric: Metric, value: object) -> str:
    return pct(value) if metric.accuracy else fmt(value)


def _short_path(path: str) -> str:
    """``path`` on one line (a control character as its escape: a file name is the user's
    data), its end kept when it is long."""
    path = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in path)
    return path if len(path) <= _MAX_PATH else "…" + path[-(_MAX_PATH - 1) :]


def describe(result: Result) -> str:
    """One line: what was measured (the source's kind, path or digest, architecture and data
    set), how (the pair mode), and δ with the n_ref it is of."""
    source = result.source
    what = [source.kind or "result"]
    if source.path:
        what.append(_short_path(source.path))
    elif source.sha256:
        what.append(f"sha256 {source.sha256[:12]}…")
    on = " on ".join(str(x) for x in (source.arch, source.dataset) if x)
    if on:
        what.append(f"({on})")
    mode = f"{result.mode} pairs"
    if result.mode != "exact" and result.num_pairs is not None:
        mode += f", {fmt(result.num_pairs)} per type"
    return f"{' '.join(what)}; {mode}; n_ref {result.n_ref}, δ = {fmt(result.delta)}"


def _layer_size(layer: Layer) -> str:
    return f"{layer.n} × {layer.d}"


def headline_table(result: Result) -> Table:
    """The headline numbers of ``result``: one row per metric, one column per layer; a probe's
    row has its number in the column of the layer the probes ran on."""
    layers = list(result.layers)
    rows: list[list[Cell]] = [["n × d", *(_layer_size(result.layers[name]) for name in layers)]]
    for metric in HEADLINE_LAYER_METRICS:
        values = [metric.read(result.layers[name]) for name in layers]
        if any(value is not None for value in values):
            rows.append([metric.title, *(_value(metric, value) for value in values)])
    probes = result.probes
    if probes is not None:
        for metric in (*HEADLINE_PROBE_METRICS, *headline_retrieval_metrics(probes, probes.layer)):
            value = metric.read(probes)
            if value is not None:
                cells = [
                    _value(metric, value) if name == probes.layer else MISSING for name in layers
                ]
                rows.append([metric.title, *cells])
    return Table(columns=["", *layers], rows=rows, caption=describe(result))


def comparison_table(runs: Sequence[tuple[str, Result]]) -> Table:
    """The headline numbers of several runs (``(label, result)`` in display order): one row
    per layer and metric measured by some run, one column per run."""
    layers: list[str] = []
    for _, result in runs:
        layers += [name for name in result.layers if name not in layers]
    rows: list[list[Cell]] = []
    for name in layers:
        here = [result.layers.get(name) for _, result in runs]
        prefix = f"{name}: " if len(layers) > 1 else ""  # one layer: named in the first row
        rows.append([f"{name}: n × d", *(MISSING if x is None else _layer_size(x) for x in here)])
        for metric in HEADLINE_LAYER_METRICS:
            values = [None if x is None else metric.read(x) for x in here]
            if any(value is not None for value in values):
                rows.append([f"{prefix}{metric.title}", *(_value(metric, v) for v in values)])
    retrieval = {
        metric.key: metric
        for _, r in runs
        if r.probes is not None
        for metric in headline_retrieval_metrics(r.probes, r.probes.layer)
    }
    for metric in (*HEADLINE_PROBE_METRICS, *retrieval.values()):
        values = [None if r.probes is None else metric.read(r.probes) for _, r in runs]
        if any(value is not None for value in values):
            layer = {r.probes.layer for _, r in runs if r.probes is not None}
            title = f"{'/'.join(sorted(layer))}: {metric.title}"
            rows.append([title, *(_value(metric, value) for value in values)])
    return Table(columns=["", *(label for label, _ in runs)], rows=rows)


def table_text(table: Table) -> str:
    """``table`` as aligned plain text: the first column left, the others right-aligned."""
    grid = [[str(c) for c in table.columns], *[[str(c) for c in row] for row in table.rows]]
    widths = [max(len(row[i]) for row in grid) for i in range(len(table.columns))]
    lines = []
    for row in grid:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def result_text(result: Result) -> str:
    """``repr`` of a result: what was measured and its headline table, a few lines."""
    table = headline_table(result)
    return "\n".join([f"cl-diag Result: {table.caption}", table_text(table), _EXCESSIVE, _MORE])


def result_html(result: Result) -> str:
    """``_repr_html_`` of a result: the headline table, every text escaped, no script."""
    table = headline_table(result)
    titled = replace(table, caption=f"cl-diag Result: {table.caption}")
    return render_fragment([titled, Paragraph(f"{_EXCESSIVE}; {_MORE}.")])


def comparison_text(table: Table, title: str) -> str:
    """``repr`` of a comparison: ``title``, then ``table`` with at most
    :data:`MAX_TEXT_RUNS` run columns (the runs numbered, their labels listed above)."""
    labels = table.columns[1:]
    shown = labels[:MAX_TEXT_RUNS]
    lines = [title]
    lines += [f"  #{i} {label}" for i, label in enumerate(shown, 1)]
    if len(labels) > len(shown):
        lines.append(f"  … and {len(labels) - len(shown)} more runs (all in .frame and the report)")
    numbered = Table(
        columns=["", *(f"#{i}" for i in range(1, len(shown) + 1))],
        rows=[row[: len(shown) + 1] for row in table.rows],
    )
    lines.append(table_text(numbered))
    return "\n".join(lines)


def comparison_html(table: Table, title: str) -> str:
    """``_repr_html_`` of a comparison: ``title`` and the headline table, escaped."""
    return render_fragment([Paragraph(title), table])
