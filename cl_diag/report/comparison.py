"""The content of a comparison report: several results side by side.

Runs are labelled, ordered and grouped into replicates by :mod:`cl_diag.report.runs`
(labels name what differs between the training configs, "simclr b32 +VRN30"; folder
names are the fallback). The tables hold, per layer, the positive mean, the
cross-view and within-view negative mean/var/std/excessive ratio, the geometry,
and the probe accuracies; with a baseline, each run's difference from it.

Every number comes from one pandas frame, :attr:`Comparison.frame`: one row per run
(display order), columns = the run's label, name, n_ref, threshold and mode, its config
options (``config:<key>``, :attr:`cl_diag.runconfig.RunConfig.options`), its per-layer
metrics (``<layer>/<metric>``) and its probe metrics (the keys of
:data:`cl_diag.report.metrics.PROBE_METRICS` and ``retrieval_<layer>_recall_at_<k>``). The tables,
the differences from the baseline, the over-seed mean ± std, comparison.csv and
comparison_by_seed.csv are read from it.

The batch-size view reproduces the layout of the paper's Table 1 and Fig. 4
(Lee et al., ICML 2025), with the Theorem 5.5 band (Eq. 11)

    Var[s_neg] in [ (n-m) / ((m-1)(n-1)^2),  n(n-m) / ((m-1)(n-1)^2) ]

and the 1/d variance of uniformly random unit vectors (paper-notes 11.4); the
temperature view is Fig. 3's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from cl_diag.io.plans import PlanRecord
from cl_diag.measurement.stats import mean_sd, t_half_width
from cl_diag.report import figures
from cl_diag.report.claims import Finding, RunData, ccem_full_batch, findings_blocks, run_findings
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
    pct_interval,
)
from cl_diag.report.environment import comparison_environment
from cl_diag.report.metrics import (
    COLLAPSE_METRICS,
    GEOMETRY_METRICS,
    HEADLINE_PROBE_METRICS,
    INSTANCE_COLLAPSE_METRICS,
    PAIR_METRICS,
    PROBE_METRICS,
    Metric,
    retrieval_metric,
)
from cl_diag.report.overview import HEADLINE_METRICS, arrange, verdict_line
from cl_diag.report.plan_section import plan_blocks
from cl_diag.report.probe_section import is_test_accuracy, test_images, validation_top1
from cl_diag.report.runs import (
    SEED_KEY,
    Run,
    SeedGroup,
    config_labels,
    group_label,
    groups_of,
    loss_layer,
    natural_key,
    ordered,
    run_labels,
    unique_labels,
)
from cl_diag.report.tuning_section import tuning_blocks
from cl_diag.result import RETRIEVAL_KS, Histogram, Result
from cl_diag.runconfig import RunConfig
from cl_diag.vocabulary import NEGATIVE_TYPES, PairType

#: a run as the user gave it: its name (the folder or file, the label fallback) and its result
Named = tuple[str, Result]
#: the options each run's row of comparison.csv (and the runs table) repeats
FACT_COLUMNS = ("loss", "batch_size", "temperature", "vrn")
#: the per-layer metrics of comparison.csv and the layer tables
LAYER_METRICS = PAIR_METRICS + GEOMETRY_METRICS + COLLAPSE_METRICS
# the pair metrics of the "over seeds" table of each layer
_SEED_PAIR_KEYS = (
    f"{PairType.POSITIVE.value}_mean",
    *(
        f"{kind.value}_{statistic}"
        for kind in NEGATIVE_TYPES
        for statistic in ("mean", "std", "excessive_ratio")
    ),
)
SEED_STD_WORDS = "sample standard deviation (ddof 1) across seeds"
# the figures that carry a finding, placed next to it in the Findings section
_FINDING_FIGURES = {
    "batch_variance": "variance_vs_batch.svg",
    "batch_accuracy": "accuracy_vs_batch.svg",
    "alpha_threshold": "instance_within_class_variance_vs_alpha.svg",
    "ccem_optimum": "ccem_x_vs_temperature.svg",
}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _present(value: object) -> float | None:
    """A frame cell as a number, NaN (absent) as None."""
    number = _number(value)
    return None if number is None or math.isnan(number) else number


def _thresholds(runs: Sequence[Named]) -> list[tuple[int, float]]:
    seen: dict[int, float] = {}
    for _, result in runs:
        seen.setdefault(result.n_ref, result.delta)
    return list(seen.items())


def comparison_warnings(
    runs: Sequence[Named], labels: Mapping[str, str] | None = None
) -> list[str]:
    """What a reader must know before comparing these numbers (also printed by the CLI); the
    runs named by ``labels`` (run name -> label) where given, else by :func:`run_labels`."""
    shown = run_labels(runs)
    if labels:
        shown = [labels.get(name, label) for (name, _), label in zip(runs, shown, strict=True)]
    warnings = []
    if len(_thresholds(runs)) > 1:
        detail = "; ".join(
            f"{label}: n_ref = {fmt(r.n_ref)}, δ = {fmt(r.delta)}"
            for label, (_, r) in zip(shown, runs, strict=True)
        )
        warnings.append(
            "The runs have different n_ref, so their excessive-separation thresholds "
            "δ = −1/(n_ref − 1) differ and their ratios count against different lines "
            f"({detail}). Both thresholds are drawn; to compare ratios on one threshold, re-run "
            "`cl-diag analyze` with the same --n-ref."
        )
    modes = {r.mode for _, r in runs}
    if len(modes) > 1:
        detail = "; ".join(f"{label}: {r.mode}" for label, (_, r) in zip(shown, runs, strict=True))
        warnings.append(
            f"The runs mix exact and sampled statistics ({detail}); sampled values are estimates."
        )
    return warnings


def _layer_names(runs: Sequence[Named]) -> list[str]:
    names: list[str] = []
    for _, result in runs:
        names += [n for n in result.layers if n not in names]
    return names


def primary_layer(runs: Sequence[Named]) -> str | None:
    """The paper measures the projector output; an embeddings file has one layer."""
    names = _layer_names(runs)
    for preferred in ("projector", "embedding"):
        if preferred in names:
            return preferred
    return names[0] if names else None


# ---- seed groups --------------------------------------------------------------------------------


def _pooled_histograms(
    runs: Sequence[Named], group: SeedGroup, layer: str
) -> dict[str, Histogram] | None:
    """The group's negative histograms summed over its seeds (None when their binnings differ)."""
    pooled: dict[str, Histogram] = {}
    for kind in NEGATIVE_TYPES:
        stats = [
            runs[i][1].layers[layer].pairs.get(kind) if layer in runs[i][1].layers else None
            for i in group.members
        ]
        present = [s for s in stats if s is not None]
        if len(present) < len(stats):
            continue
        hists = [s.histogram for s in present]
        shapes = {(tuple(h.range), h.bins, len(h.counts)) for h in hists}
        if len(shapes) != 1:
            return None
        counts = np.sum([np.asarray(h.counts, dtype=np.int64) for h in hists], axis=0)
        pooled[kind] = Histogram(
            range=list(hists[0].range), bins=hists[0].bins, counts=counts.tolist()
        )
    return pooled or None


# ---- the one frame ------------------------------------------------------------------------------


def _col(layer: str, key: str) -> str:
    """The frame column of a per-layer metric."""
    return f"{layer}/{key}"


def _fact_col(key: str) -> str:
    return f"config:{key}"


class Comparison:
    """Runs side by side, in display order, with the one frame every number is read from."""

    def __init__(
        self,
        runs: Sequence[Named],
        *,
        baseline: str | None = None,
        reports: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        plan: PlanRecord | None = None,
    ):
        #: run name -> the link to that run's own report.html (relative to the comparison)
        self.reports = dict(reports or {})
        #: the study's plan (cl-diag compare/sweep --plan): its section, primaries first
        self.plan = plan
        self.runs = ordered(runs)
        typed = [Run.of(name, result) for name, result in self.runs]
        self.names = [run.name for run in typed]
        self.results = [run.result for run in typed]
        #: each run's training config, parsed once (cl_diag.runconfig)
        self.configs = [run.config for run in typed]
        given = dict(labels or {})
        #: run name -> the label the user gave it (--label), used as it is
        self.given_labels = given
        self.labels = unique_labels(
            self.names, self.configs, [given.get(name) for name in self.names]
        )
        self.layers = _layer_names(self.runs)
        self.groups = groups_of(typed)
        self.baseline: int | None = None
        if baseline is not None:
            if baseline not in self.names:
                raise ValueError(f"baseline {baseline!r} is not one of the runs {self.names!r}")
            self.baseline = self.names.index(baseline)
        #: probe metrics: the classification and clustering probes, then retrieval per layer
        self.probe_metrics: tuple[Metric, ...] = PROBE_METRICS + tuple(
            retrieval_metric(layer, k) for layer in self.layers for k in RETRIEVAL_KS
        )
        self.frame = self._frame()

    # -- building

    def _frame(self) -> pd.DataFrame:
        group_of = {i: g for g, group in enumerate(self.groups) for i in group.members}
        records = []
        for i, (name, result) in enumerate(self.runs):
            record: dict[str, object] = {
                "label": self.labels[i],
                "run": name,
                "n_ref": result.n_ref,
                "threshold": result.delta,  # the column keeps result.json's name
                "mode": result.mode,
                "seed_group": group_of.get(i),
            }
            record.update({_fact_col(k): v for k, v in self.configs[i].options.items()})
            for layer_name in self.layers:
                layer = result.layers.get(layer_name)
                record[_col(layer_name, "n")] = None if layer is None else layer.n
                record[_col(layer_name, "d")] = None if layer is None else layer.d
                for metric in LAYER_METRICS + INSTANCE_COLLAPSE_METRICS:
                    record[_col(layer_name, metric.key)] = (
                        None if layer is None else _number(metric.read(layer))
                    )
            for metric in self.probe_metrics:
                record[metric.key] = (
                    None if result.probes is None else _number(metric.read(result.probes))
                )
            records.append(record)
        frame = pd.DataFrame(records, dtype=object)
        # keys some runs' configs lack: None like every other absent value, not NaN
        return frame.astype(object).where(frame.notna(), None)

    @cached_property
    def _numbers(self) -> pd.DataFrame:
        """The metric columns as float64, absent values NaN."""
        columns = [_col(layer, m.key) for layer in self.layers for m in LAYER_METRICS]
        columns += [m.key for m in self.probe_metrics]
        return self.frame[columns].astype(np.float64)

    @cached_property
    def deltas(self) -> pd.DataFrame | None:
        """Every metric minus the baseline's (NaN where either is absent); None without one."""
        if self.baseline is None:
            return None
        return self._numbers - self._numbers.iloc[self.baseline]

    @cached_property
    def over_seeds(self) -> dict[int, dict[str, tuple[float, float] | None]]:
        """Per seed group (its index): every metric's (mean, sample std) over its seeds, or
        None unless every seed has it. The one aggregation of the report and the CSVs."""
        numbers = self._numbers[self.frame["seed_group"].notna()]
        grouped = numbers.groupby(self.frame["seed_group"][numbers.index].astype(int), sort=False)
        out: dict[int, dict[str, tuple[float, float] | None]] = {}
        for g, part in grouped:
            out[int(g)] = {c: mean_sd(part[c].to_numpy(dtype=np.float64)) for c in part.columns}
        return out

    @cached_property
    def findings(self) -> list[Finding]:
        """The paper's claims tested on these runs (cl_diag.report.claims), each on the layer
        its loss sees; groups are named by the runs' config labels."""
        data = [
            RunData.of(result, label=label, config=config)
            for result, label, config in zip(self.results, self.labels, self.configs, strict=True)
        ]
        index = {id(d): i for i, d in enumerate(data) if d is not None}
        cache: dict[tuple[str, ...], list[str]] = {}

        def name(run: RunData, exclude: tuple[str, ...]) -> str:
            if exclude not in cache:
                cache[exclude] = group_label(self.configs, self.labels, exclude)
            return cache[exclude][index[id(run)]]

        return run_findings([d for d in data if d is not None], name, figures=_FINDING_FIGURES)

    # -- reading

    def has_layer(self, i: int, layer: str) -> bool:
        return layer in self.results[i].layers

    def value(self, i: int, column: str) -> float | None:
        return _present(self.frame.at[i, column])

    def delta(self, i: int, column: str) -> float | None:
        assert self.deltas is not None
        return _present(self.deltas.at[i, column])

    def fact(self, i: int, key: str) -> object:
        """Run i's option ``key`` (canonical name, :attr:`RunConfig.options`), None if absent."""
        return self.configs[i].option(key)

    def row(
        self, i: int, metrics: Sequence[Metric], layer: str | None = None, *, delta: bool = False
    ) -> dict[str, float | None]:
        """Run i's ``metrics`` (of ``layer``, for per-layer metrics), or their differences from
        the baseline: metric key -> value, None where absent."""
        read = self.delta if delta else self.value
        return {m.key: read(i, m.key if layer is None else _col(layer, m.key)) for m in metrics}

    def layer_values(self, i: int, layer: str, *, delta: bool = False) -> dict[str, float | None]:
        """The metrics of comparison.csv's row (run i, layer): the layer's metrics, the probes,
        and the retrieval of that layer (``retrieval_recall_at_<k>``)."""
        read = self.delta if delta else self.value
        out = {m.key: read(i, _col(layer, m.key)) for m in LAYER_METRICS}
        out.update({m.key: read(i, m.key) for m in PROBE_METRICS})
        for k in RETRIEVAL_KS:
            out[retrieval_metric(layer, k, row=True).key] = read(i, retrieval_metric(layer, k).key)
        return out

    def seed_values(
        self, group: int, layer: str | None = None
    ) -> dict[str, tuple[float, float] | None]:
        """A group's over-seed statistics: of one layer's comparison.csv row metrics, or (layer
        None) of the probe metrics."""
        stats = self.over_seeds[group]
        if layer is None:
            return {m.key: stats[m.key] for m in self.probe_metrics}
        out = {m.key: stats[_col(layer, m.key)] for m in LAYER_METRICS}
        out.update({m.key: stats[m.key] for m in PROBE_METRICS})
        for k in RETRIEVAL_KS:
            out[retrieval_metric(layer, k, row=True).key] = stats[retrieval_metric(layer, k).key]
        return out

    # -- the CSVs

    def csv_frame(self) -> pd.DataFrame:
        """comparison.csv: one row per (run, layer): config facts, thresholds, every compared
        metric, and with a baseline ``delta_<metric>`` = run − baseline for the same layer
        (fractions, not %)."""
        records = []
        for i, (name, _) in enumerate(self.runs):
            for layer_name in self.layers:
                if not self.has_layer(i, layer_name):
                    continue
                record: dict[str, object] = {
                    "label": self.labels[i],
                    "run": name,
                    "layer": layer_name,
                }
                record.update({key: self.fact(i, key) for key in FACT_COLUMNS})
                record.update(
                    {key: self.frame.at[i, key] for key in ("n_ref", "threshold", "mode")}
                )
                record.update({key: self.frame.at[i, _col(layer_name, key)] for key in ("n", "d")})
                record.update(self.layer_values(i, layer_name))
                if self.baseline is not None:
                    deltas = self.layer_values(i, layer_name, delta=True)
                    record.update({f"delta_{key}": value for key, value in deltas.items()})
                records.append(record)
        return pd.DataFrame.from_records(records)

    def seed_csv_frame(self) -> pd.DataFrame | None:
        """comparison_by_seed.csv: one row per (seed group, layer): the group's facts, its seeds
        and, for every compared metric, ``<metric>_mean`` and ``<metric>_std`` (ddof 1) over
        the seeds. None when no runs form a seed group."""
        if not self.groups:
            return None
        records = []
        for g, group in enumerate(self.groups):
            first = group.members[0]
            for layer_name in self.layers:
                if not all(self.has_layer(i, layer_name) for i in group.members):
                    continue
                record: dict[str, object] = {
                    "group": group.label,
                    "layer": layer_name,
                    "n_seeds": len(group.members),
                    "seeds": " ".join(fmt(s) for s in group.seeds),
                    "runs": ";".join(self.names[i] for i in group.members),
                }
                record.update({key: self.fact(first, key) for key in FACT_COLUMNS})
                record.update(
                    {key: self.frame.at[first, key] for key in ("n_ref", "threshold", "mode")}
                )
                for key, stats in self.seed_values(g, layer_name).items():
                    record[f"{key}_mean"] = None if stats is None else stats[0]
                    record[f"{key}_std"] = None if stats is None else stats[1]
                records.append(record)
        return pd.DataFrame.from_records(records)


def comparison_frame(runs: Sequence[Named], *, baseline: str | None = None) -> pd.DataFrame:
    """comparison.csv's frame (:meth:`Comparison.csv_frame`)."""
    return Comparison(runs, baseline=baseline).csv_frame()


def seed_frame(runs: Sequence[Named]) -> pd.DataFrame | None:
    """comparison_by_seed.csv's frame (:meth:`Comparison.seed_csv_frame`)."""
    return Comparison(runs).seed_csv_frame()


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


# ---- studies ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Study:
    """Points of one study figure: series label -> [(x, y)], the seeds of a config averaged
    (``Series.err`` their sample sd, ``Series.n`` their number; seed is a replicate axis)."""

    series: list[figures.Series]

    @classmethod
    def collect(cls, configs: Sequence[RunConfig], x_key: str, ys: list[float | None]) -> _Study:
        """The points of ``ys`` (one per run) against the option ``x_key``, one series per
        config label without that option and the seed."""
        series_labels = config_labels(configs, exclude=(x_key, SEED_KEY))
        groups: dict[str, dict[float, list[float]]] = {}
        for config, y, s_label in zip(configs, ys, series_labels, strict=True):
            x = _number(config.option(x_key))
            if x is None or y is None:
                continue
            groups.setdefault(s_label or "runs", {}).setdefault(x, []).append(y)
        # series with and without VRN side by side: without first, a stable order
        in_order = sorted(groups.items(), key=lambda kv: ("+VRN" in kv[0], natural_key(kv[0])))
        series = []
        for label, by_x in in_order:
            xs = list(by_x)
            values = [np.asarray(by_x[x], dtype=np.float64) for x in xs]
            series.append(
                figures.Series(
                    label,
                    xs,
                    [float(v.mean()) for v in values],
                    err=[float(v.std(ddof=1)) if v.size > 1 else 0.0 for v in values],
                    n=[int(v.size) for v in values],
                )
            )
        return cls(series)

    @property
    def points(self) -> int:
        return sum(len(s.x) for s in self.series)

    @property
    def replicated(self) -> bool:
        """True when some point averages several seeds."""
        return any(k > 1 for s in self.series for k in s.n)


def _study_cell(series: figures.Series, x: float) -> str:
    """A Table 1 cell: the value, or mean ± sd (n seeds)."""
    for sx, y, err, k in zip(series.x, series.y, series.err, series.n, strict=True):
        if sx == x:
            return fmt(y) if k == 1 else f"{fmt(y)} ± {fmt(err, 2)} (n = {k})"
    return MISSING


def _band(n_ref: object, ms: list[float]) -> tuple[list[float], list[float], list[float]] | None:
    """Thm 5.5 band on a fine grid of batch sizes spanning the runs' ones."""
    from cl_diag.measurement.theory import variance_band

    if not isinstance(n_ref, int) or not ms:
        return None
    lo_m, hi_m = max(2, int(min(ms))), min(int(max(ms)), n_ref)
    if hi_m < lo_m:
        return None
    grid = sorted(
        {round(m) for m in np.geomspace(lo_m, hi_m, 48)} | {int(m) for m in ms if 2 <= m <= n_ref}
    )
    bands = [variance_band(n_ref, m) for m in grid]
    return [float(m) for m in grid], [b[0] for b in bands], [b[1] for b in bands]


def _study_blocks(cmp: Comparison, layer: str | None) -> list:
    configs = cmp.configs
    blocks: list = []

    def distinct(values: Sequence[object]) -> list[float]:
        return sorted({v for v in map(_number, values) if v is not None})

    top1 = [
        None if (v := cmp.value(i, "linear_top1")) is None else 100.0 * v
        for i in range(len(cmp.runs))
    ]
    batch_sizes = distinct([c.batch_size for c in configs])
    if len(batch_sizes) > 1 and layer is not None:
        blocks.append(Heading(2, "Batch-size study"))
        xneg_var = [
            cmp.value(i, _col(layer, f"{PairType.CROSS_VIEW_NEGATIVE.value}_var"))
            for i in range(len(cmp.runs))
        ]
        var_study = _Study.collect(configs, "batch_size", xneg_var)
        table_rows: list[list[Cell]] = []
        for m in batch_sizes:
            row: list[Cell] = [fmt(int(m)) if float(m).is_integer() else fmt(m)]
            row += [_study_cell(series, m) for series in var_study.series]
            table_rows.append(row)
        blocks.append(
            Table(
                columns=["batch size m", *[s.label for s in var_study.series]],
                rows=table_rows,
                caption=(
                    "Variance (population) of cross-view negative similarities, layer "
                    f"'{layer}', by training batch size (the layout of the paper's Table 1)"
                    + (
                        f"; a config's seeds as mean ± {SEED_STD_WORDS} (n seeds)."
                        if var_study.replicated
                        else "."
                    )
                ),
            )
        )
        thresholds = _thresholds(cmp.runs)
        n_ref = thresholds[0][0]
        ds = sorted(
            {
                d
                for i in range(len(cmp.runs))
                if isinstance(d := cmp.frame.at[i, _col(layer, "d")], int) and d > 0
            }
        )
        band = _band(n_ref, batch_sizes)
        blocks.append(
            Figure(
                filename="variance_vs_batch.svg",
                svg=figures.variance_vs_batch(
                    var_study.series,
                    band,
                    f"Thm 5.5 band (n = {fmt(n_ref)})",
                    [(d, 1.0 / d) for d in ds],
                    layer,
                ),
                alt=f"Variance of cross-view negative similarity versus batch size, layer {layer}",
                caption=(
                    "Table 1 view: variance of cross-view negative similarities "
                    f"(layer '{layer}') versus training batch size m, log–log. Grey band: "
                    "Theorem 5.5 (Eq. 11), "
                    "[(n−m)/((m−1)(n−1)²), n(n−m)/((m−1)(n−1)²)] "
                    f"with n = n_ref = {fmt(n_ref)}, the optimum with fixed batches and d ≥ m − 1, "
                    "without VRN; dotted: 1/d, the variance of uniformly random unit vectors. Real "
                    "encoders (d ≪ n, reshuffled batches) sit far above the band; only the "
                    "ordering across m is predicted."
                    + (" Points: mean over seeds, bars ± 1 sd." if var_study.replicated else "")
                    + (
                        f" Runs have several n_ref; the band uses the first, {fmt(n_ref)}."
                        if len(thresholds) > 1
                        else ""
                    )
                ),
            )
        )
        acc_study = _Study.collect(configs, "batch_size", top1)
        if acc_study.points:
            blocks.append(
                Figure(
                    filename="accuracy_vs_batch.svg",
                    svg=figures.metric_vs(
                        acc_study.series,
                        xlabel="training batch size m",
                        ylabel="linear-probe top-1 (%)",
                        title="linear-probe accuracy vs batch size",
                        log_base=2,
                    ),
                    alt="Linear-probe top-1 accuracy versus batch size",
                    caption="Fig. 4 view: linear-probe top-1 accuracy (backbone features) versus "
                    "training batch size."
                    + (" Points: mean over seeds, bars ± 1 sd." if acc_study.replicated else ""),
                )
            )
        else:
            blocks.append(
                Note(
                    "The runs differ in batch size but carry no linear-probe accuracy: no Fig. 4 "
                    "view."
                )
            )
    temperatures = distinct([c.temperature for c in configs])
    if len(temperatures) > 1:
        blocks.append(Heading(2, "Temperature study"))
        acc_study = _Study.collect(configs, "temperature", top1)
        if acc_study.points:
            blocks.append(
                Figure(
                    filename="accuracy_vs_temperature.svg",
                    svg=figures.metric_vs(
                        acc_study.series,
                        xlabel="temperature t",
                        ylabel="linear-probe top-1 (%)",
                        title="linear-probe accuracy vs temperature",
                        log_base=10,
                    ),
                    alt="Linear-probe top-1 accuracy versus temperature",
                    caption="Fig. 3 view: linear-probe top-1 accuracy (backbone features) versus "
                    "temperature, log scale.",
                )
            )
        elif not _ccem_n(cmp):
            blocks.append(
                Note(
                    "The runs differ in temperature but carry no linear-probe accuracy: no Fig. 3 "
                    "view."
                )
            )
        blocks += _ccem_blocks(cmp, layer)
    return blocks


def _ccem_n(cmp: Comparison) -> int | None:
    """N when every run carries the CCEM's x* of its full batch (a sigmoid loss on free
    embeddings over N = n_ref pairs, paper-notes 11.1) at one N; None otherwise."""
    if any(ccem_full_batch(result) is None for result in cmp.results):
        return None
    found = {result.n_ref for result in cmp.results}
    return found.pop() if len(found) == 1 else None


def _ccem_blocks(cmp: Comparison, layer: str | None) -> list:
    """The CCEM view of a temperature study on free embeddings: the measured x = (1 + mean
    positive similarity)/2 against t, one line per config without t and the seed (e.g. per b),
    beside the CCEM's x*(t; b, N) drawn from its closed form (``ccem_optimum``'s figure)."""
    n = _ccem_n(cmp)
    if n is None or layer is None:
        return []
    from cl_diag.measurement.theory import sigmoid_optimum

    column = _col(layer, f"{PairType.POSITIVE.value}_mean")
    pos = [cmp.value(i, column) for i in range(len(cmp.runs))]
    xs = [None if p is None else (1.0 + p) / 2.0 for p in pos]
    study = _Study.collect(cmp.configs, "temperature", xs)
    ts = [t for c in cmp.configs if (t := _number(c.temperature)) is not None]
    if not ts or min(ts) <= 0:
        return []
    grid = np.geomspace(min(ts), max(ts), 200)
    labels = config_labels(cmp.configs, exclude=("temperature", SEED_KEY))
    bias_of = {(label or "runs"): c.bias for c, label in zip(cmp.configs, labels, strict=True)}
    predicted = []
    for series in study.series:
        b = bias_of.get(series.label)
        if b is None:
            return []
        predicted.append(
            figures.Series(
                f"CCEM x* (b = {fmt(b)})", grid.tolist(), [sigmoid_optimum(t, b, n).x for t in grid]
            )
        )
    return [
        Figure(
            filename="ccem_x_vs_temperature.svg",
            svg=figures.metric_vs(
                study.series,
                xlabel="temperature t",
                ylabel="x = (1 + mean positive similarity)/2",
                title=f"learned structure vs the CCEM optimum (N = {n})",
                log_base=2,
                predicted=predicted,
            ),
            alt="Measured x against temperature beside the CCEM optimum x*",
            caption=(
                f"The CCEM view (layer '{layer}'): x = (1 + mean positive similarity)/2 of each "
                "config against the temperature t (log scale; points: mean over seeds, bars ± 1 "
                f"sd), dashed: the CCEM's optimum x*(t, b; N = {n}) (paper-notes 11.1), 1 at the "
                "simplex ETF, 0 antipodal, in between the interior optimum."
            ),
        )
    ]


# ---- a metric against any swept numeric option ---------------------------------------------

#: options that have a study view of their own (above and below) or group runs (the seed)
_OWN_VIEWS = frozenset({"batch_size", "temperature", "vrn", SEED_KEY})
#: a curve needs this many distinct values of the option
_STUDY_MIN_VALUES = 3


def _alpha_markers(result: Result) -> list[tuple[float, str]]:
    ssem = result.theory.ssem if result.theory is not None else None
    if ssem is None or ssem.alpha_c is None:
        return []
    return [
        (
            ssem.alpha_c,
            f"α_c = {fmt(ssem.alpha_c, 4)} (SSEM: m = {fmt(ssem.m)}, n = {fmt(ssem.n)}, "
            f"τ = {fmt(ssem.tau)})",
        )
    ]


#: option -> the theory's thresholds on it that a run's result carries, drawn as vertical
#: lines on that option's study figures: (value, legend text)
OPTION_MARKERS = {"alpha": _alpha_markers}


def _study_metrics(layer: str | None) -> list[tuple[Metric, str | None]]:
    """(metric, layer or None for a probe): what a swept option's figures plot, when measured."""
    per_layer = [m for m in COLLAPSE_METRICS if m.key == "within_class_variance"]
    per_layer += list(INSTANCE_COLLAPSE_METRICS)
    probes = [m for m in PROBE_METRICS if m.key in ("knn_k20_top1", "linear_top1")]
    return [(m, layer) for m in per_layer if layer is not None] + [(m, None) for m in probes]


def _option_study_blocks(cmp: Comparison, layer: str | None) -> list:
    """For every numeric training option the runs sweep over (at least three values, other than
    the batch size, temperature and seed, which have views of their own): the study metrics
    (:func:`_study_metrics`) against it, one figure per metric with the theory's thresholds on
    the option marked (:data:`OPTION_MARKERS`), and a table of the values."""
    keys: list[str] = []
    for config in cmp.configs:
        keys += [k for k in config.options if k not in keys]
    blocks: list = []
    n_runs = len(cmp.runs)
    for key in keys:
        if key in _OWN_VIEWS:
            continue
        values = [config.option(key) for config in cmp.configs]
        xs = {v for v in map(_number, values) if v is not None}
        if len(xs) < _STUDY_MIN_VALUES or any(isinstance(v, bool) for v in values):
            continue
        markers = sorted({m for r in cmp.results for m in OPTION_MARKERS.get(key, lambda _: [])(r)})
        columns = [
            (m, lay, m.key if lay is None else _col(lay, m.key)) for m, lay in _study_metrics(layer)
        ]
        measured = [
            (m, lay, col)
            for m, lay, col in columns
            if any(cmp.value(i, col) is not None for i in range(n_runs))
        ]
        if not measured:
            continue
        blocks.append(Heading(2, f"{key.replace('_', ' ')} study"))
        marker_words = "; ".join(text for _, text in markers)
        order = sorted(
            range(n_runs),
            key=lambda i: (_number(cmp.fact(i, key)) is None, _number(cmp.fact(i, key)) or 0.0),
        )
        blocks.append(
            Table(
                columns=[
                    "run",
                    key,
                    *[m.title + (f" ({lay})" if lay else "") for m, lay, _ in measured],
                ],
                rows=[
                    [
                        cmp.labels[i],
                        fmt(cmp.fact(i, key)),
                        *[_cell(m, cmp.value(i, col)) for m, _, col in measured],
                    ]
                    for i in order
                ],
                caption=f"The study metrics against the swept option {key}"
                + (f"; theory: {marker_words}." if markers else "."),
            )
        )
        positive = min(xs) > 0
        log_base = 10.0 if positive and max(xs) / min(xs) >= 100 else None
        for metric, lay, col in measured:
            scale = 100.0 if metric.accuracy else 1.0
            ys = [None if (v := cmp.value(i, col)) is None else scale * v for i in range(n_runs)]
            study = _Study.collect(cmp.configs, key, ys)
            where = f", layer '{lay}'" if lay else ""
            ylabel = metric.title + (" (%)" if metric.accuracy else "")
            blocks.append(
                Figure(
                    filename=f"{metric.key}_vs_{key}.svg",
                    svg=figures.metric_vs(
                        study.series,
                        xlabel=key,
                        ylabel=ylabel,
                        title=f"{metric.title}{where} vs {key}",
                        log_base=log_base,
                        markers=markers,
                    ),
                    alt=f"{metric.title}{where} versus {key}",
                    caption=f"{metric.report_title or metric.title}{where} against the training "
                    f"option {key}, one point per run"
                    + (f"; dashed: {marker_words}" if markers else "")
                    + ".",
                )
            )
    return blocks


# ---- the VRN weight study -------------------------------------------------------------------


def _interval_series(
    configs: Sequence[RunConfig], ys: Sequence[float | None]
) -> list[figures.Series]:
    """The points of ``ys`` (one per run) against λ, one series per config without λ and the
    seed, each point the mean over seeds with ``err`` the half-width of its 95 % Student-t
    interval (0 for one seed)."""
    study = _Study.collect(configs, "vrn", list(ys))
    out = []
    for series in study.series:
        half = [
            t_half_width(sd, n) if n > 1 else 0.0
            for sd, n in zip(series.err, series.n, strict=True)
        ]
        out.append(figures.Series(series.label, series.x, series.y, err=half, n=series.n))
    return out


def _interval_cell(series: figures.Series, x: float, digits: int = 4) -> str:
    """mean [95 % interval] (n) of one point, or the value of a single run."""
    for sx, y, half, k in zip(series.x, series.y, series.err, series.n, strict=True):
        if sx == x:
            if k == 1:
                return fmt(y, digits)
            return f"{fmt(y, digits)} [{fmt(y - half, digits)}, {fmt(y + half, digits)}] (n = {k})"
    return MISSING


def _vrn_study_blocks(cmp: Comparison, layer: str | None) -> list:
    """The VRN weight study (runs at three or more VRN weights λ, 0 = none): linear-probe
    accuracy on the test split, on the validation split when one was carved, and the
    variance of the cross-view negatives and the positive mean on the loss's layer, against
    λ, one line per setting (e.g. batch size), each point the mean over seeds with its 95 %
    Student-t interval: a table and one figure per quantity."""
    weights = sorted(
        {w for c in cmp.configs if c.vrn.weight is not None for w in [float(c.vrn.weight)]}
    )
    if len(weights) < _STUDY_MIN_VALUES:
        return []
    n_runs = len(cmp.runs)
    quantities: list[tuple[str, str, list[float | None], int]] = []

    def scaled(values: Sequence[float | None], scale: float) -> list[float | None]:
        return [None if v is None else scale * v for v in values]

    top1 = [cmp.value(i, "linear_top1") for i in range(n_runs)]
    if any(v is not None for v in top1):
        quantities.append(
            (
                "accuracy_vs_vrn.svg",
                "linear-probe top-1, test split (%)",
                scaled(top1, 100),
                4,
            )
        )
    val = [validation_top1(r.probes) for r in cmp.results]
    if any(v is not None for v in val):
        quantities.append(
            (
                "validation_accuracy_vs_vrn.svg",
                "linear-probe top-1, validation split (%)",
                scaled(val, 100),
                4,
            )
        )
    if layer is not None:
        var = [
            cmp.value(i, _col(layer, f"{PairType.CROSS_VIEW_NEGATIVE.value}_var"))
            for i in range(n_runs)
        ]
        pos = [cmp.value(i, _col(layer, f"{PairType.POSITIVE.value}_mean")) for i in range(n_runs)]
        quantities.append(
            (
                "variance_vs_vrn.svg",
                f"Var of cross-view negative similarity ('{layer}')",
                var,
                4,
            )
        )
        quantities.append(
            (
                "positive_mean_vs_vrn.svg",
                f"positive mean similarity ('{layer}')",
                pos,
                4,
            )
        )
    if not quantities:
        return []
    collected = [(q, _interval_series(cmp.configs, q[2])) for q in quantities]
    settings = [s.label for s in collected[0][1]]
    replicated = any(k > 1 for _, series in collected for s in series for k in s.n)
    interval_words = (
        "mean over seeds [95 % Student-t interval] (n seeds)" if replicated else "one run each"
    )
    blocks: list = [Heading(2, "VRN weight study")]
    rows: list[list[Cell]] = []
    for label in settings:
        for w in weights:
            row: list[Cell] = [label, fmt(w)]
            for (_, _, _, digits), series in collected:
                match = next((s for s in series if s.label == label), None)
                row.append(MISSING if match is None else _interval_cell(match, w, digits))
            rows.append(row)
    blocks.append(
        Table(
            columns=["setting", "VRN λ", *[q[1] for q, _ in collected]],
            rows=rows,
            caption=f"Against the VRN weight λ (0: no VRN), {interval_words}. The validation "
            "split is carved from the train split (analyze --validation-fraction): the split "
            "λ is chosen on; the test split is the one a claim about a tuned λ is tested on.",
        )
    )
    positive = [w for w in weights if w > 0]
    for (filename, ylabel, _, _), series in collected:
        blocks.append(
            Figure(
                filename=filename,
                svg=figures.metric_vs(
                    series,
                    xlabel="VRN weight λ (symmetric log; 0 = no VRN)",
                    ylabel=ylabel,
                    title=f"{ylabel} vs VRN weight λ",
                    log_base=None,
                    symlog_below=min(positive) if positive else None,
                ),
                alt=f"{ylabel} versus the VRN weight",
                caption=f"{ylabel} against the VRN weight λ, one line per setting"
                + (
                    "; points: mean over seeds, bars: its 95 % Student-t interval."
                    if replicated
                    else "."
                ),
            )
        )
    return blocks + tuning_blocks(cmp.configs, cmp.results)


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
    study = _study_blocks(cmp, primary_layer(cmp.runs))
    option_study = _vrn_study_blocks(cmp, primary_layer(cmp.runs))
    option_study += _option_study_blocks(cmp, primary_layer(cmp.runs))
    # the figures that carry a finding sit next to it; the study sections keep the others
    carried = {f.figure for f in cmp.findings if f.figure is not None}
    beside = [b for b in (*study, *option_study) if isinstance(b, Figure) and b.filename in carried]
    study = [b for b in study if not (isinstance(b, Figure) and b.filename in carried)]
    option_study = [
        b for b in option_study if not (isinstance(b, Figure) and b.filename in carried)
    ]
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
    blocks += study
    blocks += option_study
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
