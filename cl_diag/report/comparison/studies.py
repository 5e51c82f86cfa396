"""The study sections of a comparison (:data:`STUDIES`): the batch-size study (with the CCEM
optimum of the sigmoid loss), the VRN weight study and a metric against any other swept option.
The batch-size view is the layout of the paper's Table 1 and Fig. 4 (Lee et al., ICML 2025)
with the Theorem 5.5 band (Eq. 11), Var[s_neg] in [(n-m)/((m-1)(n-1)^2), n(n-m)/((m-1)(n-1)^2)],
and the 1/d variance of random unit vectors (paper-notes 11.4); the temperature view is Fig. 3's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cl_diag.measurement.stats import t_half_width
from cl_diag.report import figures
from cl_diag.report.claims import ccem_full_batch
from cl_diag.report.comparison.frame import SEED_STD_WORDS, Comparison, _col, _number, _thresholds
from cl_diag.report.comparison.tables import _cell
from cl_diag.report.document import (
    MISSING,
    Cell,
    Figure,
    Heading,
    Note,
    Table,
    fmt,
)
from cl_diag.report.metrics import (
    COLLAPSE_METRICS,
    INSTANCE_COLLAPSE_METRICS,
    PROBE_METRICS,
    Metric,
)
from cl_diag.report.probe_section import validation_top1
from cl_diag.report.runs import (
    SEED_KEY,
    config_labels,
    natural_key,
)
from cl_diag.report.tuning_section import tuning_blocks
from cl_diag.result import Result
from cl_diag.runconfig import RunConfig
from cl_diag.vocabulary import PairType

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


def batch_size_study(cmp: Comparison, layer: str | None) -> list:
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
                _top1_figure(
                    acc_study,
                    "batch",
                    "training batch size m",
                    "batch size",
                    log_base=2,
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
                _top1_figure(
                    acc_study,
                    "temperature",
                    "temperature t",
                    "temperature",
                    log_base=10,
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


def _top1_figure(
    study: _Study, name: str, xlabel: str, what: str, *, log_base: int, caption: str
) -> Figure:
    """The linear-probe top-1 accuracy against a swept option (``accuracy_vs_<name>.svg``):
    the views of the paper's Fig. 4 (batch size) and Fig. 3 (temperature)."""
    return Figure(
        filename=f"accuracy_vs_{name}.svg",
        svg=figures.metric_vs(
            study.series,
            xlabel=xlabel,
            ylabel="linear-probe top-1 (%)",
            title=f"linear-probe accuracy vs {what}",
            log_base=log_base,
        ),
        alt=f"Linear-probe top-1 accuracy versus {what}",
        caption=caption,
    )


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


def option_studies(cmp: Comparison, layer: str | None) -> list:
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


def vrn_weight_study(cmp: Comparison, layer: str | None) -> list:
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


#: the study sections of a comparison, in report order: each takes the comparison and the layer
#: the loss sees and returns its blocks (none when the runs do not form that study). Adding a
#: study is one function and one entry here.
STUDIES: tuple[Callable[[Comparison, str | None], list], ...] = (
    batch_size_study,
    vrn_weight_study,
    option_studies,
)
