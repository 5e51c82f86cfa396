"""Findings: the claims of the registry (:mod:`cl_diag.report.claims`) tested on the runs at
hand, each with its effect, interval, verdict and how sure that verdict is (issue 21).

One evaluator, :func:`run_findings`, turns the registry's entries and the runs
(:class:`~cl_diag.report.claim_model.RunData`, read from typed results) into
:class:`Finding` s. For each entry it forms the entry's units with its design (the groups of
runs one test is about), and for each unit:

1. a unit whose runs fail the entry's *domain* is left out (the claim does not speak of
   them); one that fails its *scope* is *not applicable*, with the unmet condition;
2. the design estimates the effect with its standard error on the analysis scale
   (:class:`~cl_diag.report.claim_model.Estimate`); a unit whose data fail the entry's
   precondition is *not applicable here*, with the reason;
3. the predictions with an interval are one family: Holm's step-down
   (:func:`cl_diag.measurement.stats.holm_levels`, family-wise 5 %, 2.5 % per side) sets the
   level at which each is judged, and its interval is printed at that level (effect ± t se,
   or the estimate's own interval at that level: the threshold's profile likelihood);
4. the verdict (:func:`cl_diag.measurement.stats.verdict`): *supported* when the whole
   interval lies beyond the margin in the expected direction, *contradicted* when it lies on
   the other side of zero by at least the margin, else *inconclusive* with the reason; for an
   agreement, supported inside ± the margin, contradicted entirely beyond it;
5. *borderline* when moving the interval by up to the replicate prediction error
   t_{0.975, df} √2 se (:func:`cl_diag.measurement.stats.replicate_error`) would change the
   verdict; every verdict with a spread over seeds gives the seeds that would give 80 %
   power to detect the margin at the observed spread
   (:func:`cl_diag.measurement.stats.seeds_needed`, scipy's noncentral t), or why none is
   given.

Descriptions get their estimate and 95 % interval, no verdict. The consistency checks
(identities, :class:`~cl_diag.report.claim_model.Identity`) are evaluated on every layer of
every run: one finding per identity, *holds* or *violated* (a measurement bug).

A :class:`Finding` keeps, for tools that compare findings (``cl-diag reproduce``): the
effect and interval as printed (``effect``, ``interval``, at ``confidence``), the estimate's
standard error ``se`` and degrees of freedom ``df`` on the analysis scale (``scale``: "log"
when the printed effect is exp(x) − 1 or exp(x) of it), the margin ``minimum`` (analysis
scale), ``verdict``, ``borderline``, ``prediction_error`` and ``seeds_needed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cl_diag.measurement.stats import (
    CONFIDENCE,
    HolmLevel,
    borderline,
    holm_levels,
    interval_at,
    margin_p_values,
    replicate_error,
    seeds_needed,
    verdict,
)
from cl_diag.report.claim_model import (
    WORKS,
    Claim,
    Estimate,
    Identity,
    RunData,
    Unit,
)
from cl_diag.report.claims import CLAIMS
from cl_diag.report.document import MISSING, Heading, Paragraph, Table, fmt
from cl_diag.report.runs import SEED_KEY

__all__ = [
    "CLAIMS",
    "NOT_APPLICABLE",
    "SEED_KEY",
    "Finding",
    "RunData",
    "findings_blocks",
    "run_findings",
    "summary_lines",
]

#: the verdict of a unit outside the source's scope, or whose data fail a precondition
NOT_APPLICABLE = "not applicable"
#: the one-sided family-wise level of the Holm family (a two-sided 95 % for one finding)
FAMILY_ALPHA = (1 - CONFIDENCE) / 2


@dataclass(frozen=True)
class Finding:
    """One registry entry tested on some runs.

    ``claim`` is the entry's key, ``subject`` names the runs it covers (``runs``: their
    labels), ``kind`` is "prediction", "description" or "consistency". ``verdict``:
    "supported", "contradicted", "inconclusive" or "not applicable" for a prediction; None for
    a description; "holds" or "violated" for a consistency check. ``effect`` and ``interval``
    are as printed (the interval at ``confidence``, Holm-adjusted for a prediction);
    ``estimate``, ``se`` and ``df`` are on the analysis scale (``scale`` "log": the printed
    effect is exp(x) − 1 or exp(x)); ``n`` replicates of kind ``replicate``; ``minimum`` is
    the margin (the minimum relevant effect) on the analysis scale; ``p_value`` is the
    one-sided p of the verdict's deciding test and ``p_adjusted`` its Holm adjustment;
    ``borderline``; ``prediction_error`` the replicate prediction error t √2 se;
    ``seeds_needed`` (per condition, or per level of a trend) for 80 % power to detect the
    margin at the observed spread, with ``seeds`` the number there is now; ``note`` why a
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
    p_value: float | None = None
    p_adjusted: float | None = None
    borderline: bool = False
    prediction_error: float | None = None
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
    #: for a claim tested seed by seed (``Claim.per_seed``): the seeds whose own effect meets
    #: the claim (beyond the margin in the expected direction; for an agreement within it) and
    #: the seeds
    per_seed_met: tuple[int, int] | None = None

    @property
    def spec(self) -> Claim | Identity:
        return CLAIMS[self.claim]

    @property
    def margin(self) -> float | None:
        return self.minimum

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
                short = "needs " + ", ".join(c.requires for c in unmet)
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
    """The one-sided p-value of the test that would decide the draft's verdict: the smaller of
    the tests for *supported* and for *contradicted* (at most one of them can be small)."""
    est, claim = d.estimate, d.claim
    assert est.effect is not None and est.se is not None and claim.expect is not None
    assert claim.margin is not None
    return min(
        margin_p_values(est.effect, est.se, est.df, expect=claim.expect, minimum=claim.margin)
    )


def _per_seed_met(claim: Claim, estimate: Estimate | None) -> tuple[int, int] | None:
    """How many seeds alone meet a per-seed claim, of how many (None for other claims)."""
    if not claim.per_seed or claim.kind != "prediction" or estimate is None:
        return None
    if not estimate.per_seed:
        return None
    return sum(claim.meets(e) for e in estimate.per_seed), len(estimate.per_seed)


def _per_seed_text(claim: Claim, met: tuple[int, int]) -> str:
    """'each seed alone: 7 of 10 beyond the margin'."""
    where = "within ± the margin" if claim.expect == "agree" else "beyond the margin"
    return f"each seed alone: {met[0]} of {met[1]} {where}"


def _common(claim: Claim, unit: Unit, estimate: Estimate | None) -> dict:
    return {
        "per_seed_met": _per_seed_met(claim, estimate),
        "claim": claim.key,
        "subject": unit.subject,
        "kind": claim.kind,
        "runs": tuple(r.label for r in unit.runs),
        "scale": "log" if claim.shows in ("relative", "factor") else "linear",
        "minimum": claim.margin,
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


def _decided(d: _Draft, level: HolmLevel, family: int, figures: Mapping[str, str]) -> Finding:
    """A prediction judged at its Holm level: verdict, borderline, power."""
    claim, est = d.claim, d.estimate
    assert est.effect is not None and est.se is not None
    assert claim.expect is not None and claim.margin is not None
    confidence = 1.0 - 2.0 * level.level
    interval = _interval(est, confidence)
    decided = verdict(est.effect, interval, expect=claim.expect, minimum=claim.margin)
    reach = replicate_error(est.se, est.df)
    border = borderline(interval, expect=claim.expect, minimum=claim.margin, reach=reach)
    p = _deciding_p(d)
    needed = None
    # every verdict with a spread over seeds gives its power figure, a decided one too, so that
    # a reader can size the next study (issue 23: the power figure for every claim)
    if est.power_design and _finite(est.sd):
        assert est.sd is not None
        needed = seeds_needed(
            est.power_design,
            margin=claim.margin,
            sd=est.sd,
            alpha=level.level,
            levels=est.levels,
            agree=claim.expect == "agree",
        )
    notes = [_why(claim, decided, interval, p, level, family)]
    if decided == "inconclusive" or border:
        notes.append(_power_text(est, needed))
    elif needed is not None:
        notes.append(_decided_power_text(est, needed))
    met = _per_seed_met(claim, est)
    if met is not None:
        notes.append(_per_seed_text(claim, met).capitalize() + f" ({claim.margin_text}).")
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
        borderline=border,
        prediction_error=reach,
        seeds_needed=needed,
        note=" ".join(n for n in notes if n),
    )


def _why(
    claim: Claim,
    decided: str,
    interval: tuple[float, float],
    p: float,
    level: HolmLevel,
    family: int,
) -> str:
    """Why the verdict is what it is, in one sentence."""
    margin = claim.margin
    assert margin is not None
    lo, hi = interval
    if decided == "supported":
        return (
            "Supported: the whole interval lies inside ± the margin."
            if claim.expect == "agree"
            else "Supported: the whole interval lies beyond the margin in the expected direction."
        )
    if decided == "contradicted":
        return (
            "Contradicted: the whole interval lies beyond the margin."
            if claim.expect == "agree"
            else "Contradicted: the whole interval lies beyond the margin on the other side."
        )
    if family > 1 and p <= FAMILY_ALPHA:
        return (
            f"Inconclusive after Holm's correction over the {family} findings with a verdict: it "
            f"would be decided at 95 % alone (one-sided p = {p:.3g}), not at its level."
        )
    if claim.expect == "agree":
        return "Inconclusive: the interval reaches both inside and outside ± the margin."
    if -margin < lo and hi < margin:
        return (
            "Inconclusive: the interval lies within ± the margin, so any effect is smaller than "
            "the minimum relevant one (neither side reaches it)."
        )
    if lo < 0 < hi:
        return "Inconclusive: the interval crosses zero."
    return "Inconclusive: the interval does not clear the margin."


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


def _decided_power_text(est: Estimate, needed: int) -> str:
    """The power figure of a verdict that is decided and not borderline: the seeds that detect
    an effect at the margin itself with 80 % power at the observed spread (this effect lies
    well beyond the margin, so fewer seeds decided it): what a study of a smaller effect would
    need."""
    per = {"one_sample": "", "two_sample": " per condition", "slope": " per level"}[
        est.power_design or "one_sample"
    ]
    return (
        "Power: an effect at the margin itself would need "
        f"{needed} seeds{per} for 80 % power at the observed spread (here {est.seeds or 0})."
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


# ---- rendering ---------------------------------------------------------------------------

_SHORT_WORK = {
    "paper": "Lee et al. 2025",
    "rebuttal": "Lee et al. 2025, rebuttal",
    "SSEM": "SSEM paper",
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


def _power_cell(f: Finding) -> str:
    if f.seeds_needed is None:
        if f.verdict == "inconclusive" or f.borderline:
            return "> 10,000" if "10,000" in f.note else "unknown"
        return MISSING
    add = f.seeds_to_add
    if f.verdict in ("supported", "contradicted") and not f.borderline and add:
        # the figure is for an effect at the margin; this one was decided with fewer
        return f"{f.seeds_needed} (decided with {f.seeds})"
    return f"{f.seeds_needed}" + (f" (add {add})" if add else " (enough)")


def _subject_text(f: Finding) -> str:
    """A subject in a summary line, with its borderline mark and power figure."""
    marks = []
    if f.borderline:
        marks.append("borderline")
    if f.seeds_needed is not None:
        marks.append(f"{f.seeds_needed} seeds for 80 % power at the margin")
    return f.subject + (f" ({'; '.join(marks)})" if marks else "")


def summary_lines(findings: Sequence[Finding]) -> list[str]:
    """One sentence per entry: its verdict(s) with the runs they cover, its source; the
    not-applicable units with the reason; one sentence for the consistency checks."""
    lines = []
    for key, claim in CLAIMS.items():
        mine = [f for f in findings if f.claim == key]
        if not mine or not isinstance(claim, Claim):
            continue
        head = f"{claim.statement} ({_cite(claim)})"
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
            power = (
                f"; {f.seeds_needed} seeds for 80 % power at the margin"
                if f.seeds_needed is not None
                else ""
            )
            seeds = (
                f"; {_per_seed_text(claim, f.per_seed_met)}" if f.per_seed_met is not None else ""
            )
            parts.append(
                f"{f.verdict}{' (borderline)' if f.borderline else ''}; {claim.effect} "
                f"{_effect_text(f, claim)} {_interval_text(f, claim)} ({f.subject}, "
                f"{_count(f.n, f.replicate)}{power}{seeds})"
            )
        elif tested:
            for decided in ("supported", "contradicted", "inconclusive"):
                subjects = [_subject_text(f) for f in tested if f.verdict == decided]
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
    return Paragraph(
        "The claims of the sources that apply to these runs, from the registry in "
        "docs/claims.md, computed from the results. Sources: "
        + "; ".join(f"{_SHORT_WORK[k]} = {WORKS[k]}" for k in ("paper", "rebuttal", "SSEM"))
        + ". A verdict is supported when the whole interval lies beyond the minimum relevant "
        "effect (the margin) in the expected direction, contradicted when it lies on the other "
        "side of zero by at least the margin (for an agreement: within ± the margin, or "
        "entirely beyond it), inconclusive otherwise, and not applicable outside the source's "
        "scope or when the data fail the claim's precondition. "
        + (
            f"Multiplicity: the {family} findings with a verdict are one family; Holm's "
            "step-down at a family-wise 5 % sets each interval's level (printed with it). "
            if family > 1
            else "Each interval is at 95 %. "
        )
        + "Borderline: moving the interval by up to the replicate prediction error t·√2·se (the"
        " 95 % range of a new, independent replicate study's estimate) would change the "
        "verdict. Inconclusive and borderline verdicts give the seeds that would give 80 % "
        "power to detect the margin at the observed spread (noncentral t)"
        + (
            "; so do the decided ones with a spread over seeds (what a study of an effect at "
            "the margin would need)."
            if any(_decided_with_power(f) for f in findings)
            else "."
        )
    )


def _decided_with_power(f: Finding) -> bool:
    return (
        f.verdict in ("supported", "contradicted")
        and not f.borderline
        and (f.seeds_needed is not None)
    )


def findings_blocks(findings: Sequence[Finding], figures: Sequence = ()) -> list:
    """The Findings section: how verdicts are made, one summary sentence per claim, a table
    per prediction (a row per subject) with the figures that carry it, the not-applicable
    units, the descriptions and the consistency checks."""
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
    for line in summary_lines(findings):
        blocks.append(Paragraph("• " + line))
    placed: set[str] = set()
    for key, claim in CLAIMS.items():
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
                "yes" if f.borderline else "no",
                _power_cell(f),
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
                    "borderline",
                    "seeds for 80 % power",
                    "how / why",
                ],
                rows=rows,
                caption=(
                    f"{claim.statement} ({claim.source.full}). At its scope: {claim.at_scope}. "
                    f"Effect: {claim.effect}; expected: {claim.expect}; minimum relevant "
                    f"effect {claim.margin_text} ({claim.margin_why})."
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
