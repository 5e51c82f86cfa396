"""Class-collapse diagnostics of labelled embeddings (issue 14; paper-notes 11.3).

On the 2n L2-normalised rows z of two views (u_i and v_i both belong to instance i and carry
its label), with C classes, n_c instances of class c (2 n_c rows), class means
mu_c = mean of class c's rows and the global mean mu:

* ``within_class_variance`` of class c: 1 - ||mu_c||^2 (the mean squared distance of unit
  rows to their class mean; 0 = the class collapsed to a point); the result's value is the
  unweighted mean over classes, and ``per_class`` lists each;
* ``total_variance``: 1 - ||mu||^2;
* ``between_class_variance``: sum_c (n_c / n) ||mu_c - mu||^2, so that
  total = sum_c (n_c / n) within_c + between (exact; with equal class sizes the first term
  is ``within_class_variance``);
* ``s_w``: the mean similarity of same-class pairs of *different* instances (both views,
  every ordered pair), ``s_b``: the mean similarity of pairs of different classes;
* ``ssem_residual``: 1 + (n_bar - 1) s_w + n_bar (C - 1) s_b with n_bar = n / C. For a
  balanced sample (every n_c = n_bar; ``balanced``) counting the pairs of ||sum z||^2 gives

      ssem_residual = ||sum z||^2 / (4 n) + (1 - s_pos) / 2
                    = n (1 - total_variance) + (1 - s_pos) / 2  >= 0,

  s_pos the mean positive similarity: 0 exactly when the global mean is 0 and the positives
  are aligned, as on the simplex-to-simplex embedding model (SSEM) at any beta; it grows with
  n otherwise. For classes of unequal size it is the same expression at the mean class size;
* ``view_spread`` and ``instance_within_class_variance``: the within-class variance split
  (docs/ssem.md) into the spread of each instance's views about their mean m_i = (u_i + v_i)/2
  and the class collapse of the instances,

      within_c = 1 - ||mu_c||^2 = instance_within_c + view_spread_c,
      view_spread_c = (1 - P_c/n_c)/2,   instance_within_c = (1 + P_c/n_c)/2 - ||mu_c||^2 >= 0,

  the unweighted means over classes; on the SSEM the instance term is its 1 - beta;
* ``collapsed``: ``within_class_variance < epsilon`` (default :data:`COLLAPSE_EPSILON`);
* ``batch_instance_within_class_variance`` (:func:`at_batch_scope`): the SSEM speaks of *one
  balanced batch* of n instances per class drawn from the sample's N_c, whose expected
  instance variance (a simple random sample's finite-population variance) is
  E[batch_c] = (n - 1)/n * N_c/(N_c - 1) * instance_within_c, averaged over classes.

Nothing needs an n x n matrix: with the class sums S_c = sum of class c's rows, the sums of
squared norms Q_c and the positives' sums P_c = sum_{i in c} u_i.v_i (all O(n d), float64,
streamed over row chunks),

    sum over same-class, different-instance ordered pairs = ||S_c||^2 - Q_c - 2 P_c,
    count 4 n_c (n_c - 1);
    sum over different-class ordered pairs = ||S||^2 - sum_c ||S_c||^2,
    count 4 n^2 - 4 sum_c n_c^2,

since ||S_c||^2 = sum_{a, b in c} z_a.z_b holds the 2 n_c self pairs (Q_c) and the 2 n_c
ordered pairs of an instance's two views (2 P_c). The statistics are exact (always over every
row: no sampling), computed in float64 from the float32 unit rows.

Example::

    >>> import torch
    >>> from cl_diag.measurement.collapse import class_collapse
    >>> z = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    >>> c = class_collapse(z, z, labels=[0, 0, 1, 1])
    >>> c.within_class_variance, c.s_w, c.collapsed
    (0.0, 1.0, True)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from cl_diag.measurement.inputs import UnitViews, label_codes, normalise_views
from cl_diag.result import ClassVariance, Collapse

__all__ = ["COLLAPSE_EPSILON", "at_batch_scope", "class_collapse", "class_collapse_of"]

#: within-class variance below which a layer is flagged as class-collapsed (paper-notes 11.3)
COLLAPSE_EPSILON = 0.01
#: rows per float64 chunk of the class sums (a few MB at d = 2048)
_CHUNK_ROWS = 4096


def class_collapse_of(
    views: UnitViews, codes: torch.Tensor, *, epsilon: float = COLLAPSE_EPSILON
) -> Collapse:
    """The collapse block of result.json (:class:`cl_diag.result.Collapse`) for normalised
    ``views`` and class ``codes`` (int64 0..C-1, every code present:
    :func:`cl_diag.measurement.inputs.label_codes`)."""
    u, v = views
    n, d = views.n, views.d
    classes = int(codes.max()) + 1
    dev = u.device
    sums = torch.zeros(classes, d, dtype=torch.float64, device=dev)
    squares = torch.zeros(classes, dtype=torch.float64, device=dev)
    positives = torch.zeros(classes, dtype=torch.float64, device=dev)
    for r0 in range(0, n, _CHUNK_ROWS):
        a = u[r0 : r0 + _CHUNK_ROWS].double()
        b = v[r0 : r0 + _CHUNK_ROWS].double()
        c = codes[r0 : r0 + _CHUNK_ROWS]
        sums.index_add_(0, c, a + b)
        squares.index_add_(0, c, (a * a).sum(1) + (b * b).sum(1))
        positives.index_add_(0, c, (a * b).sum(1))
    counts = torch.bincount(codes, minlength=classes).to(torch.float64)

    rows = 2.0 * counts  # p = 2 views per instance
    means = sums / rows[:, None]
    within = 1.0 - (means * means).sum(1)
    spread = (1.0 - positives / counts) / 2.0  # (1 - s_pos,c)/2 per class, unit rows
    total_sum = sums.sum(0)
    mean = total_sum / (2.0 * n)
    weights = counts / n
    between = float((weights * ((means - mean) ** 2).sum(1)).sum())
    class_sq = (sums * sums).sum(1)
    same_count = float((4.0 * counts * (counts - 1.0)).sum())
    s_w = float((class_sq - squares - 2.0 * positives).sum()) / same_count if same_count else None
    diff_count = 4.0 * n * n - float((4.0 * counts * counts).sum())
    s_b = float(total_sum @ total_sum - class_sq.sum()) / diff_count if diff_count else None
    residual = None
    if s_w is not None and s_b is not None:
        n_bar = n / classes
        residual = 1.0 + (n_bar - 1.0) * s_w + n_bar * (classes - 1) * s_b
    within_list = within.tolist()
    within_mean = float(np.mean(within_list))
    count_list = [int(x) for x in counts.tolist()]
    return Collapse(
        classes=classes,
        instances=n,
        views=2,
        balanced=len(set(count_list)) == 1,
        within_class_variance=within_mean,
        between_class_variance=between,
        total_variance=float(1.0 - mean @ mean),
        s_w=s_w,
        s_b=s_b,
        ssem_residual=residual,
        view_spread=float(spread.mean()),
        instance_within_class_variance=float((within - spread).mean()),
        epsilon=float(epsilon),
        collapsed=within_mean < epsilon,
        per_class=[
            ClassVariance(count=k, within_class_variance=w, instance_within_class_variance=i)
            for k, w, i in zip(count_list, within_list, (within - spread).tolist(), strict=True)
        ],
    )


def at_batch_scope(collapse: Collapse, instances: int) -> Collapse:
    """``collapse`` with the instance means' within-class variance at the scope of one balanced
    batch of ``instances`` per class (module docstring): ``batch_instances`` and
    ``batch_instance_within_class_variance``, None when a class holds fewer than ``instances``
    (no such batch can be drawn) or a result lacks the per-class instance term."""
    n = int(instances)
    if n < 2:
        raise ValueError(f"a balanced batch needs at least 2 instances per class, got {n}")
    terms, factors = [], []
    for c in collapse.per_class:
        count, within = c.count, c.instance_within_class_variance
        if count is None or within is None or count < n:
            return replace(collapse, batch_instances=n, batch_instance_within_class_variance=None)
        factors.append(((n - 1) * count) / (n * (count - 1)))  # exactly 1.0 when count == n
        terms.append(factors[-1] * within)
    if all(f == 1.0 for f in factors):
        # the sample is one batch: its own value, bit for bit (a re-analysis compares exactly)
        value = collapse.instance_within_class_variance
    else:
        value = float(np.mean(terms)) if terms else None
    return replace(collapse, batch_instances=n, batch_instance_within_class_variance=value)


def class_collapse(
    z1: object, z2: object, labels: object, *, epsilon: float = COLLAPSE_EPSILON
) -> Collapse:
    """:func:`class_collapse_of` for raw arrays (normalised here, once): two views (n, d)
    and n class labels (any comparable values)."""
    views = normalise_views(z1, z2)
    codes = label_codes(labels, views.n, views.u.device)
    if codes is None:
        raise ValueError("class_collapse needs labels: one class label per instance.")
    return class_collapse_of(views, codes, epsilon=epsilon)
