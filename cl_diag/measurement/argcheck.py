"""Argument checks shared by the closed forms (:mod:`cl_diag.measurement.theory`,
:mod:`cl_diag.measurement.ssem`): a programming error in a caller is a ``ValueError`` naming the
argument, never a silently wrong number."""

from __future__ import annotations

import numbers

__all__ = ["check_count"]


def check_count(n: object, name: str = "n", least: int = 2) -> int:
    """``n`` as an int, when it is an integer (not a bool) of at least ``least``."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {n!r}")
    return int(n)
