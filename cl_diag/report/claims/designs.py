"""How a claim compares runs: its design. Each forms *units* (the groups of runs one test is
about) and estimates the claim's effect on a unit: :class:`Paired` (two arms differing in one
option, paired by seed), :class:`Trend` (a slope over a swept option), :class:`PairedTrend`
(the slope of per-seed paired differences), :class:`OneSample` (against a reference value)
and :class:`Threshold` (the break of a flat-then-rising fit against a predicted threshold).
Every effect is on the claim's *analysis scale* (ln for a variance or a spread, so a ratio
becomes a difference); :attr:`Claim.shows` says how it is printed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from cl_diag.measurement.stats import share_interval, summarize, t_quantile, welch_df, welch_se_df
from cl_diag.report.claims.facts import RunData
from cl_diag.report.claims.inference import hinge_fit, hinge_interval, trend
from cl_diag.report.claims.schema import Condition, Estimate, Metric, Unit
from cl_diag.report.document import fmt
from cl_diag.report.runs import SEED_KEY, replicate_key


def _groups(runs: Sequence[RunData], without: Sequence[str]) -> list[tuple[RunData, ...]]:
    """The runs grouped by the one rule of replicates with the options ``without`` left out
    (:func:`cl_diag.report.runs.replicate_key`), in the order of their first run."""
    out: dict[str, list[RunData]] = {}
    for run in runs:
        key = replicate_key(
            run.config, n_ref=run.n_ref, mode=run.mode, layer=run.layer, without=without
        )
        out.setdefault(key, []).append(run)
    return [tuple(g) for g in out.values()]


#: names a group of runs by its config without the given options (the comparison's labels)
Namer = Callable[[Sequence[RunData], tuple[str, ...]], str]


def _values(metric: Metric, runs: Sequence[RunData]) -> list[float] | None:
    """The metric of every run on the analysis scale; None when any is missing."""
    values = [metric.value(r) for r in runs]
    if any(v is None for v in values):
        return None
    return [float(v) for v in values if v is not None]


def _known(metric: Metric, run: RunData) -> float:
    """The metric of a run already checked to have one (:func:`_values`)."""
    value = metric.value(run)
    assert value is not None
    return value


def _by_seed(runs: Sequence[RunData]) -> dict[str, RunData] | None:
    """The runs keyed by seed, when every run has a distinct recorded seed."""
    keyed = {repr(r.seed): r for r in runs}
    if len(keyed) != len(runs) or any(r.seed is None for r in runs):
        return None
    return keyed


def _seed_order(keyed: dict[str, RunData]) -> list[str]:
    """The keys of :func:`_by_seed` in the order of their seeds (numbers by value: seed 10
    after seed 9, not after seed 1 as their text would sort), so per-seed lists read 1, 2, ..."""

    def order(key: str) -> tuple[int, float, str]:
        seed = keyed[key].seed
        if isinstance(seed, (int, float)) and not isinstance(seed, bool):
            return (0, float(seed), key)
        return (1, 0.0, key)

    return sorted(keyed, key=order)


def _sd(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) >= 2 else math.nan


#: how a method says that the spread is the rounding floor (:meth:`Metric.floor`)
_AT_FLOOR = "; the spread at least the rounding of its grid (step/√12)"


@dataclass(frozen=True)
class Paired:
    """Two arms that differ in ``options`` (left out of the replicate key), configs otherwise
    equal: ``control`` and ``treatment`` say which runs are which arm, ``label`` names an arm
    in a subject ("VRN 30", "none"); ``prefer``: when some treatment group of a bucket meets it
    (a tuned λ among a λ grid), only those groups form units. The effect is treatment −
    control, a paired t interval by seed when both arms have the same seeds, else Welch's."""

    options: tuple[str, ...]
    control: Condition
    treatment: Condition
    label: Callable[[RunData], str] = field(repr=False, compare=False)
    prefer: Condition | None = None

    @property
    def text(self) -> str:
        return (
            f"paired by seed: {self.treatment.requires} − {self.control.requires}, the t "
            "interval of the per-seed differences (Welch's interval when the arms' seeds "
            "differ)"
        )

    def _arms(
        self, bucket: Sequence[RunData]
    ) -> tuple[tuple[RunData, ...] | None, list[tuple[RunData, ...]]]:
        """The one control group of a bucket (None when not exactly one) and its treatment
        groups."""
        configs = _groups(bucket, (SEED_KEY,))
        controls = [g for g in configs if all(self.control.holds(r) for r in g)]
        treatments = [g for g in configs if all(self.treatment.holds(r) for r in g)]
        if self.prefer is not None:
            preferred = [g for g in treatments if all(self.prefer.holds(r) for r in g)]
            treatments = preferred or treatments
        return (controls[0] if len(controls) == 1 else None), treatments

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        out = []
        for bucket in _groups(runs, (SEED_KEY, *self.options)):
            control, treatments = self._arms(bucket)
            if control is None:
                continue
            group = name(control, (SEED_KEY, *self.options))
            for treatment in treatments:
                subject = f"{group}: {self.label(treatment[0])} vs {self.label(control[0])}"
                out.append(Unit(subject, (*control, *treatment), control, treatment))
        return out

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        return _paired_estimate(unit.control, unit.treatment, metric, self.label)


def _swept_units(
    runs: Sequence[RunData],
    name: Namer,
    option: str,
    x: Callable[[RunData], float | None],
    *,
    levels: int,
) -> list[Unit]:
    """The series of runs that differ in ``option`` (and the seed) alone, each one unit when
    it holds at least ``levels`` levels of ``x``: the units of a trend and of a threshold."""
    return [
        Unit(name(series, (SEED_KEY, option)), series)
        for series in _groups(runs, (SEED_KEY, option))
        if len({v for r in series if (v := x(r)) is not None}) >= levels
    ]


def _paired_estimate(
    control: Sequence[RunData],
    treatment: Sequence[RunData],
    metric: Metric,
    label: Callable[[RunData], str],
) -> Estimate | None:
    xs, ys = _values(metric, control), _values(metric, treatment)
    if xs is None or ys is None:
        return None
    a, b = _by_seed(control), _by_seed(treatment)
    measured = (
        f"{label(control[0])} {metric.spread(control)} → {label(treatment[0])} "
        f"{metric.spread(treatment)}"
    )
    data = tuple((r.label, metric.read(r)) for r in (*control, *treatment))
    if a is not None and b is not None and set(a) == set(b) and len(a) >= 2:
        seeds = _seed_order(a)
        diffs = [_known(metric, b[k]) - _known(metric, a[k]) for k in seeds]
        if len(diffs) <= 10:
            measured += "; per seed: " + ", ".join(metric.show_difference(d) for d in diffs)
        s = summarize(diffs)
        # a difference of two values on grids: at least both roundings
        floor = math.hypot(metric.floor(control), metric.floor(treatment))
        sd = max(s.sd or 0.0, floor)
        return Estimate(
            effect=s.mean,
            se=sd / math.sqrt(len(diffs)),
            df=len(diffs) - 1,
            n=len(diffs),
            replicate="seeds",
            method="paired by seed, t interval of the per-seed differences"
            + (_AT_FLOOR if sd == floor > 0 else ""),
            measured=measured,
            data=data,
            power_design="one_sample",
            sd=sd,
            seeds=len(diffs),
            per_seed=tuple(diffs),
        )
    effect = float(np.mean(ys) - np.mean(xs))
    if len(xs) >= 2 and len(ys) >= 2:
        se, df = welch_se_df(ys, xs)
        sx = max(_sd(xs), metric.floor(control))
        sy = max(_sd(ys), metric.floor(treatment))
        floored = sx > _sd(xs) or sy > _sd(ys)
        if floored:  # an arm's spread below its grid's rounding: the rounding instead
            se_x, se_y = sx / math.sqrt(len(xs)), sy / math.sqrt(len(ys))
            se, df = math.hypot(se_x, se_y), welch_df(se_x, len(xs) - 1, se_y, len(ys) - 1)
        return Estimate(
            effect=effect,
            se=se,
            df=df,
            n=min(len(xs), len(ys)),
            replicate="seeds",
            method="unpaired (the arms' seeds differ), Welch's interval"
            + (_AT_FLOOR if floored else ""),
            measured=measured,
            data=data,
            power_design="two_sample",
            sd=math.sqrt((sx**2 + sy**2) / 2),
            seeds=min(len(xs), len(ys)),
        )
    return Estimate(
        effect=effect,
        se=None,
        df=math.nan,
        n=min(len(xs), len(ys)),
        replicate="seeds",
        method="one run per condition",
        measured=measured,
        data=data,
        why_no_interval=(
            "one run per condition: the spread over training seeds is unknown, so there is no "
            "interval; run at least 2 seeds per condition"
        ),
    )


@dataclass(frozen=True)
class Trend:
    """The slope of the metric on ``x`` (a function of the swept ``option``, e.g. log2 m) over
    runs whose configs differ only in that option and the seed; ``x_text`` names x and
    ``levels_name`` its values in a finding's method ("log2 m", "batch sizes")."""

    option: str
    x: Callable[[RunData], float | None] = field(repr=False, compare=False)
    x_text: str = ""
    levels_name: str = "levels"

    @property
    def text(self) -> str:
        return (
            f"trend: least-squares slope on {self.x_text} over every run (seeds included), "
            "t interval with points − 2 degrees of freedom"
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        return _swept_units(runs, name, self.option, self.x, levels=2)

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        points = [(self.x(r), metric.value(r)) for r in unit.runs]
        if any(x is None or y is None for x, y in points):
            return None
        xs = [float(x) for x, _ in points if x is not None]
        ys = [float(y) for _, y in points if y is not None]
        return _slope_estimate(
            xs,
            ys,
            f"slope on {self.x_text} over {len(xs)} runs at {len(set(xs))} {self.levels_name}",
            measured=_by_level(unit.runs, self.x, metric),
            data=tuple((r.label, metric.read(r)) for r in unit.runs),
            floor=metric.floor(unit.runs),
        )


@dataclass(frozen=True)
class Threshold:
    """Where the metric starts to rise with ``x`` (a function of the swept ``option``): the
    two-segment fit flat below a break, rising linearly above it, one offset per seed
    (:func:`~cl_diag.report.claims.inference.hinge_fit`), over runs whose configs differ only in
    that option and the seed; the effect is the break − ``reference`` (a run's predicted
    threshold, the same for every run of the unit) with the profile-likelihood interval of
    the break (:func:`~cl_diag.report.claims.inference.hinge_interval`, df = runs − seeds − 2), at
    whatever confidence the finding is judged."""

    option: str
    x: Callable[[RunData], float | None] = field(repr=False, compare=False)
    reference: Callable[[RunData], float | None] = field(repr=False, compare=False)
    reference_text: str = ""
    x_text: str = ""
    levels_name: str = "levels"
    aside: Callable[[Sequence[RunData]], str] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def text(self) -> str:
        return (
            f"threshold: the least-squares two-segment fit of the metric on {self.x_text} over "
            "every run (flat below a break, linear rising above it, one offset per seed), the "
            f"break against {self.reference_text}, its profile-likelihood (F) interval with "
            "runs − seeds − 2 degrees of freedom"
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        return _swept_units(runs, name, self.option, self.x, levels=3)

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        points = [(self.x(r), metric.value(r)) for r in unit.runs]
        refs = {self.reference(r) for r in unit.runs}
        if any(x is None or y is None for x, y in points) or len(refs) != 1:
            return None
        (ref,) = refs
        if ref is None:
            return None
        xs = [float(x) for x, _ in points if x is not None]
        ys = [float(y) for _, y in points if y is not None]
        seeds = [repr(r.seed) for r in unit.runs]
        levels = tuple(sorted(set(xs)))
        per_level = min(xs.count(level) for level in levels)
        data = tuple((r.label, metric.read(r)) for r in unit.runs)
        by_level = _by_level(unit.runs, self.x, metric)
        try:
            fit = hinge_fit(xs, ys, seeds)
        except ValueError as exc:
            return Estimate(
                effect=None,
                se=None,
                df=math.nan,
                n=len(set(seeds)),
                replicate="seeds",
                method="two-segment fit",
                measured=by_level,
                data=data,
                why_no_interval=f"too few runs for a two-segment fit: {exc}",
            )
        lo, hi = hinge_interval(fit)
        se = (hi - lo) / (2.0 * t_quantile(fit.df))

        def interval(confidence: float) -> tuple[float, float]:
            a, b = hinge_interval(fit, confidence)
            return a - ref, b - ref

        return Estimate(
            effect=fit.break_ - ref,
            se=se,
            df=fit.df,
            n=len(set(seeds)),
            replicate="seeds",
            method=(
                f"two-segment fit on {self.x_text} over {len(xs)} runs at {len(levels)} "
                f"{self.levels_name} and {len(set(seeds))} seeds (an offset per seed), the "
                f"profile-likelihood interval of the break (F test, df {fit.df})"
            ),
            measured=(
                f"break at {self.x_text} = {fmt(fit.break_)} [{fmt(lo)}, {fmt(hi)}] (95 %) "
                f"against {self.reference_text} = {fmt(ref)}; slope above it "
                f"{fmt(fit.slope)}; by level: {by_level}"
                + (f"; {self.aside(unit.runs)}" if self.aside is not None else "")
            ),
            data=data,
            levels=levels,
            seeds=per_level,
            interval_at=interval,
            why_no_power=(
                "No seed count for 80 % power is computed for a break (its interval is a "
                "profile likelihood, not effect ± t se): more seeds or levels near the break "
                "narrow it."
            ),
        )


def _slope_estimate(
    xs: Sequence[float],
    ys: Sequence[float],
    x_text: str,
    *,
    measured: str,
    data: tuple[tuple[str, float | None], ...],
    floor: float = 0.0,
) -> Estimate:
    """The slope of ys on xs (one point per run or per seed's difference) as an Estimate;
    ``x_text`` says what the slope is ("slope on log2 m over 9 runs at 3 batch sizes");
    ``floor`` the smallest residual sd the points can show (:meth:`Metric.floor`): below it,
    se = floor / √Sxx."""
    t = trend(xs, ys)
    se, resid_sd, floored = t.se, t.resid_sd, False
    if se is not None and resid_sd is not None and resid_sd < floor:
        x = np.asarray(xs, dtype=np.float64)
        resid_sd, floored = floor, True
        se = floor / math.sqrt(float(((x - x.mean()) ** 2).sum()))
    levels = tuple(sorted(set(xs)))
    per_level = min(sum(1 for x in xs if x == level) for level in levels)
    method = (
        f"{x_text}, t interval"
        + (f"; permutation p (no trend) = {t.p_value:.3g}" if t.p_value is not None else "")
        + (_AT_FLOOR if floored else "")
    )
    return Estimate(
        effect=t.slope,
        se=se,
        df=t.df if t.se is not None else math.nan,
        n=t.points,
        replicate="runs",
        method=method,
        measured=measured,
        data=data,
        power_design="slope" if t.se is not None else None,
        sd=resid_sd,
        levels=levels,
        seeds=per_level,
        why_no_interval="" if t.se is not None else "fewer than 3 points: no interval for a slope",
    )


def _by_level(runs: Sequence[RunData], x: Callable[[RunData], float | None], metric: Metric) -> str:
    """'16: 0.18, 32: 0.157 (means of 3 seeds)': the mean raw value at each level, the level
    printed as the option's value (2^x for log2 m)."""
    levels = sorted({v for r in runs if (v := x(r)) is not None})
    parts = []
    for level in levels:
        values = [float(v) for r in runs if x(r) == level and (v := metric.read(r)) is not None]
        if values:
            parts.append(f"{_level_text(runs, x, level)}: {metric.show(float(np.mean(values)))}")
    reps = max((sum(1 for r in runs if x(r) == level) for level in levels), default=0)
    return ", ".join(parts) + (f" (means of {reps} seeds)" if reps > 1 else "")


def _level_text(runs: Sequence[RunData], x: Callable[[RunData], float | None], level: float) -> str:
    """The option value behind a level: "m 16" for log2 m, "α 0.1" for α, else the level."""
    for r in runs:
        if x(r) != level:
            continue
        if r.batch_size is not None and level == r.log2_batch:
            return f"m {fmt(r.batch_size)}"
        if level == r.alpha:
            return f"α {fmt(level)}"
    return fmt(level)


@dataclass(frozen=True)
class PairedTrend:
    """The slope on ``x`` (a function of the swept ``option``) of the per-seed differences of a
    :class:`Paired` design at each level: e.g. the VRN gain against log2 m. Each level needs
    one control and one treatment group (after the pair's ``prefer``) with the same seeds."""

    pair: Paired
    option: str
    x: Callable[[RunData], float | None] = field(repr=False, compare=False)
    x_text: str = ""
    levels_name: str = "levels"

    @property
    def text(self) -> str:
        return (
            f"trend of paired differences: at each {self.x_text}, {self.pair.treatment.requires}"
            f" − {self.pair.control.requires} per seed; the least-squares slope of those "
            "differences, t interval"
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        out = []
        for series in _groups(runs, (SEED_KEY, self.option, *self.pair.options)):
            levels = []
            for bucket in _groups(series, (SEED_KEY, *self.pair.options)):
                control, treatments = self.pair._arms(bucket)
                x = self.x(bucket[0])
                if control is None or len(treatments) != 1 or x is None:
                    continue
                levels.append((x, control, treatments[0]))
            if len({lv[0] for lv in levels}) >= 2 and len(levels) == len({lv[0] for lv in levels}):
                levels.sort(key=lambda lv: lv[0])
                runs_ = tuple(r for _, c, t in levels for r in (*c, *t))
                out.append(
                    Unit(
                        name(series, (SEED_KEY, self.option, *self.pair.options)),
                        runs_,
                        tuple(r for _, c, _t in levels for r in c),
                        tuple(r for _, _c, t in levels for r in t),
                        tuple(levels),
                    )
                )
        return out

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        xs: list[float] = []
        ys: list[float] = []
        parts = []
        for x, control, treatment in unit.levels:
            a, b = _by_seed(control), _by_seed(treatment)
            if a is None or b is None or set(a) != set(b):
                return None
            diffs = []
            for k in _seed_order(a):
                va, vb = metric.value(a[k]), metric.value(b[k])
                if va is None or vb is None:
                    return None
                diffs.append(vb - va)
            xs += [x] * len(diffs)
            ys += diffs
            level = _level_text(control, self.x, x)
            parts.append(f"{level}: {metric.show_difference(float(np.mean(diffs)))}")
        measured = (
            f"{self.pair.treatment.requires} − {self.pair.control.requires} by level: "
            + ", ".join(parts)
        )
        data = tuple((r.label, metric.read(r)) for r in unit.runs)
        over = (
            f"slope of the paired differences on {self.x_text} over {len(xs)} seed pairs at "
            f"{len(set(xs))} {self.levels_name}"
        )
        floor = math.hypot(metric.floor(unit.control), metric.floor(unit.treatment))
        return _slope_estimate(xs, ys, over, measured=measured, data=data, floor=floor)


@dataclass(frozen=True)
class OneSample:
    """The metric against a ``reference`` value (on the analysis scale; a function of a run:
    δ, 0.5, 1 − β*): over the seeds of one config the t interval of the per-seed deviations;
    with ``per_run``, one run's deviation with its image-sampling error (``Metric.run_se``)."""

    reference: Callable[[RunData], float | None] = field(repr=False, compare=False)
    reference_text: str = ""
    per_run: bool = False
    #: what to add to the measured text (e.g. another variant's prediction beside this one)
    aside: Callable[[Sequence[RunData]], str] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def text(self) -> str:
        return (
            f"one sample against {self.reference_text}: the t interval of the per-seed "
            "deviations over the seeds of one config"
            + (
                "; one run: its deviation with the sampling error of its analysed images"
                if self.per_run
                else "; one run: no interval (the seeds are the replicates)"
            )
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        return [Unit(name(g, (SEED_KEY,)), g) for g in _groups(runs, (SEED_KEY,))]

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        runs = unit.runs
        deviations = []
        for r in runs:
            value, ref = metric.value(r), self.reference(r)
            if value is None or ref is None:
                return None
            deviations.append(value - ref)
        data = tuple((r.label, metric.read(r)) for r in runs)
        measured = f"{metric.spread(runs)}"
        if self.aside is not None:
            measured += f"; {self.aside(runs)}"
        if len(runs) >= 2:
            per_seed = ", ".join(metric.show(metric.read(r)) for r in runs)
            s = summarize(deviations)
            floor = metric.floor(runs)
            sd = max(s.sd or 0.0, floor)
            return Estimate(
                effect=s.mean,
                se=sd / math.sqrt(len(deviations)),
                df=len(deviations) - 1,
                n=len(deviations),
                replicate="seeds",
                method="t interval over seeds" + (_AT_FLOOR if sd == floor > 0 else ""),
                measured=f"{measured} (per seed: {per_seed})" if len(runs) <= 10 else measured,
                data=data,
                power_design="one_sample",
                sd=sd,
                seeds=len(deviations),
                per_seed=tuple(deviations),
            )
        run = runs[0]
        if self.per_run and metric.run_se is not None:
            se = metric.run_se(run)
            if math.isfinite(se):
                return Estimate(
                    effect=deviations[0],
                    se=se,
                    df=math.inf,
                    n=run.n,
                    replicate="images",
                    method=f"one run: {metric.run_se_text}",
                    measured=measured,
                    data=data,
                )
        return Estimate(
            effect=deviations[0],
            se=None,
            df=math.nan,
            n=1,
            replicate="seeds",
            method="one run",
            measured=measured,
            data=data,
            why_no_interval=(
                "one run: the claim is about what training gives, so the seeds are the "
                "replicates; run at least 2 seeds"
            ),
        )


@dataclass(frozen=True)
class SeedShare:
    """The share of seeds whose own paired effect (``paired``'s per-seed difference on the
    analysis scale) ``reaches`` the source's figure, less ``reference``, with the exact
    (Clopper-Pearson) interval of the share: for a seed distribution with two modes (VRN
    reaches the figure in some seeds and breaks alignment in others) a mean and a t interval
    describe no seed, a count does. ``tally`` adds counts of the per-seed runs to the
    finding's measured text (e.g. the seeds whose alignment breaks)."""

    paired: Paired
    reaches: Callable[[float], bool] = field(repr=False, compare=False)
    reaches_text: str = ""
    reference: float = 0.5
    tally: Callable[[dict[str, RunData], dict[str, RunData]], str] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def text(self) -> str:
        return (
            f"the share of seeds (paired: {self.paired.treatment.requires} against "
            f"{self.paired.control.requires}) whose own effect reaches {self.reaches_text}, "
            f"less {fmt(100 * self.reference)} %, with its exact (Clopper-Pearson) interval"
        )

    def units(self, runs: Sequence[RunData], name: Namer) -> list[Unit]:
        return self.paired.units(runs, name)

    def estimate(self, unit: Unit, metric: Metric) -> Estimate | None:
        if _values(metric, unit.control) is None or _values(metric, unit.treatment) is None:
            return None
        a, b = _by_seed(unit.control), _by_seed(unit.treatment)
        data = tuple((r.label, metric.read(r)) for r in unit.runs)
        if a is None or b is None or set(a) != set(b) or len(a) < 2:
            return Estimate(
                effect=None,
                se=None,
                df=math.nan,
                n=len(unit.treatment),
                replicate="seeds",
                method="share of seeds",
                measured=metric.spread(unit.runs),
                data=data,
                why_no_interval=(
                    "a share of seeds needs both arms at the same seeds, at least 2 of them"
                ),
            )
        seeds = _seed_order(a)
        diffs = [_known(metric, b[k]) - _known(metric, a[k]) for k in seeds]
        k, n = sum(self.reaches(d) for d in diffs), len(diffs)
        lo, hi = share_interval(k, n)

        def interval(confidence: float) -> tuple[float, float]:
            low, high = share_interval(k, n, confidence)
            return low - self.reference, high - self.reference

        measured = f"{k} of {n} seeds reach {self.reaches_text}"
        if self.tally is not None:
            measured += f"; {self.tally(a, b)}"
        measured += "; per seed: " + ", ".join(metric.show_difference(d) for d in diffs)
        return Estimate(
            effect=k / n - self.reference,
            se=(hi - lo) / (2.0 * t_quantile(n - 1)),
            df=n - 1,
            n=n,
            replicate="seeds",
            method=(
                f"share of {n} seeds, exact (Clopper-Pearson) interval; its 95 % half-width "
                "over t orders Holm's family and gives the replication odds"
            ),
            measured=measured,
            data=data,
            seeds=n,
            interval_at=interval,
            why_no_power=(
                "No seed count for 80 % power is computed for a share of seeds: each seed is "
                "one Bernoulli trial, and more seeds narrow the exact interval"
            ),
        )


Design = Paired | Trend | PairedTrend | OneSample | Threshold | SeedShare
