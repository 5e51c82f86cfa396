"""Findings (issue 12): each claim computed from result data, with its interval and verdict.

The known-truth test builds two tiny result sets by hand -- a large effect and a null effect --
and checks that the comparison report says *supported* and *inconclusive* respectively.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_report import make_result, md_row

from cl_diag.measurement.stats import verdict
from cl_diag.orchestration.compare import CompareConfig, compare
from cl_diag.report.comparison import Comparison
from cl_diag.report.findings import (
    CLAIMS,
    RunData,
    alpha_variance,
    batch_variance,
    ceiling,
    excessive_separation,
    run_findings,
    ssem_collapse,
    ssem_variance,
    summary_lines,
    variance_band,
    vrn_accuracy,
    vrn_variance,
)
from cl_diag.result import Result

SEEDS = (1, 2, 3)


def _run(*, seed: int, vrn: float, var: float, top1: float, batch_size: int = 32) -> dict:
    """A result whose loss layer has exactly these numbers (make_result's other numbers stay)."""
    result = make_result(n=50, n_ref=1000, batch_size=batch_size, vrn=vrn, seed=seed, labels=False)
    neg = result["layers"]["projector"]["pairs"]["cross_view_negative"]
    neg.update(var=var, std=math.sqrt(var))
    result["probes"]["linear"]["top1"] = top1
    result["probes"]["splits"] = {
        "train": {"images": 900, "of": 900},
        "test": {"images": 300, "of": 300},
    }
    return result


def _write(root: Path, name: str, result: dict) -> Path:
    folder = root / name / "analysis"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return folder


def _study(root: Path, vrn_var: list[float], vrn_top1: list[float]) -> Path:
    """Three seeds without VRN (variance about 0.1, top-1 about 0.90) and three with VRN."""
    none_var, none_top1 = [0.100, 0.104, 0.098], [0.900, 0.903, 0.897]
    inputs = []
    for k, seed in enumerate(SEEDS):
        inputs.append(
            _write(
                root,
                f"seed={seed}_vrn=0",
                _run(seed=seed, vrn=0.0, var=none_var[k], top1=none_top1[k]),
            )
        )
        inputs.append(
            _write(
                root,
                f"seed={seed}_vrn=30",
                _run(seed=seed, vrn=30.0, var=vrn_var[k], top1=vrn_top1[k]),
            )
        )
    compare(CompareConfig(inputs=inputs, out=root / "comparison"))
    return root / "comparison" / "report.md"


def _finding_row(md: str, claim: str) -> list[str]:
    return md_row(md, "simclr: VRN 30 vs none", after=f"*{CLAIMS[claim].title}")


def test_known_truth_large_effect_is_supported_and_null_effect_inconclusive(tmp_path):
    # a large effect: VRN cuts the variance to a third and adds 5 points of accuracy, every seed
    large = _study(tmp_path / "large", [0.033, 0.035, 0.031], [0.950, 0.952, 0.949])
    # a null effect: the VRN runs are the same numbers up to seed noise
    null = _study(tmp_path / "null", [0.101, 0.097, 0.103], [0.899, 0.904, 0.898])
    for md_path, want in ((large, "supported"), (null, "inconclusive")):
        md = md_path.read_text(encoding="utf-8")
        # the report opens with its findings
        assert md.index("## Findings") < md.index("## Runs") < md.index("## Layer 'projector'")
        for claim in ("vrn_variance", "vrn_accuracy"):
            row = _finding_row(md, claim)
            # cells after the subject: measured, effect, interval, n, verdict, how / why
            assert row[4] == want, (claim, row)
            assert row[3] == "3 seeds"
    md = large.read_text(encoding="utf-8")
    row = _finding_row(md, "vrn_variance")
    # paired by seed: mean of ln(var_VRN / var_none), exponentiated, minus one
    logs = np.log(np.array([0.033, 0.035, 0.031]) / np.array([0.100, 0.104, 0.098]))
    assert row[1] == f"{100 * math.expm1(logs.mean()):+.4g} %"
    assert "paired by seed" in row[5]


def test_one_run_per_condition_is_inconclusive_whatever_the_gap(tmp_path):
    none = RunData.of(Result.from_dict(_run(seed=1, vrn=0.0, var=0.1, top1=0.9)), label="a")
    vrn = RunData.of(Result.from_dict(_run(seed=1, vrn=30.0, var=0.01, top1=0.99)), label="b")
    assert none is not None and vrn is not None
    f = vrn_variance([none], [vrn], "x")
    assert f.verdict == "inconclusive" and f.interval is None and f.effect == pytest.approx(-0.9)
    assert "One run per condition" in f.note
    acc = vrn_accuracy([none], [vrn], "x")
    assert acc is not None and acc.verdict == "inconclusive"
    # the test split's own sampling error is still reported (Newcombe on 300 test images)
    assert "Test-split sampling alone (Newcombe)" in acc.note


def _series(variances: dict[int, list[float]]) -> list[RunData]:
    runs = []
    for m, values in variances.items():
        for seed, var in zip(SEEDS, values, strict=True):
            result = Result.from_dict(_run(seed=seed, vrn=0.0, var=var, top1=0.9, batch_size=m))
            data = RunData.of(result, label=f"b{m} seed{seed}")
            assert data is not None
            runs.append(data)
    return runs


def test_batch_trend_across_seeds():
    # the paper's ordering: the variance falls by about a fifth per doubling of m
    falling = _series({16: [0.125, 0.13, 0.12], 32: [0.10, 0.104, 0.098], 64: [0.08, 0.083, 0.078]})
    f = batch_variance(falling, "simclr")
    assert f is not None and f.verdict == "supported"
    x = np.log2([16] * 3 + [32] * 3 + [64] * 3)
    y = np.log([0.125, 0.13, 0.12, 0.10, 0.104, 0.098, 0.08, 0.083, 0.078])
    assert f.effect == pytest.approx(math.expm1(np.polyfit(x, y, 1)[0]))
    assert f.n == 9 and "permutation p" in f.method
    # no trend: seed noise only
    flat = _series({16: [0.10, 0.104, 0.098], 32: [0.101, 0.097, 0.103], 64: [0.099, 0.102, 0.1]})
    g = batch_variance(flat, "simclr")
    assert g is not None and g.verdict == "inconclusive"
    # the opposite ordering, clearly: contradicted
    rising = _series({16: [0.08, 0.083, 0.078], 32: [0.10, 0.104, 0.098], 64: [0.125, 0.13, 0.12]})
    h = batch_variance(rising, "simclr")
    assert h is not None and h.verdict == "contradicted"


def test_theory_findings_of_one_run():
    result = _run(seed=1, vrn=0.0, var=0.1, top1=0.9, batch_size=32)
    # as if measured on 2,000 images: the sampling error of one run's variance is small
    result["layers"]["projector"]["n"] = 2000
    data = RunData.of(Result.from_dict(result), label="this run")
    assert data is not None and data.band is not None
    band = variance_band([data], "this run")
    # 0.1 is far above the Thm 5.5 band at n = 1000, m = 32 (upper end ~ 1/(m-1))
    _, hi = data.band
    assert band is not None and band.verdict == "contradicted"
    assert band.effect == pytest.approx(0.1 / hi - 1)
    assert "not at that optimum" in band.note and "Table 1 sits far above" in band.note
    slack = ceiling([data], "this run")
    assert slack is not None and slack.verdict == "supported"
    assert slack.effect == pytest.approx(data.ceiling - data.pos_mean)
    share = excessive_separation([data], "this run")
    assert share is not None and share.effect == pytest.approx(data.neg_ratio - 0.5)
    # with VRN the band is not the prediction: no band finding
    vrn = RunData.of(Result.from_dict(_run(seed=1, vrn=30.0, var=0.03, top1=0.9)), label="v")
    assert vrn is not None and variance_band([vrn], "v") is None


def test_excessive_ratio_of_non_negative_features_is_explained():
    result = _run(seed=1, vrn=0.0, var=0.1, top1=0.9)
    neg = result["layers"]["projector"]["pairs"]["cross_view_negative"]
    neg.update(min=0.02, excessive_ratio=0.0, excessive_count=0)
    data = RunData.of(Result.from_dict(result), label="r")
    assert data is not None
    f = excessive_separation([data], "r")
    assert f is not None and f.verdict == "contradicted"
    assert "0 by construction" in f.note


def test_analysis_report_opens_with_its_findings(tmp_path):
    from cl_diag.report import render_analysis

    render_analysis(Result.from_dict(_run(seed=1, vrn=0.0, var=0.1, top1=0.9)), tmp_path)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# cl-diag analysis\n\n## Findings\n")
    assert md.index("## Findings") < md.index("## Run") < md.index("## Layer 'projector'")
    # 50 analysed images: one run's variance 0.1 is within its (conservative) sampling error
    # of the band's upper end 0.032, so the verdict waits for more images
    row = md_row(md, "this run, projector", after=f"*{CLAIMS['variance_band'].title}")
    assert row[3] == "50 images" and row[4] == "inconclusive"
    for claim in ("ceiling", "excessive"):
        assert f"*{CLAIMS[claim].title}" in md


def test_summary_lines_count_verdicts():
    comparison = Comparison(
        [
            (
                f"s{seed}-v{vrn}",
                Result.from_dict(_run(seed=seed, vrn=vrn, var=0.1 if vrn == 0 else 0.03, top1=0.9)),
            )
            for seed in SEEDS
            for vrn in (0.0, 30.0)
        ]
    )
    lines = summary_lines(comparison.findings)
    variance = next(line for line in lines if line.startswith(CLAIMS["vrn_variance"].title))
    assert ": supported;" in variance and "(simclr: VRN 30 vs none)" in variance
    ceilings = next(line for line in lines if line.startswith(CLAIMS["ceiling"].title))
    # two configs: which got which verdict
    assert ceilings.endswith(": supported for simclr, simclr +VRN30.")


def test_accuracy_interval_over_seeds_stays_within_0_and_100_percent():
    # three seeds near 100 %: the t interval of their mean reaches past 100 %, an accuracy cannot
    def runs(top1s: list[float], vrn: float) -> list[RunData]:
        out = []
        for seed, top1 in zip(SEEDS, top1s, strict=True):
            result = Result.from_dict(_run(seed=seed, vrn=vrn, var=0.1, top1=top1))
            data = RunData.of(result, label=f"seed{seed}")
            assert data is not None
            out.append(data)
        return out

    f = vrn_accuracy(runs([0.99, 1.0, 0.97], 0.0), runs([0.98, 0.99, 1.0], 30.0), "x")
    assert f is not None
    none_text = f.measured.split(" → ")[0]
    assert none_text == "none 98.67 % ± 1.5 [94.87, 100]"


# ---- class collapse against the SSEM (supcl) ------------------------------------------------


def _supcl(
    per_class: list[float],
    *,
    alpha: float,
    predicted: float,
    seed: int = 0,
    alpha_c: float = 0.25,
    ssem: bool = True,
) -> RunData:
    """A supcl run whose loss layer (projector) has these classes' within-class variances and
    whose theory has the SSEM panel predicting ``predicted`` = 1 − β* (0: collapse)."""
    result = _run(seed=seed, vrn=0.0, var=0.1, top1=0.9, batch_size=100)
    result["config"].update(loss="supcl", alpha=alpha)
    within = float(np.mean(per_class))
    result["layers"]["projector"]["collapse"] = {
        "classes": len(per_class),
        "instances": 50,
        "views": 2,
        "balanced": True,
        "within_class_variance": within,
        "between_class_variance": 0.9 - within,
        "total_variance": 0.9,
        "s_w": 1.0 - within,
        "s_b": -0.1,
        "ssem_residual": 0.0,
        "epsilon": 0.01,
        "collapsed": within < 0.01,
        "per_class": [{"count": 5, "within_class_variance": v} for v in per_class],
    }
    if ssem:
        result["theory"]["ssem"] = {
            "alpha": alpha,
            "tau": 0.3,
            "m": 10,
            "n": 10,
            "p": 2,
            "variant": "B",
            "alpha_c": alpha_c,
            "beta_star": 1.0 - predicted,
            "regime": "collapse" if predicted == 0 else "interior",
            "predicted": {"s_w": None, "s_b": None, "within_class_variance": predicted},
            "d_below_mn_minus_1": False,
            "small_alpha": False,
        }
    data = RunData.of(Result.from_dict(result), label=f"alpha={alpha} seed{seed}")
    assert data is not None
    return data


def _around(centre: float, spread: float, k: int = 10) -> list[float]:
    """k class variances symmetric about ``centre`` (mean exactly ``centre``)."""
    return [centre + spread * (2 * i / (k - 1) - 1) for i in range(k)]


def test_equivalence_verdict():
    # the claim "measured = predicted within 0.05"
    assert verdict(0.01, (-0.02, 0.04), expect="equivalent", minimum=0.05) == "supported"
    assert verdict(0.09, (0.06, 0.12), expect="equivalent", minimum=0.05) == "contradicted"
    assert verdict(-0.09, (-0.12, -0.06), expect="equivalent", minimum=0.05) == "contradicted"
    # reaches both inside and outside the tolerance
    assert verdict(0.05, (0.02, 0.08), expect="equivalent", minimum=0.05) == "inconclusive"
    assert verdict(0.0, None, expect="equivalent", minimum=0.05) == "inconclusive"


def test_collapse_below_alpha_c_against_the_flag_epsilon():
    # collapsed: every class within 0.001-0.003, far below the flag's 0.01
    tight = _supcl(_around(0.002, 0.001), alpha=0.1, predicted=0.0)
    f = ssem_collapse([tight], "a")
    assert f is not None and f.verdict == "supported"
    assert f.effect == pytest.approx(0.002) and f.minimum == 0.01
    # the interval is the t interval over the 10 classes' variances
    values = np.array(_around(0.002, 0.001))
    half = 2.2621571627409915 * values.std(ddof=1) / math.sqrt(values.size)  # t_{0.975, 9}
    assert f.interval == pytest.approx((0.002 - half, 0.002 + half))
    assert f.n == 10 and f.replicate == "classes"
    # the digits sweep's case: no class near collapse
    spread = ssem_collapse([_supcl(_around(0.134, 0.05), alpha=0.0, predicted=0.0)], "b")
    assert spread is not None and spread.verdict == "contradicted"
    assert "balanced batch" in spread.note and "after finite training" in spread.note
    # a mean below the epsilon whose classes reach above it: inconclusive
    mixed = ssem_collapse([_supcl(_around(0.008, 0.02), alpha=0.2, predicted=0.0)], "c")
    assert mixed is not None and mixed.verdict == "inconclusive"
    assert "both inside and outside ±0.01" in mixed.note
    # the other regime's claim does not apply; nor does either without the SSEM panel
    assert ssem_variance([tight], "a") is None
    bare = _supcl(_around(0.002, 0.001), alpha=0.1, predicted=0.0, ssem=False)
    assert ssem_collapse([bare], "a") is None and ssem_variance([bare], "a") is None


def test_within_class_variance_above_alpha_c_against_one_minus_beta_star():
    predicted = 0.2605
    close = ssem_variance([_supcl(_around(0.27, 0.03), alpha=0.5, predicted=predicted)], "a")
    assert close is not None and close.verdict == "supported"
    assert close.effect == pytest.approx(0.27 - predicted)
    far = ssem_variance([_supcl(_around(0.167, 0.03), alpha=0.5, predicted=predicted)], "b")
    assert far is not None and far.verdict == "contradicted"
    assert far.effect == pytest.approx(0.167 - predicted)
    wide = ssem_variance([_supcl(_around(0.22, 0.15), alpha=0.5, predicted=predicted)], "c")
    assert wide is not None and wide.verdict == "inconclusive"
    # seeds of one config: the t interval over seeds, not over classes
    seeds = [
        _supcl(_around(v, 0.05), alpha=0.5, predicted=predicted, seed=s)
        for s, v in zip(SEEDS, (0.16, 0.17, 0.168), strict=True)
    ]
    g = ssem_variance(seeds, "d")
    assert g is not None and g.replicate == "seeds" and g.n == 3
    assert g.effect == pytest.approx(np.mean([0.16, 0.17, 0.168]) - predicted)
    assert g.verdict == "contradicted"
    assert ssem_collapse(seeds, "d") is None


def _alpha_series(values: dict[float, list[float]]) -> list[RunData]:
    """Runs at each alpha, one per seed, each with these within-class variances."""
    return [
        _supcl(_around(v, 0.01), alpha=a, predicted=0.0 if a <= 0.25 else 0.5 * a, seed=s)
        for a, vs in values.items()
        for s, v in zip(SEEDS[: len(vs)], vs, strict=True)
    ]


def test_within_class_variance_trend_over_alpha():
    rising = _alpha_series(
        {0.0: [0.10, 0.11, 0.10], 0.5: [0.20, 0.21, 0.19], 1.0: [0.40, 0.38, 0.41]}
    )
    f = alpha_variance(rising, "supcl")
    assert f is not None and f.verdict == "supported"
    x = [r.alpha for r in rising]
    y = [r.within_class_variance for r in rising]
    assert f.effect == pytest.approx(np.polyfit(x, y, 1)[0])
    assert f.n == 9 and "permutation p" in f.method
    flat = _alpha_series({0.0: [0.10, 0.11, 0.10], 0.5: [0.11, 0.10, 0.10], 1.0: [0.10, 0.1, 0.11]})
    g = alpha_variance(flat, "supcl")
    assert g is not None and g.verdict == "inconclusive"
    falling = _alpha_series(
        {0.0: [0.40, 0.38, 0.41], 0.5: [0.20, 0.21, 0.19], 1.0: [0.10, 0.11, 0.10]}
    )
    h = alpha_variance(falling, "supcl")
    assert h is not None and h.verdict == "contradicted"


def test_run_findings_pick_the_ssem_claim_by_regime():
    runs = _alpha_series({0.0: [0.1], 0.5: [0.2], 1.0: [0.4]})
    findings = run_findings(runs)
    by_claim: dict[str, list[str]] = {}
    for f in findings:
        by_claim.setdefault(f.claim, []).append(f.subject)
    # alpha 0 is below alpha_c = 0.25 (collapse predicted); 0.5 and 1 above it
    assert by_claim["ssem_collapse"] == ["alpha=0.0 seed1"]
    assert by_claim["ssem_variance"] == ["alpha=0.5 seed1", "alpha=1.0 seed1"]
    assert len(by_claim["alpha_variance"]) == 1
    lines = summary_lines(findings)
    assert any(line.startswith(CLAIMS["alpha_variance"].title + " (") for line in lines)
