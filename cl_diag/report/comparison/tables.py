"""The comparison's tables of metrics: one row per run (or per seed group, mean ± sd), the cells
formatted by each metric's table entry (:mod:`cl_diag.report.metrics`), a difference from the
baseline in percentage points for accuracies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cl_diag.measurement.stats import t_half_width
from cl_diag.report.document import (
    MISSING,
    Table,
    fmt,
    pct,
    pct_interval,
)
from cl_diag.report.metrics import (
    Metric,
)
from cl_diag.report.probe_section import is_test_accuracy
from cl_diag.report.runs import (
    SeedGroup,
)

# ---- tables -------------------------------------------------------------------------------------


def _cell(
    metric: Metric, value: float | None, *, delta: bool = False, n_test: int | None = None
) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if delta:
        return f"{100.0 * value:+.2f} pp" if metric.accuracy else f"{value:+.4g}"
    if is_test_accuracy(metric):
        return pct_interval(value, n_test)
    return pct(value) if metric.accuracy else fmt(value)


def _metric_table(
    rows: list[tuple[str, dict[str, float | None]]],
    metrics: Sequence[Metric],
    *,
    caption: str,
    delta: bool = False,
    test_images: Sequence[int | None] | None = None,
) -> Table | None:
    """Runs x metrics: ``rows`` = [(label, metric key -> value)]; columns no run has are left
    out. ``test_images``: per row, the test split the accuracies were scored on (their Wilson
    interval)."""
    present = [m for m in metrics if any(values.get(m.key) is not None for _, values in rows)]
    if not present:
        return None
    sizes = list(test_images) if test_images is not None else [None] * len(rows)
    return Table(
        columns=["run", *[m.title for m in present]],
        rows=[
            [label, *[_cell(m, values.get(m.key), delta=delta, n_test=n) for m in present]]
            for (label, values), n in zip(rows, sizes, strict=True)
        ],
        caption=caption,
    )


def _seed_cell(metric: Metric, stats: tuple[float, float] | None, n: int) -> str:
    """mean ± sd over a group's n seeds; accuracies also the t interval of the mean."""
    if stats is None:
        return MISSING
    mean, std = stats
    if metric.accuracy:
        half = t_half_width(std, n)
        return (
            f"{100.0 * mean:.2f} ± {100.0 * std:.2f} % "
            f"[{100.0 * (mean - half):.2f}, {100.0 * (mean + half):.2f}]"
        )
    return f"{fmt(mean, 4)} ± {fmt(std, 2)}"


def _seed_table(
    rows: list[tuple[SeedGroup, dict[str, tuple[float, float] | None]]],
    metrics: Sequence[Metric],
    *,
    caption: str,
) -> Table | None:
    present = [m for m in metrics if any(stats.get(m.key) is not None for _, stats in rows)]
    if not rows or not present:
        return None
    return Table(
        columns=["group", "seeds", *[m.title for m in present]],
        rows=[
            [
                g.label,
                f"{len(g.members)}: {g.seeds_text}",
                *[_seed_cell(m, stats.get(m.key), len(g.members)) for m in present],
            ]
            for g, stats in rows
        ],
        caption=caption,
    )
