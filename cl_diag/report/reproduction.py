"""Reproduced or not: an original study's results against a re-run's, number by number and
finding by finding (``cl-diag reproduce``; docs/reproducibility.md).

Each quantity is **exact** (the same bits, what an equal environment fingerprint promises),
**within noise** (no more different than a re-run could make it) or **differs**. The noise is
the replicate prediction interval |e1 − e2| ≤ t·√(se1² + se2²), with se from:

* **a run of a seed group**: training amplifies last-bit differences, so a re-run elsewhere is
  a new replicate; s is the between-seed standard deviation pooled over the group's *other*
  seeds (so a run that moved does not widen its own tolerance) and the study's other groups
  unless the F test finds this group wider (:func:`_replicate_error`), se = √2·s; a statistic
  on a grid (accuracy on N images) has at least the spread of its rounding, step/√12;
* **a seed group's mean**: se = √(s1²/k1 + s2²/k2), Welch's degrees of freedom;
* **a run without replicates**: the statistic's own sampling error over its n images
  (:func:`sampling_error`), t the normal quantile;
* **a finding's effect**: the evaluator's se and df of both findings (:func:`finding_error`).

A re-run that promises the original's bytes has no noise: anything not exact differs.
Elsewhere a number *differs* only when its p-value survives Holm's correction over every
number compared (family-wise 5 %); the share outside its unadjusted 95 % interval is reported
beside. A finding also differs when its verdict changed, unless the verdict was *fragile*
(:data:`cl_diag.report.claims.inference.FRAGILE`) on both sides; a change to or from *not
applicable*, or of a consistency check, always differs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cl_diag.measurement.stats import (
    CONFIDENCE,
    pair_mean_se,
    pair_var_se,
    rounding_sd,
    welch_df,
    wilson_interval,
    z_value,
)
from cl_diag.report.claims import CLAIMS, Finding
from cl_diag.report.claims.inference import agreement, holm_levels, spread_exceeds
from cl_diag.report.comparison import LAYER_METRICS, Comparison
from cl_diag.report.document import (
    MISSING,
    Document,
    Heading,
    Note,
    Paragraph,
    Table,
    fmt,
)
from cl_diag.report.environment import GUARANTEE, distinct_environments, fingerprint_table
from cl_diag.report.metrics import (
    MODALITY_GAP_METRICS,
    PROBE_METRICS,
    Metric,
    retrieval_metric,
    reverse_retrieval_metric,
)
from cl_diag.report.probe_section import test_images
from cl_diag.report.runs import run_labels, seed_groups
from cl_diag.result import RETRIEVAL_KS, Environment, Layer, Result
from cl_diag.vocabulary import PairType

__all__ = [
    "DIFFERS",
    "EXACT",
    "FINDING_COLUMNS",
    "REPRODUCTION_SCHEMA",
    "STATUSES",
    "WITHIN",
    "Check",
    "Reproduction",
    "check_reproduction",
    "finding_error",
    "reproduction_document",
    "reproduction_files",
    "reproduction_record",
    "sampling_error",
]

EXACT, WITHIN, DIFFERS = "exact", "within noise", "differs"
STATUSES = (EXACT, WITHIN, DIFFERS)
#: reproduction.json's schema
REPRODUCTION_SCHEMA = "cl-diag/reproduction/2"
#: family-wise level of the Holm correction that decides "differs" (two-sided p-values)
FAMILY_ALPHA = 1 - CONFIDENCE


@dataclass(frozen=True)
class Check:
    """One quantity of the original against the re-run: ``kind`` "run" (a statistic of one
    run), "seed mean" (a seed group's mean) or "finding" (a finding's effect); ``subject`` the
    run, group or finding it belongs to; ``basis`` how ``se`` was made. ``verdicts``,
    ``borderline`` and ``p_adjusted`` (the findings' Holm-adjusted p-values) as (original,
    re-run) for a finding; ``fragile`` the findings' fragile flags (original, re-run)."""

    kind: str
    subject: str
    quantity: str
    original: float | None
    reproduction: float | None
    status: str
    se: float | None = None
    df: float | None = None
    tolerance: float | None = None
    p_value: float | None = None
    basis: str = ""
    note: str = ""
    verdicts: tuple[str | None, str | None] | None = None
    fragile: tuple[bool, bool] | None = None
    p_adjusted: tuple[float | None, float | None] | None = None

    @property
    def difference(self) -> float | None:
        if self.original is None or self.reproduction is None:
            return None
        return self.reproduction - self.original

    @property
    def outside(self) -> bool:
        """Outside the unadjusted 95 % prediction interval."""
        d = self.difference
        return d is not None and self.tolerance is not None and abs(d) > self.tolerance


@dataclass(frozen=True)
class Reproduction:
    """The checks of one reproduction, the fingerprints on both sides and the runs re-run."""

    original: str
    reproduction: str
    runs: list[str]
    rerun: list[int]
    checks: list[Check]
    original_environments: list[tuple[str, Environment | None]]
    reproduction_environments: list[tuple[str, Environment | None]]
    notes: list[str] = field(default_factory=list)
    weights_equal: int = 0

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(1 for c in self.checks if c.status == s) for s in STATUSES}

    @property
    def outcome(self) -> str:
        """exact, within noise or differs: the worst status of any check."""
        counts = self.counts
        if counts[DIFFERS]:
            return DIFFERS
        return WITHIN if counts[WITHIN] else EXACT

    @property
    def reproduced(self) -> bool:
        return self.outcome != DIFFERS

    @property
    def spot_check(self) -> bool:
        return len(self.rerun) < len(self.runs)


# --------------------------------------------------------------------------- sampling errors


def _wilson_se(p: float, n: float) -> float:
    """The Wilson interval's half-width over z: a proportion's standard error that stays
    positive at 0 and 1."""
    lo, hi = wilson_interval(p * n, n)
    return (hi - lo) / (2 * z_value())


def sampling_error(metric: Metric, result: Result, layer: str | None) -> tuple[float, str]:
    """(standard error, basis) of ``metric`` of one analysis from the sampling of its
    analysed images (``layer`` None: a probe metric). Formulas where cl-diag has them (the
    U-statistic bounds of cl_diag.measurement.stats; Wilson for a ratio or accuracy); else
    the value's magnitude / √n, the order of any sampling error of n images."""
    value = _read(metric, result, layer)
    magnitude = abs(value) if value is not None else 0.0
    if layer is None:
        probes = result.probes
        test = (probes.splits or {}).get("test") if probes is not None else None
        n = test.images if test is not None else None
        if metric.k is not None:  # retrieval over the analysed images of a layer
            measured = next(iter(result.layers.values()), None)
            n = measured.n if measured is not None else n
        if not n:
            return math.inf, "no sample size recorded"
        if metric.accuracy and value is not None:
            return _wilson_se(value, n), f"Wilson, {n} test images"
        return magnitude / math.sqrt(n), f"magnitude/√n, n = {n}"
    measured = result.layers[layer]
    n = measured.n
    pairs = measured.pairs
    key = metric.key
    for kind in PairType:
        stats = pairs.get(kind)
        if stats is None or not key.startswith(kind + "_"):
            continue
        statistic = key[len(kind) + 1 :]
        var = stats.var if stats.var is not None else 0.0
        mean = stats.mean if stats.mean is not None else 0.0
        largest = max(abs(stats.min or 0.0), abs(stats.max or 0.0)) or 1.0
        if statistic == "mean":
            if kind is PairType.POSITIVE:  # n independent pairs
                return math.sqrt(max(var, 0.0) / n), f"mean of {n} positives"
            return pair_mean_se(var, n), f"U-statistic bound, n = {n}"
        if statistic in ("var", "std"):
            se = pair_var_se(mean, var, largest, n)
            if statistic == "std":
                std = math.sqrt(max(var, 0.0))
                se = se / (2 * std) if std > 0 else math.inf
            return se, f"U-statistic bound, n = {n}"
        if statistic == "excessive_ratio" and value is not None:
            return _wilson_se(value, n / 2), f"Wilson, n/2 = {n / 2:g} effective pairs"
    positive = pairs.get(PairType.POSITIVE)
    negative = pairs.get(PairType.CROSS_VIEW_NEGATIVE)
    if key == "alignment" and positive is not None and positive.var is not None:
        # E||u − v||² = 2 − 2 E[s_pos]
        return 2 * math.sqrt(max(positive.var, 0.0) / n), f"2 × SE of the positive mean, n = {n}"
    if key == "alignment_ceiling" and negative is not None and negative.var is not None:
        return pair_mean_se(negative.var, n), f"SE of the negative mean, n = {n}"
    if key.startswith("uniformity_") and value is not None:
        # log μ, μ = E exp(−2||x_i − x_j||²) ∈ (0, 1]: Var(h) ≤ μ(1 − μ), SE(μ) ≤ √(2 Var/n)
        mu = math.exp(value)
        return math.sqrt(2 * mu * (1 - mu) / n) / mu, f"U-statistic bound, n = {n}"
    return magnitude / math.sqrt(n), f"magnitude/√n, n = {n}"


# --------------------------------------------------------------------------- findings


def finding_error(finding: Finding) -> tuple[float, float, float] | None:
    """(estimate, se, df) of a finding's effect on the claim's analysis scale (a log for a
    ratio or a factor, :attr:`Finding.scale`), as the claims evaluator made them: t with the
    design's degrees of freedom over seeds or runs, the normal quantile (df = inf) for the
    sampling of one run's analysed images. None without a standard error (one run per
    condition, a consistency check)."""
    if finding.estimate is None or finding.se is None or not math.isfinite(finding.se):
        return None
    df = finding.df if finding.df is not None and not math.isnan(finding.df) else math.inf
    return finding.estimate, finding.se, df


# --------------------------------------------------------------------------- the checks


def _read(metric: Metric, result: Result, layer: str | None) -> float | None:
    if layer is None:
        value = None if result.probes is None else metric.read(result.probes)
    else:
        measured: Layer | None = result.layers.get(layer)
        value = None if measured is None else metric.read(measured)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _quantities(results: Sequence[Result]) -> list[tuple[str, Metric, str | None]]:
    """(title, metric, layer) of every number the reports print for these runs: each layer's
    pair, geometry and collapse statistics and, for two encoders' views, its modality gap, then
    the probes (retrieval per layer, and back from view 2 where embeddings measured it)."""
    layers: list[str] = []
    for result in results:
        layers += [name for name in result.layers if name not in layers]
    out: list[tuple[str, Metric, str | None]] = [
        (f"{layer} / {m.title}", m, layer)
        for layer in layers
        for m in (*LAYER_METRICS, *MODALITY_GAP_METRICS)
    ]
    probes = list(PROBE_METRICS)
    probes += [
        make(layer, k)
        for layer in layers
        for make in (retrieval_metric, reverse_retrieval_metric)
        for k in RETRIEVAL_KS
    ]
    out += [(m.title, m, None) for m in probes]
    return out


def _rounding_sd(metric: Metric, results: Sequence[Result], layer: str | None) -> float:
    """The smallest spread a statistic counted on a grid can show: an accuracy moves in steps
    of 1/N test images (Recall@k: of the analysed images), an excessive ratio in steps of
    1/pairs. Its value is a continuous quantity rounded to the grid, and the rounding alone has
    the standard deviation step/√12 (:func:`cl_diag.measurement.stats.rounding_sd`, the floor
    the findings' spreads take too): the floor under a between-seed sd estimated from few seeds
    that all landed on one grid point. 0 for a continuous statistic."""
    step = 0.0
    for result in results:
        if layer is None and metric.accuracy and result.probes is not None:
            if metric.k is not None:
                measured = next(iter(result.layers.values()), None)
                n = measured.n if measured is not None else None
            else:
                test = (result.probes.splits or {}).get("test")
                n = test.images if test is not None else None
            step = max(step, 1.0 / n if n else 0.0)
        elif layer is not None and metric.key.endswith("excessive_ratio"):
            kind = metric.key.removesuffix("_excessive_ratio")
            stats = result.layers[layer].pairs.get(kind) if layer in result.layers else None
            count = stats.count if stats is not None else None
            step = max(step, 1.0 / count if count else 0.0)
    return rounding_sd(step)


def _binomial_sd(metric: Metric, pair: tuple[Result, Result], layer: str | None) -> float:
    """The sampling sd of an accuracy on N test images at the pair's mean accuracy p,
    √(p(1 − p)/N): the spread the reports' Wilson intervals give a test accuracy. Near a
    bound (a top-5 of 0.99-1.00) the seeds of a study pile up on a few grid points and their
    pooled sd understates how far one retrained encoder can move (issue 32: a faithful re-run
    of a top-5 at 0.991 gave 1.000, 2.4 pooled-sd tolerances away); this floor keeps such a
    re-run within noise while a shift of many of its sds is still caught. 0 for every other
    statistic (and for Recall@k, whose images are the analysed ones, not a test split)."""
    if layer is not None or not metric.accuracy or metric.k is not None:
        return 0.0
    values = [v for r in pair if (v := _read(metric, r, layer)) is not None]
    n = next((k for r in pair if (k := test_images(r.probes))), None)
    if not values or not n:
        return 0.0
    p = sum(values) / len(values)
    return math.sqrt(max(p * (1.0 - p), 0.0) / n)


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


def _pooled(samples: Sequence[Sequence[float]]) -> tuple[float, int] | None:
    """(pooled variance, degrees of freedom) of several samples of one quantity (each with two
    or more values contributes its sum of squares about its own mean); None without any."""
    ss, df = 0.0, 0
    for sample in samples:
        if len(sample) >= 2:
            mean = math.fsum(sample) / len(sample)
            ss += math.fsum((x - mean) ** 2 for x in sample)
            df += len(sample) - 1
    return None if df == 0 else (ss / df, df)


def _pending(
    kind: str,
    subject: str,
    quantity: str,
    original: float | None,
    reproduction: float | None,
    se: float | None,
    df: float,
    basis: str,
    **more: Any,
) -> Check:
    """A check before the correction: exact, missing on one side, or its p-value."""
    if _same(original, reproduction):
        return Check(kind, subject, quantity, original, reproduction, EXACT, basis=basis, **more)
    if original is None or reproduction is None or se is None:
        note = "missing on one side" if (original is None) != (reproduction is None) else ""
        note = note or "no standard error"
        return Check(
            kind, subject, quantity, original, reproduction, DIFFERS, basis=basis, note=note, **more
        )
    if not math.isfinite(se):  # too few analysed items for any sampling error: nothing to test
        note = "no sampling error (too few items): not tested"
        return Check(
            kind, subject, quantity, original, reproduction, WITHIN, basis=basis, note=note, **more
        )
    test = agreement(original, reproduction, se, df)
    note = "no spread among the replicates" if se == 0 else ""
    return Check(
        kind,
        subject,
        quantity,
        original,
        reproduction,
        WITHIN,  # until the correction says otherwise
        se=test.se,
        df=test.df,
        tolerance=test.tolerance,
        p_value=test.p_value,
        basis=basis,
        note=note,
        **more,
    )


def _sides(
    metric: Metric,
    layer: str | None,
    members: Sequence[int],
    original: Sequence[Result],
    reproduced: Sequence[Result | None],
) -> list[list[float]]:
    """A group's values of one quantity: the originals' and the re-runs' (two samples)."""
    return [
        [v for j in members if (v := _read(metric, original[j], layer)) is not None],
        [
            v
            for j in members
            if (r := reproduced[j]) is not None and (v := _read(metric, r, layer)) is not None
        ],
    ]


def _replicate_error(
    metric: Metric,
    layer: str | None,
    i: int,
    members: tuple[int, ...],
    groups: list[tuple[int, ...]],
    original: Sequence[Result],
    reproduced: Sequence[Result | None],
    pair: tuple[Result, Result],
) -> tuple[float | None, float, str]:
    """(se, df, basis) of the difference between run ``i`` and its re-run, from the spread
    between seeds: the group's other seeds (both sides pooled) with every other seed group of the
    study, for the degrees of freedom a few seeds lack (three seeds alone give df 2, at which no
    multiplicity correction catches a real shift). A group whose spread exceeds the others' (F
    test at 5 %, :func:`~cl_diag.report.claims.inference.spread_exceeds`) keeps its own."""
    others = [j for j in members if j != i]
    own_sides = _sides(metric, layer, others, original, reproduced)
    own = _pooled(own_sides)
    own_text = f"the {len(others)} other seeds"
    if own is None:  # two seeds: pool both, this run included
        own_sides = _sides(metric, layer, members, original, reproduced)
        own = _pooled(own_sides)
        own_text = f"the group's {len(members)} seeds"
    if own is None:
        return None, math.inf, ""
    rest_sides: list[list[float]] = []
    for group in groups:
        if group != members:
            rest_sides += _sides(metric, layer, group, original, reproduced)
    rest = _pooled(rest_sides)
    variance, df = own
    basis = f"between-seed sd of {own_text}, both sides pooled (df {df})"
    if rest is not None and not spread_exceeds(variance, df, rest[0], rest[1]):
        variance, df = _pooled(own_sides + rest_sides) or own
        basis = (
            f"between-seed sd of {own_text} pooled with the study's other seed groups, both "
            f"sides (df {df})"
        )
    rounding, binomial = _rounding_sd(metric, pair, layer), _binomial_sd(metric, pair, layer)
    sd = max(math.sqrt(variance), rounding, binomial)
    basis += ", √2 for one re-run"
    if sd == binomial > 0:
        basis += "; at least an accuracy's binomial sd on its test images"
    elif sd == rounding > 0:
        basis += "; at least the rounding of its grid"
    return math.sqrt(2) * sd, float(df), basis


def _run_checks(
    labels: list[str],
    original: Sequence[Result],
    reproduced: Sequence[Result | None],
    groups: list[tuple[int, ...]],
) -> list[Check]:
    quantities = _quantities(original)
    group_of = {i: members for members in groups for i in members}
    checks: list[Check] = []
    for i, (old, new) in enumerate(zip(original, reproduced, strict=True)):
        if new is None:
            continue
        members = group_of.get(i, ())
        for title, metric, layer in quantities:
            a, b = _read(metric, old, layer), _read(metric, new, layer)
            if a is None and b is None:
                continue
            se, df, basis = None, math.inf, ""
            if members:
                se, df, basis = _replicate_error(
                    metric, layer, i, members, groups, original, reproduced, (old, new)
                )
            if se is None:
                se1, basis = sampling_error(metric, old, layer)
                se2, _ = sampling_error(metric, new, layer)
                se, df = math.hypot(se1, se2), math.inf
                basis = f"sampling error of the analysed images ({basis})"
            checks.append(_pending("run", labels[i], title, a, b, se, df, basis))
    return checks


def _group_checks(
    labels: list[str],
    group_labels: list[str],
    original: Sequence[Result],
    reproduced: Sequence[Result | None],
    groups: list[tuple[int, ...]],
) -> list[Check]:
    """The means over each seed group's seeds, original against re-run (when every seed of
    the group was re-run)."""
    import statistics

    checks: list[Check] = []
    for label, members in zip(group_labels, groups, strict=True):
        if any(reproduced[j] is None for j in members):
            continue
        for title, metric, layer in _quantities(original):
            old = [_read(metric, original[j], layer) for j in members]
            new = [_read(metric, r, layer) for j in members if (r := reproduced[j]) is not None]
            if all(v is None for v in old + new):
                continue
            if any(v is None for v in old + new):
                checks.append(
                    Check("seed mean", label, title, None, None, DIFFERS, note="missing in a run")
                )
                continue
            a = [float(v) for v in old if v is not None]
            b = [float(v) for v in new if v is not None]
            floor = _rounding_sd(metric, [original[j] for j in members], layer)
            se1 = max(statistics.stdev(a), floor) / math.sqrt(len(a))
            se2 = max(statistics.stdev(b), floor) / math.sqrt(len(b))
            df = welch_df(se1, len(a) - 1, se2, len(b) - 1)
            checks.append(
                _pending(
                    "seed mean",
                    label,
                    title,
                    math.fsum(a) / len(a),
                    math.fsum(b) / len(b),
                    math.hypot(se1, se2),
                    df,
                    f"means of {len(a)} and {len(b)} seeds, Welch",
                )
            )
    return checks


def _finding_checks(original: list[Finding], reproduced: list[Finding]) -> list[Check]:
    def key(f: Finding) -> tuple[str, str]:
        return (f.claim, f.subject)

    new_of = {key(f): f for f in reproduced}
    checks: list[Check] = []
    for old in original:
        title = CLAIMS[old.claim].title
        new = new_of.pop(key(old), None)
        if new is None:
            checks.append(
                Check("finding", old.subject, title, old.effect, None, DIFFERS, note="not found")
            )
            continue
        flags = (old.fragile, new.fragile)
        verdicts = (old.verdict, new.verdict)
        error_old, error_new = finding_error(old), finding_error(new)
        check = Check(
            "finding",
            old.subject,
            title,
            old.effect,
            new.effect,
            EXACT,
            verdicts=verdicts,
            fragile=flags,
            p_adjusted=(old.p_adjusted, new.p_adjusted),
        )
        if _same(old.effect, new.effect) and old.interval == new.interval:
            pass
        elif error_old is None or error_new is None:
            check = replace(
                check,
                status=WITHIN,
                basis="no standard error",
                note="effect not tested (no standard error)",
            )
        else:
            e1, se1, df1 = error_old
            e2, se2, df2 = error_new
            df = welch_df(se1, df1, se2, df2)
            test = agreement(e1, e2, math.hypot(se1, se2), df)
            check = replace(
                check,
                status=WITHIN,
                se=test.se,
                df=test.df,
                tolerance=test.tolerance,
                p_value=test.p_value,
                basis=(
                    "the findings' standard errors, on the log scale"
                    if old.scale == "log"
                    else "the findings' standard errors"
                ),
            )
        if verdicts[0] != verdicts[1]:
            explained = all(flags)
            note = f"verdict {verdicts[0]} → {verdicts[1]}: " + (
                "fragile on both sides, a re-run can change it"
                if explained
                else "a changed verdict (not fragile on both sides)"
            )
            check = replace(
                check,
                # a changed verdict is never exact, even where the numbers are
                status=DIFFERS
                if not explained
                else (WITHIN if check.status == EXACT else check.status),
                note=(check.note + "; " if check.note else "") + note,
            )
        checks.append(check)
    for new in new_of.values():
        checks.append(
            Check(
                "finding",
                new.subject,
                CLAIMS[new.claim].title,
                None,
                new.effect,
                DIFFERS,
                note="only in the re-run",
            )
        )
    return checks


def _correct(checks: list[Check]) -> list[Check]:
    """Holm over every tested check: a significant one differs, the others are within noise."""
    tested = [i for i, c in enumerate(checks) if c.status == WITHIN and c.p_value is not None]
    levels = holm_levels([checks[i].p_value or 0.0 for i in tested], FAMILY_ALPHA)
    out = list(checks)
    for i, level in zip(tested, levels, strict=True):
        if level.rejected:
            out[i] = replace(out[i], status=DIFFERS)
    return out


def _no_noise(check: Check) -> Check:
    """A check of a re-run that promises the original's bytes: any difference differs."""
    why = "not exact where equal weights or fingerprints promise the same bytes"
    return replace(check, status=DIFFERS, note=f"{check.note}; {why}" if check.note else why)


def _same_environment(old: Result, new: Result) -> bool:
    """Both stages under equal fingerprints (a stage the original did not record is ignored;
    an analysis without a fingerprint is never called equal)."""
    if old.environment is None or old.environment.differences(new.environment):
        return False
    trained = old.source.environment
    return trained is None or not trained.differences(new.source.environment)


def _spot_order(n: int, groups: list[tuple[int, ...]]) -> list[int]:
    """The runs in the order a spot check takes them: the first seed of every configuration
    (seed group or single run, in run order), then every second seed, and so on."""
    first = {members[0]: members for members in groups}
    grouped = {i for members in groups for i in members}
    units = [first.get(i, (i,)) for i in range(n) if i in first or i not in grouped]
    order: list[int] = []
    for depth in range(max((len(u) for u in units), default=0)):
        order += [u[depth] for u in units if depth < len(u)]
    return order


def spot_check_runs(original: Sequence[tuple[str, Result]], k: int) -> list[int]:
    """The indices of the ``k`` runs a spot check re-runs (:func:`_spot_order`), in run order."""
    groups = [g.members for g in seed_groups(list(original))]
    return sorted(_spot_order(len(original), groups)[:k])


def check_reproduction(
    original: Sequence[tuple[str, Result]],
    reproduced: Sequence[Result | None],
    *,
    original_name: str = "original",
    reproduction_name: str = "reproduction",
) -> Reproduction:
    """Compare the ``original`` runs ((name, result), in one order) with ``reproduced`` (the
    re-run of each, None where a spot check did not re-run it): every statistic of every
    re-run run, each seed group's means and every finding when every run was re-run. See the
    module docstring for the statuses and tolerances."""
    results = [r for _, r in original]
    labels = run_labels(list(original))
    groups_found = seed_groups(list(original))
    groups = [g.members for g in groups_found]
    checks = _run_checks(labels, results, reproduced, groups)
    notes: list[str] = []
    rerun = [i for i, r in enumerate(reproduced) if r is not None]
    complete = [r for r in reproduced if r is not None]
    if len(complete) == len(results):
        checks += _group_checks(
            labels, [g.label for g in groups_found], results, reproduced, groups
        )
        old_findings = Comparison(list(original)).findings
        new_findings = Comparison(
            [(name, r) for (name, _), r in zip(original, complete, strict=True)]
        ).findings
        checks += _finding_checks(old_findings, new_findings)
    else:
        notes.append(
            f"Spot check: {len(rerun)} of {len(results)} runs re-run (--runs); their statistics "
            "are compared, against the other seeds' spread in the original; the seed means and "
            "the findings need every run and are not compared."
        )
    exact_weights = [
        i
        for i in rerun
        if results[i].source.weights_sha256 is not None
        and results[i].source.weights_sha256 == (reproduced[i] or results[i]).source.weights_sha256
    ]
    same_environment = [
        i
        for i in rerun
        if (new := reproduced[i]) is not None and _same_environment(results[i], new)
    ]
    promised = {labels[i] for i in {*exact_weights, *same_environment}}
    groups_promised = {
        g.label for g in groups_found if all(labels[j] in promised for j in g.members)
    }
    every_run_promised = len(complete) == len(results) and len(promised) == len(results)
    checks = [
        _no_noise(c)
        if c.status != EXACT
        and (
            (c.kind == "run" and c.subject in promised)
            or (c.kind == "seed mean" and c.subject in groups_promised)
            or (c.kind == "finding" and every_run_promised)
        )
        else c
        for c in _correct(checks)
    ]
    broken = {c.subject for c in checks if c.kind == "run" and c.status != EXACT} & promised
    if broken:
        notes.append(
            "The original's exact weights or equal fingerprints promise equal bytes, yet these "
            "runs differ: "
            + ", ".join(sorted(broken))
            + ". Every difference of theirs differs (no noise is possible); if the files were not "
            "edited, something the fingerprint does not record changed: please report it."
        )
    weights = len(exact_weights)
    return Reproduction(
        original=original_name,
        reproduction=reproduction_name,
        runs=labels,
        rerun=rerun,
        checks=checks,
        original_environments=distinct_environments([results[i] for i in rerun]),
        reproduction_environments=distinct_environments(complete),
        notes=notes,
        weights_equal=weights,
    )


# --------------------------------------------------------------------------- rendering


def _num(value: float | None) -> str:
    return MISSING if value is None else fmt(value)


def _p(value: float | None) -> str:
    return MISSING if value is None else f"{value:.3g}"


def run_summary(rep: Reproduction) -> list[list[str]]:
    """Per re-run run: its statistics by status, and the farthest one (|Δ| / tolerance)."""
    rows = []
    for i in rep.rerun:
        label = rep.runs[i]
        mine = [c for c in rep.checks if c.kind == "run" and c.subject == label]
        counts = [str(sum(1 for c in mine if c.status == s)) for s in STATUSES]
        worst = max(
            (c for c in mine if c.tolerance and c.difference is not None),
            key=lambda c: abs(c.difference or 0.0) / (c.tolerance or 1.0),
            default=None,
        )
        far = (
            MISSING
            if worst is None
            else f"{worst.quantity}: {abs(worst.difference or 0.0) / (worst.tolerance or 1.0):.2g}×"
        )
        rows.append([label, *counts, far])
    return rows


def finding_rows(rep: Reproduction) -> list[list[str]]:
    rows = []
    for c in rep.checks:
        if c.kind != "finding":
            continue
        verdicts = (
            MISSING
            if c.verdicts is None
            else " → ".join(dict.fromkeys(v or "no verdict" for v in c.verdicts))
        )
        flags = (
            ""
            if c.fragile is None
            else ", ".join(
                side for side, flag in zip(("original", "re-run"), c.fragile, strict=True) if flag
            )
        )
        holm = MISSING if c.p_adjusted is None else " → ".join(map(_p, c.p_adjusted))
        rows.append(
            [
                f"{c.quantity} ({c.subject})",
                _num(c.original),
                _num(c.reproduction),
                _num(c.tolerance) + (" (on the log scale)" if "log scale" in c.basis else ""),
                verdicts,
                holm,
                flags or "no",
                c.status,
            ]
        )
    return rows


def outcome_text(rep: Reproduction) -> str:
    counts = rep.counts
    total = sum(counts.values())
    tested = [c for c in rep.checks if c.tolerance is not None]
    outside = sum(1 for c in tested if c.outside)
    what = (
        f"{len(rep.rerun)} of {len(rep.runs)} runs re-run (a spot check)"
        if rep.spot_check
        else f"all {len(rep.runs)} runs re-run"
    )
    verdict_text = {
        EXACT: "reproduced exactly",
        WITHIN: "reproduced within noise",
        DIFFERS: "not reproduced: something differs beyond noise",
    }[rep.outcome]
    text = (
        f"{verdict_text.capitalize()}: {what}; of {total} numbers and findings compared "
        f"{counts[EXACT]} are exact, {counts[WITHIN]} within noise and {counts[DIFFERS]} differ."
    )
    if tested:
        share = 100 * outside / len(tested)
        text += (
            f" {outside} of the {len(tested)} that are not exact ({share:.1f} %) lie outside"
            " their unadjusted 95 % prediction interval (a faithful re-run leaves "
            "about 5 % there); a number differs only when Holm's correction over all of them "
            "(family-wise 5 %) rejects it."
        )
    if rep.weights_equal:
        text += f" {rep.weights_equal} re-run checkpoint(s) have the original's exact weights."
    return text


_METHOD = (
    "How the tolerances are made: a run of a seed group against its re-run, √2 × the between-seed "
    "sd of the group's other seeds (original and re-run pooled), Student t with the pooled "
    "degrees of freedom; a seed group's mean, √(s1²/k1 + s2²/k2) with Welch's degrees of "
    "freedom; a run without replicates, the sampling error of its analysed images; a finding's "
    "effect, the standard errors the claims evaluator gave both findings, Welch's degrees of "
    "freedom. A re-run with the original's exact weights or equal fingerprints promises the "
    "same bytes: any difference of its numbers differs. A finding whose verdict changed is "
    "explained only when the verdict was fragile on both sides (an independent replicate "
    "study repeats it with a probability below the findings' fragile level). A change to or "
    "from not applicable, or of a consistency check, always differs."
)

#: the columns of the findings table, in the document and on the terminal (one header a cell)
FINDING_COLUMNS = (
    "finding",
    "original effect",
    "re-run effect",
    "tolerance (95 %)",
    "verdict",
    "Holm-adjusted p",
    "fragile",
    "status",
)


def reproduction_document(rep: Reproduction) -> Document:
    """reproduction.md / .html: the outcome, the findings, each run's counts, every number that
    is not exact, and the two sides' fingerprints."""
    blocks: list = [Heading(1, "cl-diag reproduction"), Paragraph(outcome_text(rep))]
    blocks += [Note(note) for note in rep.notes]
    blocks.append(
        Paragraph(f"Original: {rep.original}. Re-run: {rep.reproduction}. {GUARANTEE} {_METHOD}")
    )
    findings = finding_rows(rep)
    if findings:
        blocks += [
            Heading(2, "Findings"),
            Table(
                columns=list(FINDING_COLUMNS),
                rows=findings,
                caption="Each finding of the original against the re-run's.",
            ),
        ]
    blocks += [
        Heading(2, "Runs"),
        Table(
            columns=["run", *STATUSES, "farthest (|Δ| / tolerance)"],
            rows=run_summary(rep),
            caption="Statistics of each re-run run by status.",
        ),
    ]
    numbers = [c for c in rep.checks if c.kind != "finding" and c.status != EXACT]
    if numbers:
        blocks += [
            Heading(2, "Numbers that are not exact"),
            Table(
                columns=[
                    "run or seed group",
                    "quantity",
                    "original",
                    "re-run",
                    "difference",
                    "tolerance (95 %)",
                    "p",
                    "status",
                    "basis",
                ],
                rows=[
                    [
                        c.subject if c.kind == "run" else f"{c.subject} (mean over seeds)",
                        c.quantity,
                        _num(c.original),
                        _num(c.reproduction),
                        _num(c.difference),
                        _num(c.tolerance),
                        _p(c.p_value),
                        c.status,
                        c.basis + (f"; {c.note}" if c.note else ""),
                    ]
                    for c in numbers
                ],
            ),
        ]
    columns = [(f"original: {t}", e) for t, e in rep.original_environments] + [
        (f"re-run: {t}", e) for t, e in rep.reproduction_environments
    ]
    if columns:
        blocks += [
            Heading(2, "Environments"),
            fingerprint_table(columns, caption="The fingerprints of both sides, side by side."),
        ]
    return Document(title="cl-diag reproduction", blocks=blocks)


def reproduction_files(rep: Reproduction) -> list[tuple[str, bytes]]:
    """reproduction.md, reproduction.html and reproduction.json, for the one report writer
    (:func:`cl_diag.report.write_files`)."""
    from cl_diag.io.output import dumps_json
    from cl_diag.report.html import render_html
    from cl_diag.report.markdown import render_markdown

    document = reproduction_document(rep)
    return [
        ("reproduction.md", render_markdown(document).encode("utf-8")),
        ("reproduction.html", render_html(document).encode("utf-8")),
        ("reproduction.json", dumps_json(reproduction_record(rep)).encode("utf-8")),
    ]


def reproduction_record(rep: Reproduction) -> dict[str, Any]:
    """reproduction.json: the outcome, the counts, every check and both sides' fingerprints."""

    def check(c: Check) -> dict[str, Any]:
        return {
            "kind": c.kind,
            "subject": c.subject,
            "quantity": c.quantity,
            "original": c.original,
            "reproduction": c.reproduction,
            "difference": c.difference,
            "se": c.se,
            "df": None if c.df is None or math.isinf(c.df) else c.df,
            "tolerance": c.tolerance,
            "p_value": c.p_value,
            "status": c.status,
            "basis": c.basis,
            "note": c.note,
            "verdicts": None if c.verdicts is None else list(c.verdicts),
            "fragile": None if c.fragile is None else list(c.fragile),
            "p_adjusted": None if c.p_adjusted is None else list(c.p_adjusted),
        }

    def envs(columns: list[tuple[str, Environment | None]]) -> list[dict[str, Any]]:
        return [
            {"covers": t, "environment": None if e is None else e.to_dict()} for t, e in columns
        ]

    return {
        "schema": REPRODUCTION_SCHEMA,
        "original": rep.original,
        "reproduction": rep.reproduction,
        "outcome": rep.outcome,
        "runs": rep.runs,
        "rerun": [rep.runs[i] for i in rep.rerun],
        "spot_check": rep.spot_check,
        "counts": rep.counts,
        "weights_equal": rep.weights_equal,
        "notes": rep.notes,
        "environments": {
            "original": envs(rep.original_environments),
            "reproduction": envs(rep.reproduction_environments),
        },
        "checks": [check(c) for c in rep.checks],
    }
