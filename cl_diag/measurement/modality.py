"""Two views from two encoders: the within-view negatives of each view and the modality gap.

When the views come from different encoders (an image and a text tower, Radford et al. 2021),
each may sit in its own cone of the sphere (Liang et al., "Mind the Gap", NeurIPS 2022). On
unit rows u_i, v_i this module measures what the pooled statistics then hide:
:func:`within_view_by_view` (the within-view negatives of each view on its own) and
:func:`modality_gap`: the centroids mu_1, mu_2, their distance ||mu_1 - mu_2|| (Liang et
al.'s gap), its share of the pooled variance, and the cross-view statistics before and after
removing it.

The share: the 2n pooled rows have mean mu = (mu_1 + mu_2)/2 and total variance 1 - ||mu||^2,
which splits (law of total variance) into the views' own variances and the between-view part
(1/2) ||mu_1 - mu||^2 + (1/2) ||mu_2 - mu||^2 = ||mu_1 - mu_2||^2 / 4, so
``variance_share`` = (||mu_1 - mu_2||^2 / 4) / (1 - ||mu||^2) in [0, 1] (an R^2: 0 when the
centroids coincide, 1 when each view is a point). Removing the gap centres each view on its
own centroid and re-normalises the rows. Every number is exact over all pairs, in closed form
from float64 sums (:func:`cl_diag.measurement.moments.view_sums`, O(n d^2)).
"""

from __future__ import annotations

import math

import torch

from cl_diag.measurement.inputs import UnitViews
from cl_diag.measurement.moments import Moments, view_sums
from cl_diag.result import CrossViewMoments, ModalityGap, ViewMoments, ViewSplit, ViewValues

__all__ = ["modality_gap", "within_view_by_view"]


def _view_moments(moments: Moments) -> ViewMoments:
    var = moments.var
    return ViewMoments(
        count=moments.count,
        mean=moments.mean,
        var=var,
        std=None if var is None else math.sqrt(var),
    )


def within_view_by_view(views: UnitViews, *, workers: int = 1) -> ViewSplit:
    """The within-view negatives of each view, exact over every pair: view 1's (u_i, u_j) and
    view 2's (v_i, v_j), i < j (module docstring). ``workers``: CPU threads (the bits do not
    depend on it)."""
    n = views.n
    sums = view_sums([views.u, views.v], workers=workers)
    count = n * (n - 1) // 2
    parts = []
    for first, gram, (q, qq) in zip(sums.firsts, sums.grams, sums.within, strict=True):
        total = (float(first @ first) - q) / 2
        squares = (float((gram * gram).sum()) - qq) / 2
        parts.append(_view_moments(Moments(count, total, squares, n)))
    return ViewSplit(u=parts[0], v=parts[1])


def _cross_view(u: torch.Tensor, v: torch.Tensor, *, workers: int) -> CrossViewMoments:
    """Positive and cross-view negative mean and variance of unit rows u, v (closed form)."""
    n = u.shape[0]
    sums = view_sums([u, v], workers=workers)
    (p, pp) = sums.cross[0]
    positives = Moments(n, p, pp, n)
    a1, a2 = sums.firsts
    g1, g2 = sums.grams
    negatives = Moments(n * (n - 1), float(a1 @ a2) - p, float((g1 * g2).sum()) - pp, n)
    return CrossViewMoments(
        positive_mean=positives.mean,
        positive_var=positives.var,
        negative_mean=negatives.mean,
        negative_var=negatives.var,
    )


def _centred(z: torch.Tensor, centroid: torch.Tensor) -> torch.Tensor | None:
    """Rows of ``z`` minus ``centroid`` (float64), re-normalised and rounded to float32 as
    every measured row is; None when a centred row is zero."""
    x = z.to(torch.float64) - centroid
    norms = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    if bool((norms == 0).any()):
        return None
    return (x / norms).to(torch.float32)


def modality_gap(views: UnitViews, *, workers: int = 1) -> ModalityGap:
    """The modality gap between the two views' centroids, its share of the pooled variance and
    the cross-view statistics with the gap removed (module docstring has every formula)."""
    n = views.n
    with torch.inference_mode():
        sums = view_sums([views.u, views.v], workers=workers)
        mu1, mu2 = (first / n for first in sums.firsts)
        gap = mu1 - mu2
        distance2 = float(gap @ gap)
        middle = (mu1 + mu2) / 2
        # E||z - mu||^2 = E||z||^2 - ||mu||^2: 1 - ||mu||^2 for exact unit rows, and exact for
        # the float32 rows measured (whose squared norms differ from 1 by ~1e-7)
        squares = (sums.within[0][0] + sums.within[1][0]) / (2 * n)
        total = max(squares - float(middle @ middle), 0.0)
        between = distance2 / 4
        before = _cross_view(views.u, views.v, workers=workers)
        u, v = _centred(views.u, mu1), _centred(views.v, mu2)
        after = None if u is None or v is None else _cross_view(u, v, workers=workers)
    return ModalityGap(
        centroid_distance=math.sqrt(distance2),
        centroid_norms=ViewValues(u=math.sqrt(float(mu1 @ mu1)), v=math.sqrt(float(mu2 @ mu2))),
        between_view_variance=between,
        total_variance=total,
        variance_share=between / total if total > 0 else None,
        before=before,
        after=after,
    )
