"""The content of a comparison report: several results side by side.

Runs are labelled, ordered and grouped into replicates by :mod:`cl_diag.report.runs`
(labels name what differs between the training configs, "simclr b32 +VRN30"; folder
names are the fallback). The tables hold, per layer, the positive mean, the
cross-view and within-view negative mean/var/std/excessive ratio, the geometry,
and the probe accuracies; with a baseline, each run's difference from it.

The package holds one concept per module: :mod:`~cl_diag.report.comparison.frame` (the one
frame every number is read from), :mod:`~cl_diag.report.comparison.tables` (its tables),
:mod:`~cl_diag.report.comparison.studies` (the study sections, one entry each) and
:mod:`~cl_diag.report.comparison.builder` (the document).
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
