"""The claims engine: the sources' falsifiable predictions tested on the runs at hand.

One wing, in the order a claim flows through it:

* :mod:`~cl_diag.report.claims.facts` -- what a claim reads of a run (:class:`RunData`);
* :mod:`~cl_diag.report.claims.schema` -- the parts of an entry (source, condition, metric,
  unit, estimate);
* :mod:`~cl_diag.report.claims.designs` -- how an entry compares runs (paired arms, trends,
  one-sample, seed shares, thresholds);
* :mod:`~cl_diag.report.claims.entries` -- the entries (:class:`Claim`, :class:`Identity`);
* :mod:`~cl_diag.report.claims.terms` -- the metrics, conditions and designs the registry
  names;
* :mod:`~cl_diag.report.claims.table` -- every claim, as data (:data:`CLAIMS`;
  ``docs/claims.md`` is it as tables, ``python tools/claims_doc.py``);
* :mod:`~cl_diag.report.claims.inference` -- verdicts, Holm, replication, power, agreement
  and the threshold fit (the statistics only the claims and their reproduction use);
* :mod:`~cl_diag.report.claims.evaluate` -- the one evaluator (:func:`run_findings`: entries
  and runs to :class:`Finding` s);
* :mod:`~cl_diag.report.claims.section` -- the findings as a report shows them.

The rest of the package reads the names below.
"""

from cl_diag.report.claims.entries import Claim, Identity
from cl_diag.report.claims.evaluate import (
    BULLET,
    FAMILY_ALPHA,
    NOT_APPLICABLE,
    Finding,
    run_findings,
)
from cl_diag.report.claims.facts import RunData, ccem_full_batch
from cl_diag.report.claims.section import findings_blocks, summary_lines
from cl_diag.report.claims.table import CLAIMS

__all__ = [
    "BULLET",
    "CLAIMS",
    "FAMILY_ALPHA",
    "NOT_APPLICABLE",
    "Claim",
    "Finding",
    "Identity",
    "RunData",
    "ccem_full_batch",
    "findings_blocks",
    "run_findings",
    "summary_lines",
]
