"""Findings: the claims of the registry (:mod:`cl_diag.report.claims.table`) tested on the
runs at hand, each with its effect, interval, verdict and how sure that verdict is (issue 21).

:func:`run_findings` forms each entry's units with its design (the groups of runs one test is
about), and for each unit:

1. runs outside the entry's *domain* are left out; a unit outside its *scope*, or whose data
   fail its precondition, is *not applicable*, with the reason;
2. the design estimates the effect with its standard error on the analysis scale
   (:class:`~cl_diag.report.claims.schema.Estimate`);
3. the predictions are one family: Holm's step-down (family-wise 5 %, 2.5 % per side) sets the
   level at which each is judged and its interval is printed;
4. :func:`~cl_diag.report.claims.inference.verdict` judges the interval against the claimed
   size and the margin;
5. the *replication* probability (t predictive, or a bootstrap over seeds where Shapiro-Wilk
   finds the per-seed effects far from normal) marks a verdict *fragile*, and the design's
   *sensitivity* or the seeds that would give 80 % power are given.

Descriptions get an estimate and 95 % interval, no verdict. Consistency checks
(:class:`~cl_diag.report.claims.entries.Identity`) give one finding per identity over every
layer of every run, *holds* or *violated*. A :class:`Finding` keeps what ``cl-diag reproduce``
compares: the printed effect and interval, se, df and scale, margin, claimed size, verdict and
replication.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cl_diag.measurement.stats import CONFIDENCE
from cl_diag.report.claims.entries import Claim, Identity
from cl_diag.report.claims.facts import RunData
from cl_diag.report.claims.inference import (
    FRAGILE,
    HolmLevel,
    equivalence_sensitivity,
    far_from_normal,
    holm_levels,
    interval_at,
    margin_p_values,
    replicate_error,
    replication,
    replication_bootstrap,
    seeds_needed,
    sensitivity,
    verdict,
)
from cl_diag.report.claims.schema import Estimate, Unit
from cl_diag.report.claims.table import CLAIMS
from cl_diag.report.document import fmt

#: the verdict of a unit outside the source's scope, or whose data fail a precondition
NOT_APPLICABLE = "not applicable"
#: the one-sided family-wise level of the Holm family (a two-sided 95 % for one finding)
FAMILY_ALPHA = (1 - CONFIDENCE) / 2
#: how the Findings (and a study section's summary) mark a summary sentence; tools/quote_findings.py
#: quotes the sentences so marked in a study's README
BULLET = "• "
#: the order a summary lists a claim's decided and undecided verdicts in
DECIDED_ORDER = ("supported", "not borne out", "contradicted", "inconclusive")


@dataclass(frozen=True)
class Finding:
    """One registry entry tested on some runs.

    ``claim`` is the entry's key, ``subject`` names the runs it covers (``runs``: their
    labels), ``kind`` is "prediction", "description" or "consistency". ``verdict``:
    "supported", "not borne out", "contradicted", "inconclusive" or "not applicable" for a
    prediction; None for a description; "holds" or "violated" for a consistency check.
    ``effect`` and ``interval`` are as printed (the interval at ``confidence``, Holm-adjusted
    for a prediction);
    ``estimate``, ``se`` and ``df`` are on the analysis scale (``scale`` "log": the printed
    effect is exp(x) − 1 or exp(x)); ``n`` replicates of kind ``replicate``; ``minimum`` is
    the margin (the minimum relevant effect) and ``claimed`` the size the source claims, on the
    analysis scale; ``p_value`` is the one-sided p of the verdict's deciding test and
    ``p_adjusted`` its Holm adjustment; ``replication`` the probability that an independent
    replicate study gets the same verdict (``replication_method`` says how it was computed);
    ``prediction_error`` the replicate prediction error t √2 se; ``sensitivity`` the smallest
    true effect (analysis scale, signed as the claim expects; for an agreement the largest
    deviation) the design calls supported with 80 % power; ``seeds_needed`` (per condition, or
    per level of a trend) for 80 % power to detect the margin at the observed spread, with
    ``seeds`` the number there is now; ``note`` why a
    verdict is what it is (or why not applicable); ``method`` how the interval was made,
    ``measured`` and ``data`` the numbers used; ``figure`` the figure that carries it."""

    claim: str
    subject: str
    kind: str
    verdict: str | None
    effect: float | None = None
    interval: tuple[float, float] | None = None
    confidence: float | None = None
    estimate: float | None = None
    se: float | None = None
    df: float | None = None
    scale: str = "linear"
    n: int = 0
    replicate: str = ""
    minimum: float | None = None
    claimed: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    replication: float | None = None
    replication_method: str = ""
    prediction_error: float | None = None
    sensitivity: float | None = None
    seeds_needed: int | None = None
    seeds: int | None = None
    note: str = ""
    #: a not-applicable finding's reason in a few words (what the summary line groups by), or
    #: why an inconclusive one has no interval ("one run")
    why_not: str = ""
    method: str = ""
    measured: str = ""
    runs: tuple[str, ...] = ()
    data: tuple[tuple[str, float | None], ...] = ()
    figure: str | None = None

    @property
    def spec(self) -> Claim | Identity:
        return CLAIMS[self.claim]

    @property
    def margin(self) -> float | None:
        return self.minimum

    @property
    def fragile(self) -> bool:
        """An independent replicate study would give another verdict more often than
        1 − :data:`~cl_diag.measurement.stats.FRAGILE` of the time."""
        return self.replication is not None and self.replication < FRAGILE

    @property
    def seeds_to_add(self) -> int | None:
        """Seeds to add for 80 % power (0 when there are enough), None when unknown."""
        if self.seeds_needed is None or self.seeds is None:
            return None
        return max(0, self.seeds_needed - self.seeds)


# ---- the evaluator --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Draft:
    claim: Claim
    unit: Unit
    estimate: Estimate


def _finite(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def run_findings(
    runs: Sequence[RunData],
    names: Callable[[RunData, tuple[str, ...]], str] | None = None,
    *,
    figures: Mapping[str, str] | None = None,
    claims: Sequence[str] | None = None,
) -> list[Finding]:
    """Every registry entry tested on ``runs``, in registry order (see the module docstring).

    ``names(run, exclude)`` labels the group a run belongs to by its config without the
    ``exclude`` options (the comparison's config labels; default: the run's label);
    ``figures`` maps a claim's figure key to the file of the figure that carries it;
    ``claims`` restricts the registry to these keys (and the Holm family to their
    findings)."""
    figures = figures or {}
    entries = [CLAIMS[k] for k in claims] if claims is not None else list(CLAIMS.values())

    def name(group: Sequence[RunData], exclude: tuple[str, ...]) -> str:
        if names is None:
            return group[0].label
        return names(group[0], exclude) or "runs"

    drafts: list[_Draft] = []
    out: list[Finding] = []
    for claim in entries:
        if not isinstance(claim, Claim):
            continue
        for unit in claim.design.units(runs, name):
            if any(c.failing(unit) for c in claim.domain):
                continue
            unmet = [c for c in claim.scope if c.unmet(unit) is not None]
            if unmet:
                why = "; ".join(str(c.unmet(unit)) for c in unmet)
                # a run outside the source's setting needs no word on its convergence
                shown = [c for c in unmet if c.summary is None] or unmet
                short = ", ".join(c.short(unit) for c in shown)
                out.append(_not_applicable(claim, unit, why, None, short))
                continue
            estimate = claim.design.estimate(unit, claim.metric)
            if estimate is None:
                continue
            if claim.precondition is not None:
                failed = claim.precondition.unmet(unit, estimate)
                if failed is not None:
                    short = f"here: fails '{claim.precondition.requires}'"
                    out.append(_not_applicable(claim, unit, failed, estimate, short))
                    continue
            drafts.append(_Draft(claim, unit, estimate))
    family = [
        d
        for d in drafts
        if d.claim.kind == "prediction" and _finite(d.estimate.effect, d.estimate.se)
    ]
    p_values = [_deciding_p(d) for d in family]
    levels = dict(zip(map(id, family), holm_levels(p_values, FAMILY_ALPHA), strict=True))
    for d in drafts:
        if d.claim.kind == "description":
            out.append(_described(d, figures))
        elif id(d) in levels:
            out.append(_decided(d, levels[id(d)], len(family), figures))
        else:
            out.append(_undecided(d, figures))
    out += _consistency(runs, [e for e in entries if isinstance(e, Identity)])
    order = list(CLAIMS)
    return sorted(out, key=lambda f: order.index(f.claim))


def _deciding_p(d: _Draft) -> float:
    """The one-sided p-value of the test that would decide the draft's verdict: the smallest
    of the tests for *supported*, *not borne out* and *contradicted* (the test against the
    claimed size is one of the family's like the others)."""
    est, claim = d.estimate, d.claim
    assert est.effect is not None and est.se is not None and claim.expect is not None
    return margin_p_values(
        est.effect,
        est.se,
        est.df,
        expect=claim.expect,
        minimum=claim.margin_for(d.unit)[0],
        claimed=claim.claimed_for(d.unit) if claim.expect != "agree" else None,
    ).deciding


def _common(claim: Claim, unit: Unit, estimate: Estimate | None) -> dict:
    prediction = claim.kind == "prediction"
    return {
        "claim": claim.key,
        "subject": unit.subject,
        "kind": claim.kind,
        "runs": tuple(r.label for r in unit.runs),
        "scale": "log" if claim.shows in ("relative", "factor") else "linear",
        "minimum": claim.margin_for(unit)[0] if prediction else claim.margin,
        "claimed": claim.claimed_for(unit) if prediction else None,
        "figure": None,
        **(
            {}
            if estimate is None
            else {
                "n": estimate.n,
                "replicate": estimate.replicate,
                "method": estimate.method,
                "measured": estimate.measured,
                "data": estimate.data,
                "seeds": estimate.seeds,
            }
        ),
    }


def _not_applicable(
    claim: Claim, unit: Unit, why: str, estimate: Estimate | None, short: str
) -> Finding:
    """A unit outside the source's scope (no estimate) or whose data fail the precondition."""
    here = " here" if estimate is not None else ""
    fields = _common(claim, unit, estimate)
    if estimate is not None:
        fields.update(
            effect=claim.display(estimate.effect),
            estimate=estimate.effect,
            se=estimate.se,
            df=estimate.df,
        )
    return Finding(
        **fields,
        verdict=NOT_APPLICABLE if claim.kind == "prediction" else None,
        note=f"Not applicable{here}: {why}.",
        why_not=short,
    )


def _interval(est: Estimate, confidence: float) -> tuple[float, float]:
    """The estimate's interval at ``confidence``: its own (a profile likelihood) when it has
    one, else effect ± t se."""
    if est.interval_at is not None:
        return est.interval_at(confidence)
    assert est.effect is not None and est.se is not None
    return interval_at(est.effect, est.se, est.df, confidence)


def _shown_interval(claim: Claim, interval: tuple[float, float]) -> tuple[float, float]:
    lo, hi = (claim.display(x) for x in interval)
    assert lo is not None and hi is not None
    return lo, hi


def _described(d: _Draft, figures: Mapping[str, str]) -> Finding:
    claim, est = d.claim, d.estimate
    interval = None
    if _finite(est.effect, est.se):
        assert est.effect is not None and est.se is not None
        interval = _shown_interval(claim, _interval(est, CONFIDENCE))
    return Finding(
        **{**_common(claim, d.unit, est), "figure": figures.get(claim.figure or "")},
        verdict=None,
        effect=claim.display(est.effect),
        interval=interval,
        confidence=CONFIDENCE if interval is not None else None,
        estimate=est.effect,
        se=est.se,
        df=est.df,
        note=("No verdict: " + claim.at_scope + ".")
        + (f" No interval: {est.why_no_interval}." if interval is None else ""),
    )


def _undecided(d: _Draft, figures: Mapping[str, str]) -> Finding:
    """A prediction without an interval: inconclusive, with why."""
    claim, est = d.claim, d.estimate
    return Finding(
        **{**_common(claim, d.unit, est), "figure": figures.get(claim.figure or "")},
        verdict="inconclusive",
        effect=claim.display(est.effect),
        estimate=est.effect,
        se=est.se,
        df=est.df,
        note=f"Inconclusive: {est.why_no_interval or 'no interval'}.",
        why_not=(est.why_no_interval or "no interval").split(":")[0],
    )


def _replication(
    expect: str,
    margin: float,
    claimed: float | None,
    est: Estimate,
    interval: tuple[float, float],
    decided: str,
    confidence: float,
) -> tuple[float | None, str]:
    """The probability that an independent replicate study gets ``decided`` again, and how it
    was computed: a bootstrap over seeds where the per-seed effects are far from normal (a t
    interval over seeds, so one value a seed), else the t predictive distribution."""
    assert est.se is not None
    if est.per_seed and est.power_design == "one_sample" and far_from_normal(est.per_seed):
        odds = replication_bootstrap(
            est.per_seed,
            decided,
            expect=expect,
            minimum=margin,
            confidence=confidence,
            claimed=claimed,
        )
        return odds, "bootstrap over seeds (per-seed effects far from normal, Shapiro-Wilk)"
    predicted = replication(
        interval, expect=expect, minimum=margin, se=est.se, df=est.df, claimed=claimed
    )
    return predicted, "t predictive distribution"


def _decided(d: _Draft, level: HolmLevel, family: int, figures: Mapping[str, str]) -> Finding:
    """A prediction judged at its Holm level: verdict, replication odds, sensitivity or power."""
    claim, est = d.claim, d.estimate
    assert est.effect is not None and est.se is not None and claim.expect is not None
    margin = claim.margin_for(d.unit)[0]
    claimed = claim.claimed_for(d.unit)
    confidence = 1.0 - 2.0 * level.level
    interval = _interval(est, confidence)
    decided = verdict(est.effect, interval, expect=claim.expect, minimum=margin, claimed=claimed)
    reach = replicate_error(est.se, est.df)
    odds, how = _replication(claim.expect, margin, claimed, est, interval, decided, confidence)
    fragile = odds is not None and odds < FRAGILE
    p = _deciding_p(d)
    needed: int | None = None
    sense: float | None = None
    if est.power_design and _finite(est.sd):
        assert est.sd is not None
        if decided in ("supported", "contradicted", "not borne out") and not fragile:
            # a decided verdict: how small a true effect this design would call supported
            if claim.expect == "agree":
                sense = equivalence_sensitivity(
                    est.power_design,
                    est.seeds or 0,
                    minimum=margin,
                    sd=est.sd,
                    alpha=level.level,
                    levels=est.levels,
                )
            else:
                assert claimed is not None
                size = sensitivity(
                    est.power_design,
                    est.seeds or 0,
                    claimed=claimed,
                    sd=est.sd,
                    alpha=level.level,
                    levels=est.levels,
                )
                sense = None if size is None else (-size if claim.expect == "decrease" else size)
        if sense is None:
            needed = seeds_needed(
                est.power_design,
                margin=margin,
                sd=est.sd,
                alpha=level.level,
                levels=est.levels,
                agree=claim.expect == "agree",
            )
    notes = [_why(claim, decided, interval, p, family, margin, claimed)]
    if odds is not None:
        notes.append(
            f"An independent replicate study gets this verdict again with probability "
            f"{_odds(odds)} ({how})" + ("; fragile." if fragile else ".")
        )
    if sense is not None:
        notes.append(_sensitivity_text(claim, est, sense))
    else:
        notes.append(_power_text(est, needed))
    return Finding(
        **{**_common(claim, d.unit, est), "figure": figures.get(claim.figure or "")},
        verdict=decided,
        effect=claim.display(est.effect),
        interval=_shown_interval(claim, interval),
        confidence=confidence,
        estimate=est.effect,
        se=est.se,
        df=est.df,
        p_value=p,
        p_adjusted=level.adjusted,
        replication=odds,
        replication_method=how if odds is not None else "",
        prediction_error=reach,
        sensitivity=sense,
        seeds_needed=needed,
        note=" ".join(n for n in notes if n),
    )


def _odds(p: float) -> str:
    """A probability as a percentage that never rounds to a certainty it is not."""
    if p >= 1.0:
        return "100 %"
    return f"{min(99.9, 100.0 * p):.3g} %" if p > 0.995 else f"{100.0 * p:.3g} %"


def _why(
    claim: Claim,
    decided: str,
    interval: tuple[float, float],
    p: float,
    family: int,
    margin: float,
    claimed: float | None,
) -> str:
    """Why the verdict is what it is, in one sentence."""
    if decided == "supported":
        return (
            "Supported: the whole interval lies inside ± the margin."
            if claim.expect == "agree"
            else "Supported: the whole interval lies beyond the claimed size in the expected "
            "direction."
        )
    if decided == "contradicted":
        return (
            "Contradicted: the whole interval lies beyond the margin."
            if claim.expect == "agree"
            else "Contradicted: the whole interval lies beyond the margin on the other side."
        )
    if decided == "not borne out":
        assert claimed is not None
        return (
            "Not borne out: the whole interval lies short of the claimed size "
            f"({claim.show(-claimed if claim.expect == 'decrease' else claimed)}), so the data "
            "reject the effect the source states at this scope"
            + (
                " (the interval also lies within ± the margin: any effect is smaller than the "
                "minimum relevant one)."
                if -margin < interval[0] and interval[1] < margin
                else "."
            )
        )
    if family > 1 and p <= FAMILY_ALPHA:
        return (
            f"Inconclusive after Holm's correction over the {family} findings with a verdict: it "
            f"would be decided at 95 % alone (one-sided p = {p:.3g}), not at its level."
        )
    if claim.expect == "agree":
        return "Inconclusive: the interval reaches both inside and outside ± the margin."
    return "Inconclusive: the interval holds the claimed size."


def _sensitivity_text(claim: Claim, est: Estimate, sense: float) -> str:
    """'Sensitivity: 6 seeds call a true change of −18.7 % or beyond supported with 80 % power
    (observed −35.2 %).'"""
    per = {"one_sample": "", "two_sample": " per condition", "slope": " per level"}[
        est.power_design or "one_sample"
    ]
    seeds = f"{est.seeds or 0} seeds{per}"
    if claim.expect == "agree":
        return (
            f"Sensitivity: {seeds} call a true deviation up to ±{claim.show(sense, sign=False)} "
            f"supported with 80 % power (observed {claim.show(est.effect)})."
        )
    return (
        f"Sensitivity: {seeds} call a true effect of {claim.show(sense)} or beyond supported "
        f"with 80 % power (observed {claim.show(est.effect)})."
    )


def _power_text(est: Estimate, needed: int | None) -> str:
    """The seeds that would give 80 % power, or why that is not known."""
    if est.power_design is None or est.sd is None or not math.isfinite(est.sd):
        if est.why_no_power:
            return est.why_no_power
        if est.replicate == "images":
            return (
                "One run: its interval is the sampling of its analysed images; the spread over "
                "training seeds is unknown, so no seed count is given (run at least 2 seeds)."
            )
        return "No spread over seeds is known, so no seed count is given."
    per = {"one_sample": "", "two_sample": " per condition", "slope": " per level"}[
        est.power_design
    ]
    if needed is None:
        return "More than 10,000 seeds would be needed for 80 % power at the observed spread."
    have = est.seeds or 0
    if needed > have:
        return (
            f"80 % power to detect the margin at the observed spread needs {needed} "
            f"seeds{per}: add {needed - have}."
        )
    return (
        f"The {have} seeds{per} already give 80 % power to detect the margin at the observed "
        f"spread ({needed} would)."
    )


# ---- consistency checks -----------------------------------------------------------------------


def _consistency(runs: Sequence[RunData], identities: Sequence[Identity]) -> list[Finding]:
    """One finding per identity over every layer of every run: holds or violated."""
    out = []
    for identity in identities:
        checked: list[tuple[str, float, float]] = []
        for run in runs:
            for layer in run.layers:
                slack = identity.slack(layer)
                if slack is None or not math.isfinite(slack):
                    continue
                # one run (an analysis report): its label names it already
                label = (
                    layer.name if len(runs) == 1 or not run.label else f"{run.label}, {layer.name}"
                )
                checked.append((label, slack, identity.error(layer)))
        if not checked:
            continue
        violated = [(label, s, e) for label, s, e in checked if s < -e]
        smallest = min(checked, key=lambda c: c[1])
        note = (
            "Holds on every layer checked (smallest slack "
            f"{fmt(smallest[1])} at {smallest[0]}; tolerance {fmt(smallest[2])})."
            if not violated
            else "VIOLATED, a measurement bug: "
            + "; ".join(f"{label}: slack {fmt(s)} < −{fmt(e)}" for label, s, e in violated)
            + "."
        )
        out.append(
            Finding(
                claim=identity.key,
                subject="every run and layer" if len(runs) > 1 else "every layer",
                kind="consistency",
                verdict="violated" if violated else "holds",
                effect=smallest[1],
                n=len(checked),
                replicate="layers",
                note=note,
                method=identity.formula,
                runs=tuple(r.label for r in runs),
                data=tuple((label, s) for label, s, _ in checked),
            )
        )
    return out
