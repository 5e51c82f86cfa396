"""The content of a comparison report: several results side by side, labelled, ordered and
grouped into replicates by :mod:`cl_diag.report.runs`. One concept per module: ``frame`` (the
one frame every number is read from), ``tables``, ``studies`` (the study sections, one entry
each) and ``builder`` (the document).
"""

from cl_diag.report.comparison.builder import build_comparison, comparison_headline
from cl_diag.report.comparison.frame import (
    LAYER_METRICS,
    Comparison,
    Named,
    comparison_frame,
    comparison_warnings,
    primary_layer,
    seed_frame,
)

__all__ = [
    "LAYER_METRICS",
    "Comparison",
    "Named",
    "build_comparison",
    "comparison_frame",
    "comparison_headline",
    "comparison_warnings",
    "primary_layer",
    "seed_frame",
]
