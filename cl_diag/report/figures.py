"""Figures as SVG bytes, byte-reproducible: same data, same bytes. Matplotlib without pyplot,
under its built-in defaults plus ``_RC`` (a user's matplotlibrc cannot leak in), text as paths
(the DejaVu glyphs shipped with Matplotlib), a fixed SVG id salt and no date metadata. The
data are result.json's stored histograms and statistics; nothing is recomputed.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from cl_diag.result import Histogram, Projection, Spectrum
from cl_diag.vocabulary import NEGATIVE_TYPES, PAIR_TYPES, PairType

if TYPE_CHECKING:  # matplotlib >= 3.8 names its rcParams keys; only the type checker needs it
    from matplotlib.typing import RcKeyType

_RC: dict[RcKeyType, Any] = {
    "svg.hashsalt": "cl-diag",  # ids derive from content + salt instead of a random uuid
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100.0,
    "savefig.dpi": 100.0,
    "path.simplify": True,
    "legend.fontsize": 8.0,
    "legend.framealpha": 0.85,
}
# "Creator" is cl-diag's mark on its figures (cl_diag.io.output.carries_mark); no date, for
# the same bytes on every run
_SVG_METADATA = {"Date": None, "Creator": "cl-diag"}

#: at most this many bars per distribution; finer stored histograms are summed in groups
MAX_DISPLAY_BINS = 200

COLORS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
LINESTYLES = ("-", "--", ":", "-.")
PAIR_COLORS = {
    PairType.POSITIVE: "#2ca02c",
    PairType.CROSS_VIEW_NEGATIVE: "#1f77b4",
    PairType.WITHIN_VIEW_NEGATIVE: "#d62728",
}
#: the legend of each pair type: its label and the pairs, in the figures' short notation
PAIR_NAMES = {
    kind: f"{kind.label} {pairs}"
    for kind, pairs in (
        (PairType.POSITIVE, "(u_i, v_i)"),
        (PairType.CROSS_VIEW_NEGATIVE, "(u_i, v_j), i ≠ j"),
        (PairType.WITHIN_VIEW_NEGATIVE, "(u_i, u_j), (v_i, v_j), i < j"),
    )
}


@contextmanager
def fixed_style() -> Iterator[None]:
    """Every figure of the reports (and the phase diagrams) is drawn under matplotlib's
    defaults and the reports' own settings alone, whatever the caller's rcParams hold: the
    same setting gives the same bytes."""
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(_RC)
        yield


def _panels(
    width: float,
    rows: int,
    *,
    panel_height: float,
    gap: float,
    top: float = 0.35,
    bottom: float = 0.5,
    right: float = 0.2,
) -> tuple[Figure, list]:
    """A figure of ``rows`` stacked axes sharing x, with fixed margins in inches.

    Fixed margins instead of a layout engine: the layout engines measure every text
    extent before drawing, which made each figure several times slower to render.
    """
    height = top + bottom + rows * panel_height + (rows - 1) * gap
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    fig.subplots_adjust(
        left=0.8 / width,
        right=1.0 - right / width,
        top=1.0 - top / height,
        bottom=bottom / height,
        hspace=gap / panel_height,
    )
    return fig, list(axes)


def to_svg(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata=_SVG_METADATA)
    return buf.getvalue()


@dataclass(frozen=True)
class Density:
    """A stored histogram as a density over its bin edges (area 1), for plotting."""

    edges: np.ndarray
    density: np.ndarray

    @classmethod
    def from_histogram(cls, histogram: Histogram | dict | None) -> Density | None:
        """The density of a stored histogram (or its JSON form); None when it has no counts."""
        if isinstance(histogram, dict):
            histogram = Histogram.from_dict(histogram)
        if not isinstance(histogram, Histogram):
            return None
        counts = np.asarray(histogram.counts, dtype=np.float64)
        lo, hi = (float(x) for x in histogram.range)
        if counts.size == 0 or counts.sum() <= 0 or not hi > lo:
            return None
        edges = np.linspace(lo, hi, counts.size + 1)
        if counts.size > MAX_DISPLAY_BINS:
            group = -(-counts.size // MAX_DISPLAY_BINS)
            starts = np.arange(0, counts.size, group)
            counts = np.add.reduceat(counts, starts)
            edges = np.append(edges[starts], edges[-1])
        density = counts / (counts.sum() * np.diff(edges))
        return cls(edges=edges, density=density)


#: inches right of the axes for a legend beside them (the longest pair type's name fits)
_LEGEND_WIDTH = 3.3


def _legend_outside(ax) -> None:
    """The legend right of the axes, its top at theirs: it never covers the data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def _threshold_lines(ax, thresholds: Sequence[tuple[int, float]], *, label: bool) -> None:
    for k, (n_ref, delta) in enumerate(thresholds):
        ax.axvline(
            delta,
            color="black",
            linestyle=LINESTYLES[k % len(LINESTYLES)] if len(thresholds) > 1 else "--",
            linewidth=1.1,
            # above the curves: a distribution centred on δ (VRN) must not hide the line
            zorder=4,
            label=f"δ = {delta:.3g} (n_ref = {n_ref})" if label else None,
        )


def similarity_distributions(
    histograms: Mapping[str, Histogram], thresholds: Sequence[tuple[int, float]], layer: str
) -> bytes | None:
    """Three stacked panels (positive, cross-view, within-view): densities from the stored
    histograms (pair type -> histogram)."""
    densities = {k: d for k in PAIR_NAMES if (d := Density.from_histogram(histograms.get(k)))}
    kinds = list(densities)
    if not kinds:
        return None
    with fixed_style():
        # each panel's legend sits right of its axes, where it covers neither bars nor δ line
        fig, axes = _panels(9.0, len(kinds), panel_height=1.6, gap=0.15, right=_LEGEND_WIDTH)
        for ax, kind in zip(axes, kinds, strict=True):
            dens = densities[kind]
            ax.stairs(dens.density, dens.edges, fill=True, alpha=0.35, color=PAIR_COLORS[kind])
            ax.stairs(
                dens.density,
                dens.edges,
                color=PAIR_COLORS[kind],
                linewidth=1.0,
                label=PAIR_NAMES[kind],
            )
            _threshold_lines(ax, thresholds, label=True)
            ax.set_ylabel("density")
            _legend_outside(ax)
        axes[0].set_title(f"layer '{layer}': cosine similarity distributions")
        axes[-1].set_xlabel("cosine similarity")
        axes[-1].set_xlim(-1.0, 1.0)
        return to_svg(fig)


def _column(rows: Sequence[Mapping[str, Any]], name: str) -> tuple[np.ndarray, np.ndarray]:
    """The steps and values of the rows that have a finite ``name``."""
    points = [
        (float(row["step"]), float(row[name]))
        for row in rows
        if isinstance(row.get(name), (int, float)) and np.isfinite(row[name])
    ]
    return np.array([p[0] for p in points]), np.array([p[1] for p in points])


def training_curves(
    rows: Sequence[Mapping[str, Any]], *, title: str = "training curves (metrics.csv)"
) -> bytes | None:
    """The metrics rows of ``cl-diag train`` (metrics.csv) against the step, one panel each: the
    loss and its contrastive term, the VRN term, the in-batch cosine-similarity means by pair
    type (the Monitor's), and the online kNN top-1 (``--online-knn``) when logged. A panel
    whose columns no row has is left out; None when no row has a step."""
    panels: list[tuple[str, list[tuple[str, str, str]]]] = [
        ("loss", [("loss", "loss", COLORS[0]), ("contrastive", "contrastive term", COLORS[3])]),
        ("VRN term", [("vrn", "mean (s − δ)^p, cross-view negatives", COLORS[4])]),
        (
            "mean cosine similarity",
            [(f"{kind.short}_mean", PAIR_NAMES[kind], PAIR_COLORS[kind]) for kind in PAIR_TYPES],
        ),
        ("online kNN top-1", [("knn_top1", "k = 20, test split", COLORS[5])]),
    ]
    shown = [(name, [c for c in curves if _column(rows, c[0])[0].size]) for name, curves in panels]
    shown = [(name, curves) for name, curves in shown if curves]
    if not shown:
        return None
    with fixed_style():
        fig, axes = _panels(9.0, len(shown), panel_height=1.5, gap=0.2, right=_LEGEND_WIDTH)
        for ax, (panel, curves) in zip(axes, shown, strict=True):
            for column, label, color in curves:
                steps, values = _column(rows, column)
                sparse = steps.size <= 40  # a few rows (an epoch each, or the kNN): show points
                ax.plot(
                    steps,
                    values,
                    color=color,
                    linewidth=1.2,
                    marker="o" if sparse else None,
                    markersize=3,
                    label=label,
                )
            ax.set_ylabel(panel)
            _legend_outside(ax)
        axes[0].set_title(title)
        axes[-1].set_xlabel("optimiser step")
        return to_svg(fig)


def spectrum(spectra: Spectrum, layer: str) -> bytes | None:
    """Eigenvalues of each view's embedding covariance, descending, on a log axis."""
    views = (("u", spectra.u), ("v", spectra.v))
    series = {view: np.asarray(vals, dtype=np.float64) for view, vals in views if len(vals)}
    if not series:
        return None
    with fixed_style():
        fig, (ax,) = _panels(7.0, 1, panel_height=2.2, gap=0.0, right=1.0)
        for k, (view, vals) in enumerate(series.items()):
            idx = np.arange(1, vals.size + 1)
            positive = vals > 0  # a log axis cannot show zero eigenvalues (rank deficiency)
            ax.plot(
                idx[positive],
                vals[positive],
                color=COLORS[k % len(COLORS)],
                linewidth=1.2,
                label=f"view {view}",
            )
        ax.set_yscale("log")
        ax.set_xlabel("index (descending)")
        ax.set_ylabel("eigenvalue")
        ax.set_title(f"layer '{layer}': covariance spectrum")
        _legend_outside(ax)
        return to_svg(fig)


def negative_overlay(
    runs: Sequence[tuple[str, Mapping[str, Histogram]]],
    thresholds: Sequence[tuple[int, float]],
    layer: str,
) -> bytes | None:
    """Cross-view and within-view negative densities of every run (label, pair type ->
    histogram), overlaid, with the threshold line(s)."""
    present = [k for k in NEGATIVE_TYPES if any(Density.from_histogram(p.get(k)) for _, p in runs)]
    if not present:
        return None
    with fixed_style():
        # the legend sits right of the axes: many runs would hide the curves
        fig, axes = _panels(9.5, len(present), panel_height=2.4, gap=0.45, right=3.1)
        for ax, kind in zip(axes, present, strict=True):
            for k, (label, histograms) in enumerate(runs):
                dens = Density.from_histogram(histograms.get(kind))
                if dens is None:
                    continue
                ax.stairs(
                    dens.density,
                    dens.edges,
                    color=COLORS[k % len(COLORS)],
                    linestyle=LINESTYLES[(k // len(COLORS)) % len(LINESTYLES)],
                    linewidth=1.1,
                    label=label,
                )
            _threshold_lines(ax, thresholds, label=True)
            ax.set_title(f"layer '{layer}': {PAIR_NAMES[kind]}")
            ax.set_ylabel("density")
            _legend_outside(ax)
        axes[-1].set_xlabel("cosine similarity")
        axes[-1].set_xlim(-1.0, 1.0)
        return to_svg(fig)


@dataclass(frozen=True)
class Series:
    """One line of a study figure; ``err`` (optional) the sd of each point over its ``n``
    replicates (seeds), drawn as error bars."""

    label: str
    x: list[float]
    y: list[float]
    err: list[float] = field(default_factory=list)
    n: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        # a plain series is one replicate per point
        if not self.err:
            object.__setattr__(self, "err", [0.0] * len(self.x))
        if not self.n:
            object.__setattr__(self, "n", [1] * len(self.x))


def _data_ticks(ax, series: Sequence[Series]) -> None:
    # on a log axis, label the measured x values themselves (batch sizes, temperatures)
    xs = sorted({float(x) for s in series for x in s.x})
    if xs:
        ax.set_xticks(xs, labels=[f"{x:g}" for x in xs])
        ax.xaxis.set_minor_locator(NullLocator())


def _plot_series(ax, series: Sequence[Series]) -> None:
    for k, s in enumerate(series):
        order = np.argsort(np.asarray(s.x, dtype=np.float64), kind="stable")
        x = np.asarray(s.x, dtype=np.float64)[order]
        y = np.asarray(s.y, dtype=np.float64)[order]
        color = COLORS[k % len(COLORS)]
        ax.plot(
            x,
            y,
            marker="o",
            markersize=4,
            color=color,
            linestyle=LINESTYLES[(k // len(COLORS)) % len(LINESTYLES)],
            linewidth=1.2,
            label=s.label,
        )
        err = np.asarray(s.err, dtype=np.float64)[order]
        if (err > 0).any():
            # +-1 sd over seeds; on a log axis the lower bar stops above 0
            lower = np.minimum(err, np.where(y > 0, y * 0.999, err))
            ax.errorbar(
                x, y, yerr=[lower, err], fmt="none", ecolor=color, elinewidth=1.0, capsize=3
            )


def variance_vs_batch(
    series: Sequence[Series],
    band: tuple[Sequence[float], Sequence[float], Sequence[float]] | None,
    band_label: str,
    random_reference: Sequence[tuple[int, float]],
    layer: str,
) -> bytes:
    """Table 1 view: Var of negative similarity vs batch size, Thm 5.5 band shaded, 1/d dotted."""
    with fixed_style():
        fig, (ax,) = _panels(9.5, 1, panel_height=3.2, gap=0.0, right=3.1)
        if band is not None:
            ms, lo, hi = band
            ax.fill_between(ms, lo, hi, color="#999999", alpha=0.25, linewidth=0, label=band_label)
            ax.plot(ms, hi, color="#777777", linewidth=0.8)
            ax.plot(ms, lo, color="#777777", linewidth=0.8)
        for d, value in random_reference:
            ax.axhline(
                value,
                color="black",
                linestyle=":",
                linewidth=1.0,
                label=f"1/d = {value:.3g} (random, d = {d})",
            )
        _plot_series(ax, series)
        ax.set_xscale("log", base=2)
        _data_ticks(ax, series)
        ax.set_yscale("log")
        ax.set_xlabel("training batch size m")
        ax.set_ylabel("Var of cross-view negative similarity")
        ax.set_title(f"layer '{layer}': negative-similarity variance vs batch size")
        _legend_outside(ax)
        return to_svg(fig)


def metric_vs(
    series: Sequence[Series],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    log_base: float | None,
    markers: Sequence[tuple[float, str]] = (),
    symlog_below: float | None = None,
    predicted: Sequence[Series] = (),
) -> bytes:
    """Fig. 3 / Fig. 4 views: one line per series (e.g. with and without VRN); ``markers``
    (x, label) are drawn as dashed vertical lines (a theory's threshold on the x option);
    ``predicted``: a theory's curves, dashed without points, the k-th in the colour of the k-th
    measured series.
    ``symlog_below``: a symmetric-log x axis, linear below this value and logarithmic above
    it (a VRN weight grid that starts at 0), ticked at the measured values."""
    with fixed_style():
        fig, (ax,) = _panels(9.5, 1, panel_height=2.9, gap=0.0, right=3.1)
        for k, (x, label) in enumerate(markers):
            ax.axvline(
                x, color="#555555", linestyle=LINESTYLES[1 + k % 3], linewidth=1.0, label=label
            )
        for k, curve in enumerate(predicted):
            ax.plot(
                curve.x,
                curve.y,
                color=COLORS[k % len(COLORS)],
                linestyle="--",
                linewidth=1.0,
                alpha=0.8,
                label=curve.label,
            )
        _plot_series(ax, series)
        if log_base is not None:
            ax.set_xscale("log", base=log_base)
            _data_ticks(ax, series)
        elif symlog_below is not None:
            ax.set_xscale("symlog", linthresh=symlog_below, linscale=0.5)
            _data_ticks(ax, series)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        _legend_outside(ax)
        return to_svg(fig)


def selection_shares(
    candidates: Sequence[str],
    shares: Mapping[str, Sequence[float]],
    *,
    title: str,
    stable_share: float,
) -> bytes:
    """Grouped bars: for each setting (one colour) the share of resamples that choose each
    candidate (x, in the given order), with a dashed line at ``stable_share``."""
    with fixed_style():
        fig, (ax,) = _panels(9.5, 1, panel_height=2.6, gap=0.0, right=3.1)
        x = np.arange(len(candidates), dtype=np.float64)
        width = 0.8 / max(len(shares), 1)
        for k, (label, values) in enumerate(shares.items()):
            offset = (k - (len(shares) - 1) / 2) * width
            ax.bar(x + offset, values, width, color=COLORS[k % len(COLORS)], label=label)
        ax.axhline(
            stable_share, color="#555555", linestyle="--", linewidth=1.0, label="stable choice"
        )
        ax.set_xticks(x, list(candidates))
        ax.set_ylim(0.0, 1.0)
        ax.set_xlabel("candidate chosen")
        ax.set_ylabel("share of resamples")
        ax.set_title(title)
        _legend_outside(ax)
        return to_svg(fig)


#: a 2-D view names its classes in a legend up to this many; more are coloured without one
MAX_LEGEND_CLASSES = 20
#: the marker shapes that tell classes apart beyond the ten colours
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def embedding_2d(projections: Mapping[str, Projection], layer: str) -> bytes | None:
    """One scatter per method (PCA, then UMAP when stored) of a layer's 2-D views, each
    point an instance of the sample, coloured (and beyond ten classes, shaped) by class."""
    methods = [m for m in ("pca", "umap") if m in projections and projections[m].x]
    if not methods:
        return None
    classes = sorted({c for m in methods for c in (projections[m].classes or [])})  # codes 0..C-1
    legend = 0 < len(classes) <= MAX_LEGEND_CLASSES
    with fixed_style():
        side = 3.6
        right = 1.3 if legend else 0.25
        width = 0.8 + len(methods) * side + (len(methods) - 1) * 0.6 + right
        height = side + 0.85
        fig = Figure(figsize=(width, height))
        axes = fig.subplots(1, len(methods), squeeze=False)[0]
        fig.subplots_adjust(
            left=0.8 / width,
            right=1.0 - right / width,
            top=1.0 - 0.35 / height,
            bottom=0.5 / height,
            wspace=0.6 / side,
        )
        for ax, method in zip(axes, methods, strict=True):
            view = projections[method]
            x = np.asarray(view.x, dtype=np.float64)
            y = np.asarray(view.y, dtype=np.float64)
            codes = np.asarray(view.classes) if view.classes else None
            if codes is None:
                ax.scatter(x, y, s=7, color=COLORS[0], alpha=0.7, linewidths=0)
            else:
                for c in classes:
                    mask = codes == c
                    ax.scatter(
                        x[mask],
                        y[mask],
                        s=7,
                        color=COLORS[c % len(COLORS)],
                        marker=_MARKERS[(c // len(COLORS)) % len(_MARKERS)],
                        alpha=0.75,
                        linewidths=0,
                        label=f"class {c}",
                    )
            if method == "pca":
                shares = view.explained or [0.0, 0.0]
                ax.set_xlabel(f"PC 1 ({100 * shares[0]:.1f} % of variance)")
                ax.set_ylabel(f"PC 2 ({100 * shares[1]:.1f} % of variance)")
            else:
                ax.set_xlabel("UMAP 1")
                ax.set_ylabel("UMAP 2")
            ax.set_title(f"layer '{layer}': {method.upper()}, {len(x)} instances")
        if legend:
            _legend_outside(axes[-1])
        return to_svg(fig)
