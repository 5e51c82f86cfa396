"""The one frame of a comparison (:class:`Comparison`): the runs labelled, ordered and grouped
into replicates (:mod:`cl_diag.report.runs`), their findings, and

Every number comes from one pandas frame, :attr:`Comparison.frame`: one row per run
(display order), columns = the run's label, name, n_ref, threshold and mode, its config
options (``config:<key>``, :attr:`cl_diag.runconfig.RunConfig.options`), its per-layer
metrics (``<layer>/<metric>``) and its probe metrics (the keys of
:data:`cl_diag.report.metrics.PROBE_METRICS` and ``retrieval_<layer>_recall_at_<k>``). The tables,
the differences from the baseline, the over-seed mean ± std, comparison.csv and
comparison_by_seed.csv are read from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property

import numpy as np
import pandas as pd

from cl_diag.io.plans import PlanRecord
from cl_diag.measurement.stats import mean_sd
from cl_diag.report.claims import Finding, RunData, run_findings
from cl_diag.report.document import (
    fmt,
)
from cl_diag.report.metrics import (
    COLLAPSE_METRICS,
    GEOMETRY_METRICS,
    INSTANCE_COLLAPSE_METRICS,
    PAIR_METRICS,
    PROBE_METRICS,
    Metric,
    retrieval_metric,
)
from cl_diag.report.runs import (
    Run,
    SeedGroup,
    group_label,
    groups_of,
    ordered,
    run_labels,
    unique_labels,
)
from cl_diag.result import RETRIEVAL_KS, Histogram, Result
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
        given = dict(labels or {})  # run name -> the label the user gave it (--label)
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
