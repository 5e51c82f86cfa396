"""The tuned-λ procedure, nested: what choosing the VRN weight on a validation split gains
(plans/vrn-weight-nested.md). Given runs at λ = 0 and at least :data:`MIN_TUNING_GRID` VRN
weights per setting, the same ≥ 2 seeds at every λ, it reports the **procedure's gain**
(leave one seed out: each seed's test top-1 at the λ the one-standard-error rule chooses on
the other seeds, :func:`cl_diag.measurement.selection.one_se_choice`, minus its top-1 without
VRN; judged as ``vrn_accuracy`` is, margin :data:`MARGIN`) and the **stability** of the choice
(bootstrap shares of each λ; "stable" at :data:`STABLE_SHARE` or more).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from cl_diag.measurement.selection import (
    BOOTSTRAP_RESAMPLES,
    STABLE_SHARE,
    NestedGains,
    nested_gains,
    one_se_choice,
    selection_shares,
)
from cl_diag.measurement.stats import CONFIDENCE
from cl_diag.report import figures
from cl_diag.report.claims import BULLET
from cl_diag.report.claims.inference import holm_levels, interval_at, margin_p_values, verdict
from cl_diag.report.document import Figure, Heading, Paragraph, Table, fmt
from cl_diag.report.metrics import PROBE_METRICS
from cl_diag.report.probe_section import validation_top1
from cl_diag.report.runs import SEED_KEY, config_labels, natural_key
from cl_diag.result import Result
from cl_diag.runconfig import MIN_TUNING_GRID, RunConfig

__all__ = [
    "MARGIN",
    "NestedSetting",
    "ProcedureFinding",
    "judge",
    "nested_settings",
    "tuning_blocks",
]

#: the minimum relevant gain in linear top-1, the registry's ``vrn_accuracy`` margin (0.5 pp)
MARGIN = 0.005


@dataclass(frozen=True)
class NestedSetting:
    """One setting's tuning runs as (candidates, seeds) arrays of validation and test top-1,
    candidates λ ascending with 0 first, and what the nested procedure makes of them."""

    label: str
    weights: tuple[float, ...]
    seeds: tuple[object, ...]
    validation: np.ndarray
    test: np.ndarray
    n_val: int | None

    @cached_property
    def gains(self) -> NestedGains:
        return nested_gains(self.validation, self.test, self.seeds, n_val=self.n_val)

    @cached_property
    def choice_all_seeds(self) -> float:
        """The λ the rule chooses on every tuning seed (what a user of this study would
        train with)."""
        return self.weights[one_se_choice(self.validation, self.n_val)]

    @cached_property
    def shares(self) -> np.ndarray:
        return selection_shares(self.validation, n_val=self.n_val)


#: the test split's linear top-1, as the comparison's probe tables read it
_TEST_TOP1 = next(m for m in PROBE_METRICS if m.key == "linear_top1")


def nested_settings(configs: Sequence[RunConfig], results: Sequence[Result]) -> list[NestedSetting]:
    """The settings the nested procedure applies to: runs grouped by their options but λ and
    the seed; a setting qualifies with λ = 0 and ≥ :data:`MIN_TUNING_GRID` weights λ > 0, every
    λ on the same ≥ 2 seeds once each, every run a validation and a test top-1."""
    labels = config_labels(configs, exclude=("vrn", SEED_KEY, "vrn_tuning"))
    groups: dict[str, dict[float, dict[object, Result]]] = {}
    repeated: set[str] = set()
    for config, result, label in zip(configs, results, labels, strict=True):
        weight = config.vrn.weight if config.vrn.weight is not None else 0.0
        at_weight = groups.setdefault(label or "runs", {}).setdefault(float(weight), {})
        if config.seed in at_weight:
            repeated.add(label or "runs")  # a seed twice at one λ: not a tuning grid
        at_weight[config.seed] = result
    out = []
    for label, by_weight in sorted(groups.items(), key=lambda kv: natural_key(kv[0])):
        weights = sorted(by_weight)
        if label in repeated or not weights or weights[0] != 0.0:
            continue
        if len(weights) - 1 < MIN_TUNING_GRID:
            continue
        seed_sets = {frozenset(map(repr, s)) for s in by_weight.values()}
        seeds = sorted(by_weight[0.0], key=lambda s: natural_key(repr(s)))
        if len(seed_sets) != 1 or len(seeds) < 2:
            continue
        val = np.full((len(weights), len(seeds)), np.nan)
        tst = np.full_like(val, np.nan)
        n_vals = set()
        for i, w in enumerate(weights):
            for j, s in enumerate(seeds):
                probes = by_weight[w][s].probes
                v = validation_top1(probes)
                t = None if probes is None else _TEST_TOP1.read(probes)
                n_val = (
                    None if probes is None or probes.validation is None else probes.validation.n_val
                )
                val[i, j] = np.nan if v is None else v
                tst[i, j] = np.nan if t is None else t
                n_vals.add(n_val)
        if not (np.isfinite(val).all() and np.isfinite(tst).all()) or len(n_vals) != 1:
            continue
        out.append(NestedSetting(label, tuple(weights), tuple(seeds), val, tst, n_vals.pop()))
    return out


def _pp(x: float) -> str:
    return f"{100 * x:+.2f} pp"


def _lam(weight: float) -> str:
    return "none" if weight == 0 else f"{weight:g}"


@dataclass(frozen=True)
class ProcedureFinding:
    """The procedure's gain at one setting, leave one seed out: the mean gain, its interval
    at its Holm level (``confidence``), the verdict and the Holm-adjusted p; and the gain when
    each seed chooses on its own split, with its 95 % interval."""

    setting: NestedSetting
    effect: float
    interval: tuple[float, float]
    confidence: float
    verdict: str
    adjusted_p: float
    own_effect: float
    own_interval: tuple[float, float]


def judge(settings: Sequence[NestedSetting]) -> list[ProcedureFinding]:
    """Each setting's procedure gain judged as ``vrn_accuracy`` is (expected increase, margin
    :data:`MARGIN`), Holm's step-down over the settings (family-wise 2.5 % one-sided)."""
    estimates, p_values = [], []
    for setting in settings:
        gains = np.asarray(setting.gains.loso_gain)
        k = gains.size
        se = float(gains.std(ddof=1)) / math.sqrt(k)
        effect = float(gains.mean())
        tests = margin_p_values(effect, se, k - 1, expect="increase", minimum=MARGIN)
        p_values.append(tests.deciding)
        estimates.append((effect, se, k - 1))
    out = []
    for setting, (effect, se, df), level in zip(
        settings, estimates, holm_levels(p_values), strict=True
    ):
        confidence = 1 - 2 * level.level
        interval = interval_at(effect, se, df, confidence)
        own = np.asarray(setting.gains.own_gain)
        own_effect = float(own.mean())
        own_interval = interval_at(
            own_effect, float(own.std(ddof=1)) / math.sqrt(own.size), own.size - 1
        )
        out.append(
            ProcedureFinding(
                setting,
                effect,
                interval,
                confidence,
                verdict(effect, interval, expect="increase", minimum=MARGIN),
                level.adjusted,
                own_effect,
                own_interval,
            )
        )
    return out


def tuning_blocks(configs: Sequence[RunConfig], results: Sequence[Result]) -> list:
    """The nested procedure's blocks, or [] when no setting qualifies."""
    settings = nested_settings(configs, results)
    if not settings:
        return []
    rows = []
    for finding in judge(settings):
        setting, gains = finding.setting, finding.setting.gains
        lo, hi = finding.interval
        own_lo, own_hi = finding.own_interval
        rows.append(
            [
                setting.label,
                ", ".join(_lam(setting.weights[c]) for c in gains.loso_choice),
                f"{_pp(finding.effect)} [{_pp(lo)}, {_pp(hi)}] ({100 * finding.confidence:.3g} %)",
                f"{finding.verdict} (Holm-adjusted p {fmt(finding.adjusted_p, 2)})",
                ", ".join(_lam(setting.weights[c]) for c in gains.own_choice),
                f"{_pp(finding.own_effect)} [{_pp(own_lo)}, {_pp(own_hi)}]",
                _lam(setting.choice_all_seeds),
            ]
        )
    blocks: list = [
        Heading(3, "The tuned-λ procedure, nested"),
        Paragraph(
            "What choosing λ on the validation split gains, without the selection's luck "
            "(plans/vrn-weight-nested.md). The rule: among no VRN and the λ tried, smallest "
            "first, the first whose mean validation linear top-1 is within one standard error "
            "of the best (sd over the seeds / √seeds; one seed: the binomial error on its "
            "validation images). Leave one seed out: each seed's gain is its test linear top-1 "
            "at the λ the rule chooses on the other seeds, minus its own without VRN (0 when "
            "the rule keeps no VRN)."
        ),
        Table(
            columns=[
                "setting",
                "λ chosen without each seed",
                "gain, leave one seed out [interval at its Holm level]",
                f"verdict (margin {_pp(MARGIN)[1:]})",
                "λ chosen on each seed's own split",
                "gain, own split [95 %]",
                "λ chosen on all seeds",
            ],
            rows=rows,
            caption="Test linear top-1 gain of the procedure over no VRN, in percentage points; "
            "the seeds in the order "
            + ", ".join(str(s) for s in settings[0].seeds)
            + ". The leave-one-seed-out gains share the other seeds' choices, so the Student-t "
            "interval is the usual cross-validation approximation, not exact. Judged as "
            "`vrn_accuracy` is (an increase of at least 0.5 pp), with Holm's step-down over "
            f"the settings at a family-wise one-sided {100 * (1 - CONFIDENCE) / 2:g} %.",
        ),
    ]
    shares = {s.label: s.shares for s in settings}
    all_weights = sorted({w for s in settings for w in s.weights})
    share_rows = []
    summaries = []
    for setting, row in zip(settings, rows, strict=True):
        by_weight = dict(zip(setting.weights, shares[setting.label], strict=True))
        share_rows.append(
            [setting.label, *[f"{100 * by_weight.get(w, 0.0):.1f} %" for w in all_weights]]
        )
        top = int(np.argmax(shares[setting.label]))
        top_share = float(shares[setting.label][top])
        stability = (
            f"the choice is stable (λ = {_lam(setting.weights[top])} in {100 * top_share:.1f} % "
            "of the resamples)"
            if top_share >= STABLE_SHARE
            else f"the choice is not stable: the most frequent, λ = {_lam(setting.weights[top])}, "
            f"in only {100 * top_share:.1f} % of the resamples (stable: "
            f"{100 * STABLE_SHARE:g} %), so {len(setting.seeds)} tuning seeds do not pin λ down"
        )
        summaries.append(
            f"{BULLET}{setting.label}: choosing λ on the validation split gains {row[2]} in test "
            f"linear top-1 over no VRN (leave one seed out): {row[3]}; {stability}."
        )
    blocks += [Paragraph(text) for text in summaries]
    blocks.append(
        Table(
            columns=["setting", *[f"λ = {_lam(w)}" for w in all_weights]],
            rows=share_rows,
            caption=f"Share of {BOOTSTRAP_RESAMPLES} bootstrap resamples of the tuning seeds "
            "(with replacement; numpy PCG64, seed 0) in which the rule chooses each λ.",
        )
    )
    blocks.append(
        Figure(
            filename="vrn_selection_stability.svg",
            svg=figures.selection_shares(
                [_lam(w) for w in all_weights],
                {
                    s.label: [
                        dict(zip(s.weights, shares[s.label], strict=True)).get(w, 0.0)
                        for w in all_weights
                    ]
                    for s in settings
                },
                title="How stable the choice of λ is",
                stable_share=STABLE_SHARE,
            ),
            alt="share of bootstrap resamples choosing each VRN weight, per setting",
            caption="Share of bootstrap resamples of the tuning seeds in which the "
            "one-standard-error rule chooses each λ (none: no VRN), one colour per setting; "
            f"dashed: the {100 * STABLE_SHARE:g} % a stable choice needs.",
        )
    )
    return blocks
