"""Which entries of a square similarity tile are pairs (shared by the tile pass in
:mod:`cl_diag.measurement.pairs` and its fused CPU loop in :mod:`cl_diag.measurement.binning`).

* ``ALL``: every entry (a tile off the diagonal);
* ``OFF_DIAGONAL``: every entry but the diagonal (cross-view negatives of a diagonal tile,
  whose diagonal holds the positives);
* ``UPPER``: the entries strictly above the diagonal (within-view pairs i < j of a diagonal
  tile).
"""

from __future__ import annotations

__all__ = ["ALL", "OFF_DIAGONAL", "UPPER"]

ALL, OFF_DIAGONAL, UPPER = 0, 1, 2
