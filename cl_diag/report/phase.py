"""Phase diagrams of the sources' theory, with a setting's point marked (``cl-diag theory``, and
the theory section of a sigmoid or supcl run's report): where the optimum changes kind as the
hyper-parameters move.

* :func:`ssem_phase`: the (tau, alpha) plane of the ``supcl`` loss on a balanced batch of m
  classes x n instances x p views, with the collapse threshold alpha_c(tau) of both published
  variants and the SSEM's region alpha_s(tau) (:mod:`cl_diag.measurement.ssem`);
* :func:`sigmoid_phase`: the (t, b) plane of the cross-view-only sigmoid loss over N pairs, with
  the Eq. 10 boundary (ETF above it) and the antipodal one, the CCEM's three regimes between
  (:mod:`cl_diag.measurement.advice`);
* :func:`band_phase`: the Thm 5.5 band of the negatives' variance against the batch size m for
  n instances (:func:`cl_diag.measurement.theory.variance_band`).

Each returns the figure as SVG bytes (byte-reproducible, as the reports' figures:
:mod:`cl_diag.report.figures`) or PNG bytes (``fmt="png"``). Every curve is the closed form the
analyses use, evaluated on a grid.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from cl_diag.measurement.ssem import collapse_threshold, view_split_threshold
from cl_diag.measurement.theory import (
    antipodal_bias_boundary,
    delta,
    eq10_bias_boundary,
    variance_band,
)
from cl_diag.report.figures import COLORS, fixed_style, to_svg

__all__ = ["band_phase", "sigmoid_phase", "ssem_phase"]

#: PNG files carry no date either (the same bytes on every run)
_PNG_METADATA = {"Software": "cl-diag"}


def _encoded(fig: Figure, fmt: str) -> bytes:
    if fmt == "svg":
        return to_svg(fig)
    if fmt != "png":
        raise ValueError(f"fmt must be 'svg' or 'png', got {fmt!r}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, metadata=_PNG_METADATA)
    return buf.getvalue()


def _figure() -> tuple[Figure, Axes]:
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.1, right=0.7, top=0.9, bottom=0.13)
    return fig, ax


def _point(ax: Axes, x: float, y: float, label: str) -> None:
    ax.plot([x], [y], marker="*", markersize=13, color="black", linestyle="none", label=label)


def ssem_phase(tau: float, alpha: float, m: int, n: int, p: int = 2, *, fmt: str = "svg") -> bytes:
    """The (tau, alpha) plane of the ``supcl`` loss on m classes x n instances x p views:
    below alpha_c(tau) (variant B, solid; variant A dashed) the optimum collapses every class,
    above it the SSEM keeps instances apart; below alpha_s(tau) (dotted) the SSEM is not the
    optimum (variant B parts the views of an instance). The setting's point is starred."""
    lo, hi = min(0.03, tau / 2), max(3.0, tau * 2)
    taus = np.geomspace(lo, hi, 240)
    a_b = np.array([collapse_threshold(t, m, n, p) for t in taus])
    a_a = np.array([collapse_threshold(t, m, n, p, variant="A") for t in taus])
    a_s = np.array([view_split_threshold(t, m, n, p) for t in taus])
    with fixed_style():
        fig, ax = _figure()
        floor = np.clip(a_s, 0, 1)
        ax.fill_between(taus, floor, a_b, color=COLORS[1], alpha=0.12, label="class collapse")
        ax.fill_between(
            taus, 0, floor, color=COLORS[7], alpha=0.2, linewidth=0, label="views part (no SSEM)"
        )
        ax.fill_between(taus, a_b, 1, color=COLORS[2], alpha=0.1, label="instances apart")
        ax.plot(taus, a_b, color=COLORS[1], linewidth=1.5, label="α_c, variant B (supcl)")
        ax.plot(taus, a_a, color=COLORS[1], linewidth=1.2, linestyle="--", label="α_c, variant A")
        ax.plot(
            taus,
            floor,
            color=COLORS[7],
            linewidth=1.2,
            linestyle=":",
            label="α_s: below, views part (B)",
        )
        _point(ax, tau, alpha, f"this setting (τ = {tau:g}, α = {alpha:g})")
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(0, 1)
        ax.set_xlabel("temperature τ")
        ax.set_ylabel("self-supervised share α")
        ax.set_title(f"supcl optimum, {m} classes × {n} instances × {p} views (SSEM)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        return _encoded(fig, fmt)


def sigmoid_phase(t: float, b: float, n: int, *, fmt: str = "svg") -> bytes:
    """The (t, b) plane of the cross-view-only sigmoid loss over N = n pairs (b in the ICML
    paper's sign convention, b = -b_SigLIP): above the Eq. 10 boundary b*(t) the optimum is
    the simplex ETF; below it the negatives are over-separated, in the CCEM's interior regime
    down to the antipodal boundary log((N-2)/2) - t and antipodal below. The setting's point
    is starred."""
    lo, hi = min(0.1, t / 2), max(40.0, t * 2)
    ts = np.geomspace(lo, hi, 240)
    b_eq10 = np.array([eq10_bias_boundary(x, n) for x in ts])
    b_anti = np.array([antipodal_bias_boundary(x, n) for x in ts])
    top = max(float(b_eq10.max()) + 2.0, b + 2.0, 4.0)
    bottom = min(float(b_anti[-1]), b - 2.0, -10.0)
    with fixed_style():
        fig, ax = _figure()
        ax.fill_between(ts, b_eq10, top, color=COLORS[2], alpha=0.12, label="ETF (Eq. 10 fails)")
        ax.fill_between(
            ts, b_anti, b_eq10, color=COLORS[3], alpha=0.15, label="over-separated, interior x*"
        )
        ax.fill_between(ts, bottom, b_anti, color=COLORS[1], alpha=0.12, label="antipodal")
        ax.plot(ts, b_eq10, color=COLORS[2], linewidth=1.5, label="Eq. 10 boundary b*(t)")
        ax.plot(
            ts, b_anti, color=COLORS[1], linewidth=1.2, linestyle="--", label="t + b = log((N−2)/2)"
        )
        _point(ax, t, b, f"this setting (t = {t:g}, b = {b:g})")
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(bottom, top)
        ax.set_xlabel("scale t (temperature)")
        ax.set_ylabel("bias b (= −b_SigLIP)")
        ax.set_title(f"cross-view-only sigmoid optimum, N = {n} pairs (δ = {delta(n):.3g})")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        return _encoded(fig, fmt)


def band_phase(n: int, m: int, *, fmt: str = "svg") -> bytes:
    """The Thm 5.5 band (Eq. 11) of the negatives' variance at the fixed-batch optimum against
    the batch size, for n instances (log-log), with the setting's m starred at the band's
    upper end; m = n is the full-batch ETF (variance 0, off the log axis)."""
    sizes = np.unique(np.geomspace(2, max(n - 1, 2), 200).round().astype(int))
    sizes = sizes[(sizes >= 2) & (sizes < n)]
    bands = np.array([variance_band(n, int(k)) for k in sizes])
    with fixed_style():
        fig, ax = _figure()
        ax.fill_between(sizes, bands[:, 0], bands[:, 1], color=COLORS[0], alpha=0.15)
        ax.plot(
            sizes,
            bands[:, 1],
            color=COLORS[0],
            linewidth=1.5,
            label="upper end (Eq. 11)",
        )
        ax.plot(
            sizes,
            bands[:, 0],
            color=COLORS[0],
            linewidth=1.2,
            linestyle="--",
            label="lower end (Eq. 11)",
        )
        if 2 <= m < n:
            lo_m, hi_m = variance_band(n, m)
            ax.plot([m, m], [lo_m, hi_m], color="black", linewidth=1.0)
            _point(ax, m, hi_m, f"this batch size (m = {m})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("batch size m")
        ax.set_ylabel("variance of negative similarities")
        ax.set_title(f"Thm 5.5 band at the fixed-batch optimum, n = {n} instances")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        return _encoded(fig, fmt)
