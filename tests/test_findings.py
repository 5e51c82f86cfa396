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

from cl_diag.orchestration.compare import CompareConfig, compare
from cl_diag.report.comparison import Comparison
from cl_diag.report.findings import (
    CLAIMS,
    RunData,
    batch_variance,
    ceiling,
    excessive_separation,
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

    render_analysis(_run(seed=1, vrn=0.0, var=0.1, top1=0.9), tmp_path)
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
            (f"s{seed}-v{vrn}", _run(seed=seed, vrn=vrn, var=0.1 if vrn == 0 else 0.03, top1=0.9))
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
