"""The claims engine: the sources' falsifiable predictions tested on the runs at hand.

In the order a claim flows through it: ``facts`` (what a claim reads of a run), ``schema``
(the parts of an entry), ``designs`` (how an entry compares runs), ``entries`` (:class:`Claim`,
:class:`Identity`), ``terms`` (the metrics, conditions and designs the registry names),
``table`` (every claim, as data: :data:`CLAIMS`), ``inference`` (verdicts, Holm, replication,
power, agreement, the threshold fit), ``evaluate`` (the one evaluator, :func:`run_findings`)
and ``section`` (the findings as a report shows them). The rest of the package reads the
names below.
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
