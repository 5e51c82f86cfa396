"""The words cl-diag measures in, spelled once: the pair types, the simplex threshold δ, the
layers a checkpoint is measured at and the name of the file a result is written to.

Lee, Lim, Lee, Sohn, "On the Similarities of Embeddings in Contrastive Learning" (ICML 2025),
Sec. 3 and App. B: for n instances with two views u_i, v_i (unit vectors),

* **positive** pairs (u_i, v_i): n pairs;
* **cross-view negative** pairs (u_i, v_j), i ≠ j: the n(n−1) ordered pairs;
* **within-view negative** pairs (u_i, u_j) and (v_i, v_j), i < j: n(n−1) pairs in all.

A negative below δ(n) = −1/(n − 1), the similarity of every negative pair of the simplex ETF
of n instances (Thm 5.1), is *excessively separated* (Sec. 5); its one implementation is
:func:`cl_diag.measurement.theory.delta`, its key in result.json ``threshold``.
:class:`PairType` is a ``str`` enum whose ``value`` is the key of result.json, ``short`` the
monitor's column prefix (``cross_neg_mean``), ``label`` the words a report prints and
``definition`` the pairs it counts.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["LAYERS", "NEGATIVE_TYPES", "PAIR_TYPES", "RESULT_NAME", "PairType"]


class PairType(str, Enum):
    """One of the paper's three pair types (Sec. 3); the value is result.json's key."""

    POSITIVE = "positive"
    CROSS_VIEW_NEGATIVE = "cross_view_negative"
    WITHIN_VIEW_NEGATIVE = "within_view_negative"

    def __str__(self) -> str:  # the key, also inside f-strings on every Python version
        return self.value

    @property
    def short(self) -> str:
        """The prefix of the training monitor's columns (``pos``, ``cross_neg``, ``within_neg``)."""
        return _SHORT[self]

    @property
    def label(self) -> str:
        """The words a report prints (``cross-view negative``)."""
        return _LABEL[self]

    @property
    def definition(self) -> str:
        """The pairs the type counts, over n instances with views u_i, v_i."""
        return _DEFINITION[self]

    @property
    def is_negative(self) -> bool:
        return self is not PairType.POSITIVE


_SHORT = {
    PairType.POSITIVE: "pos",
    PairType.CROSS_VIEW_NEGATIVE: "cross_neg",
    PairType.WITHIN_VIEW_NEGATIVE: "within_neg",
}
_LABEL = {
    PairType.POSITIVE: "positive",
    PairType.CROSS_VIEW_NEGATIVE: "cross-view negative",
    PairType.WITHIN_VIEW_NEGATIVE: "within-view negative",
}
# as the single-run report's "which pairs" row prints them
_DEFINITION = {
    PairType.POSITIVE: "(u_i, v_i), n pairs",
    PairType.CROSS_VIEW_NEGATIVE: "(u_i, v_j), i ≠ j, n(n−1) ordered",
    PairType.WITHIN_VIEW_NEGATIVE: "(u_i, u_j) and (v_i, v_j), i < j, n(n−1)",
}

#: the three pair types, in the order of a result
PAIR_TYPES: tuple[PairType, ...] = tuple(PairType)
#: the pair types that carry the excessive-separation ratio and the by-class split
NEGATIVE_TYPES: tuple[PairType, ...] = tuple(p for p in PairType if p.is_negative)

#: the layers a checkpoint analysis can measure, in result order (the keys of result.json's
#: ``layers`` for a checkpoint)
LAYERS = ("projector", "backbone")
#: the file name ``analyze`` writes a result to in its output folder
RESULT_NAME = "result.json"
