"""The findings as a report shows them: the summary sentences (:func:`summary_lines`, marked
with :data:`~cl_diag.report.claims.evaluate.BULLET`), and the Findings section
(:func:`findings_blocks`): the method paragraph, the table of predictions with their
verdicts, intervals, replication and power, the descriptions and the consistency checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cl_diag.report.claims.entries import Claim, Identity
from cl_diag.report.claims.evaluate import BULLET, DECIDED_ORDER, NOT_APPLICABLE, Finding, _odds
from cl_diag.report.claims.inference import FRAGILE
from cl_diag.report.claims.schema import WORKS
from cl_diag.report.claims.table import CLAIMS
from cl_diag.report.document import MISSING, Heading, Paragraph, Table

# ---- rendering ---------------------------------------------------------------------------

_SHORT_WORK = {
    "paper": "Lee et al. 2025",
    "rebuttal": "Lee et al. 2025, rebuttal",
    "SSEM": "SSEM paper",
    "CCEM": "Lee et al. 2024 (CCEM)",
    "identity": "identity",
    "none": "no source",
}


def _cite(claim: Claim | Identity) -> str:
    source = claim.source
    work = _SHORT_WORK[source.work]
    return f"{work}, {source.where}" if source.where else work


def _count(n: int, noun: str) -> str:
    """'3 seeds', '1 seed'."""
    return f"{n} {noun.removesuffix('s') if n == 1 else noun}"


def _interval_text(f: Finding, claim: Claim) -> str:
    if f.interval is None or f.confidence is None:
        return f"(no interval: {f.why_not})" if f.why_not else MISSING
    lo, hi = (_plain(claim, x) for x in f.interval)
    return f"[{lo}, {hi}] ({_level(f.confidence)})"


def _plain(claim: Claim, shown: float) -> str:
    """An interval end (already on the printed scale) as text, without a sign."""
    if math.isinf(shown):
        return "∞" if shown > 0 else "−∞"
    if claim.shows == "relative":
        return f"{100.0 * shown:.4g} %"
    if claim.shows == "factor":
        return f"{shown:.4g}×"
    if claim.shows == "pp":
        return f"{100.0 * shown:.4g} pp"
    return f"{shown:.4g}"


def _effect_text(f: Finding, claim: Claim) -> str:
    return claim.show(f.estimate)


def _level(confidence: float) -> str:
    return f"{100.0 * confidence:.4g} %"


def _replication_cell(f: Finding) -> str:
    """'97.2 %' or '61 % (fragile)'; '—' without an interval."""
    if f.replication is None:
        return MISSING
    return _odds(f.replication) + (" (fragile)" if f.fragile else "")


def _power_cell(f: Finding, claim: Claim) -> str:
    """The sensitivity of a decided verdict, or the seeds 80 % power at the margin needs."""
    if f.sensitivity is not None:
        if claim.expect == "agree":
            return f"deviations up to ±{claim.show(f.sensitivity, sign=False)}"
        return f"true effects of {claim.show(f.sensitivity)} or beyond"
    if f.seeds_needed is None:
        if f.verdict == "inconclusive" or f.fragile:
            return "> 10,000 seeds" if "10,000" in f.note else "unknown"
        return MISSING
    add = f.seeds_to_add
    return f"{f.seeds_needed} seeds" + (f" (add {add})" if add else " (enough)")


def _subject_text(f: Finding, claim: Claim) -> str:
    """A subject in a summary line, with its replication odds and its sensitivity or the
    seeds 80 % power at the margin needs."""
    marks = []
    if f.replication is not None:
        marks.append(f"replicates {_replication_cell(f)}")
    if f.sensitivity is not None:
        marks.append(f"sensitive to {_power_cell(f, claim)}")
    elif f.seeds_needed is not None:
        marks.append(f"{f.seeds_needed} seeds for 80 % power at the margin")
    return f.subject + (f" ({'; '.join(marks)})" if marks else "")


def _claim_order(primary: Sequence[str]) -> list[str]:
    """The registry's claim keys, a study plan's primary claims first (in the plan's order)."""
    return [k for k in primary if k in CLAIMS] + [k for k in CLAIMS if k not in primary]


def summary_lines(findings: Sequence[Finding], primary: Sequence[str] = ()) -> list[str]:
    """One sentence per entry: its verdict(s) with the runs they cover, its source; the
    not-applicable units with the reason; one sentence for the consistency checks. A study
    plan's ``primary`` claims come first, marked "Primary:"."""
    lines = []
    for key in _claim_order(primary):
        claim = CLAIMS[key]
        mine = [f for f in findings if f.claim == key]
        if not mine or not isinstance(claim, Claim):
            continue
        head = ("Primary: " if key in primary else "") + f"{claim.statement} ({_cite(claim)})"
        tested = [f for f in mine if f.verdict != NOT_APPLICABLE]
        skipped = [f for f in mine if f.verdict == NOT_APPLICABLE]
        parts = []
        if claim.kind == "description" and tested:
            if len(tested) == 1:
                f = tested[0]
                parts.append(
                    f"no verdict; {claim.effect} {_effect_text(f, claim)} "
                    f"{_interval_text(f, claim)} ({f.subject})"
                )
            else:
                parts.append("no verdict; described for " + ", ".join(f.subject for f in tested))
        elif len(tested) == 1:
            f = tested[0]
            odds = f"; replicates {_replication_cell(f)}" if f.replication is not None else ""
            if f.sensitivity is not None:
                power = f"; sensitive to {_power_cell(f, claim)}"
            elif f.seeds_needed is not None:
                power = f"; {f.seeds_needed} seeds for 80 % power at the margin"
            else:
                power = ""
            parts.append(
                f"{f.verdict}; {claim.effect} "
                f"{_effect_text(f, claim)} {_interval_text(f, claim)} ({f.subject}, "
                f"{_count(f.n, f.replicate)}{odds}{power})"
            )
        elif tested:
            for decided in DECIDED_ORDER:
                subjects = [_subject_text(f, claim) for f in tested if f.verdict == decided]
                if subjects:
                    parts.append(f"{decided} for {', '.join(subjects)}")
        by_reason: dict[str, list[str]] = {}
        for f in skipped:
            by_reason.setdefault(f.why_not, []).append(f.subject)
        for why, subjects in by_reason.items():
            parts.append(f"not applicable to {', '.join(subjects)} ({why})")
        lines.append(f"{head}: {'; '.join(parts)}.")
    checks = [f for f in findings if f.kind == "consistency"]
    if checks:
        bad = [f for f in checks if f.verdict == "violated"]
        layers = max(f.n for f in checks)
        lines.append(
            "Consistency checks (identities for any unit vectors; they fail only on a "
            f"measurement bug): {len(checks) - len(bad)} of {len(checks)} hold on "
            f"{_count(layers, 'layers')}"
            + (
                ""
                if not bad
                else "; VIOLATED: " + ", ".join(CLAIMS[f.claim].statement for f in bad)
            )
            + "."
        )
    return lines


def _method_paragraph(findings: Sequence[Finding]) -> Paragraph:
    family = sum(1 for f in findings if f.kind == "prediction" and f.p_value is not None)
    works = ["paper", "rebuttal", "SSEM"]
    if any(CLAIMS[f.claim].source.work == "CCEM" for f in findings):
        works.append("CCEM")  # named only where cited: the other reports read as before
    return Paragraph(
        "The claims of the sources that apply to these runs, from the registry in "
        "docs/claims.md, computed from the results. Sources: "
        + "; ".join(f"{_SHORT_WORK[k]} = {WORKS[k]}" for k in works)
        + ". A verdict is supported when the whole interval lies beyond the size the source "
        "claims (by default the minimum relevant effect, the margin) in the expected "
        "direction, not borne out when it lies wholly short of that size (the data reject "
        "it), contradicted when it lies on the other side of zero by at least the margin (for "
        "an agreement: supported within ± the margin, contradicted entirely beyond it), "
        "inconclusive otherwise, and not applicable outside the source's scope or when the data"
        " fail the claim's precondition. "
        + (
            f"Multiplicity: the {family} findings with a verdict are one family; Holm's "
            "step-down at a family-wise 5 % sets each interval's level (printed with it). "
            if family > 1
            else "Each interval is at 95 %. "
        )
        + "Replicates: the probability that an independent replicate study of the same design "
        "gets the same verdict (the t predictive distribution of its estimate, or a bootstrap "
        f"over seeds where the per-seed effects are far from normal); fragile below "
        f"{100 * FRAGILE:.0f} %. A decided verdict with a spread over seeds gives the design's "
        "sensitivity: the smallest true effect its seeds call supported with 80 % power "
        "(noncentral t; for an agreement, the largest deviation); undecided and fragile ones "
        "give the seeds that would give 80 % power to detect the margin at the observed spread."
    )


def findings_blocks(
    findings: Sequence[Finding], figures: Sequence = (), primary: Sequence[str] = ()
) -> list:
    """The Findings section: how verdicts are made, one summary sentence per claim, a table
    per prediction (a row per subject) with the figures that carry it, the not-applicable
    units, the descriptions and the consistency checks; a study plan's ``primary`` claims
    first."""
    blocks: list = [Heading(2, "Findings")]
    if not findings:
        blocks.append(
            Paragraph(
                "No claim of the registry (docs/claims.md) applies to these runs: they carry no "
                "pair statistics of a loss layer."
            )
        )
        return blocks
    blocks.append(_method_paragraph(findings))
    if not any(f.kind != "consistency" for f in findings):
        blocks.append(
            Paragraph(
                "No prediction applies: the runs record no training config or none that a "
                "claim is about; only the consistency checks are made."
            )
        )
    for line in summary_lines(findings, primary):
        blocks.append(Paragraph(BULLET + line))
    placed: set[str] = set()
    for key in _claim_order(primary):
        claim = CLAIMS[key]
        if not isinstance(claim, Claim) or claim.kind != "prediction":
            continue
        mine = [f for f in findings if f.claim == key and f.verdict != NOT_APPLICABLE]
        if not mine:
            continue
        rows = [
            [
                f.subject,
                f.measured,
                _effect_text(f, claim),
                _interval_text(f, claim),
                _count(f.n, f.replicate),
                f.verdict or MISSING,
                _replication_cell(f),
                _power_cell(f, claim),
                " ".join(p for p in (f.method + "." if f.method else "", f.note) if p),
            ]
            for f in mine
        ]
        blocks.append(
            Table(
                columns=[
                    "runs",
                    "measured",
                    "effect",
                    "interval (level)",
                    "n",
                    "verdict",
                    "replicates",
                    "sensitivity, or seeds for 80 % power",
                    "how / why",
                ],
                rows=rows,
                caption=(
                    ("Primary claim of the study's plan. " if key in primary else "")
                    + f"{claim.statement} ({claim.source.full}). At its scope: {claim.at_scope}. "
                    f"Effect: {claim.effect}; expected: {claim.expect}; "
                    + (f"claimed size {claim.claimed_text}; " if claim.claimed_text else "")
                    + f"minimum relevant effect {claim.margin_text} ({claim.margin_why})."
                ),
            )
        )
        for fig in figures:
            name = getattr(fig, "filename", None)
            if name is None or name in placed:
                continue
            if any(f.figure == name for f in mine):
                blocks.append(fig)
                placed.add(name)
    skipped = [f for f in findings if f.verdict == NOT_APPLICABLE]
    if skipped:
        blocks.append(Heading(3, "Not applicable here"))
        blocks.append(
            Table(
                columns=["claim", "source", "runs", "why"],
                rows=[
                    [CLAIMS[f.claim].statement, _cite(CLAIMS[f.claim]), f.subject, f.note]
                    for f in skipped
                ],
                caption=(
                    "Claims whose design these runs form but which they do not test: outside "
                    "the source's scope, or data that fail the claim's precondition."
                ),
            )
        )
    described = [f for f in findings if f.kind == "description" and f.verdict is None]
    if described:
        blocks.append(Heading(3, "Descriptions (no verdict)"))
        rows = []
        for f in described:
            claim = CLAIMS[f.claim]
            assert isinstance(claim, Claim)
            rows.append(
                [
                    claim.statement,
                    f.subject,
                    f.measured,
                    f"{claim.effect}: {_effect_text(f, claim)}",
                    _interval_text(f, claim),
                    _count(f.n, f.replicate),
                    f.note,
                ]
            )
        blocks.append(
            Table(
                columns=["quantity", "runs", "measured", "estimate", "interval", "n", "why"],
                rows=rows,
                caption="Quantities no source predicts for these runs: estimates with intervals.",
            )
        )
    checks = [f for f in findings if f.kind == "consistency"]
    if checks:
        blocks.append(Heading(3, "Consistency checks"))
        blocks.append(
            Table(
                columns=["check", "source", "identity", "layers", "result"],
                rows=[
                    [
                        CLAIMS[f.claim].statement,
                        CLAIMS[f.claim].source.where,
                        f.method,
                        str(f.n),
                        f"{f.verdict}. {f.note}",
                    ]
                    for f in checks
                ],
                caption=(
                    "Identities that hold for any unit vectors over the analysed instances: a "
                    "violation beyond rounding (or, for sampled pairs, 4 standard errors) is a "
                    "measurement bug, never a finding about the runs."
                ),
            )
        )
    return blocks
