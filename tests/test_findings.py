"""Findings in the reports (issues 12 and 21): the registry's claims computed from result files,
through ``cl-diag compare`` and the single-run report.

The known-truth test builds two tiny result sets by hand -- a large effect and a null effect --
and checks that the comparison report says *supported* and *inconclusive* respectively; the
per-claim known truths are tests/test_claims.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from test_report import make_result, md_row

from cl_diag.orchestration.compare import CompareConfig, compare
from cl_diag.report.claims import CLAIMS, RunData, run_findings, summary_lines
from cl_diag.report.comparison import Comparison
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


def _study(root: Path, vrn_var: list[float]) -> Path:
    """Three seeds without VRN (variance about 0.1) and three with VRN."""
    none_var = [0.100, 0.104, 0.098]
    inputs = []
    for k, seed in enumerate(SEEDS):
        inputs.append(
            _write(root, f"seed={seed}_vrn=0", _run(seed=seed, vrn=0.0, var=none_var[k], top1=0.9))
        )
        inputs.append(
            _write(root, f"seed={seed}_vrn=30", _run(seed=seed, vrn=30.0, var=vrn_var[k], top1=0.9))
        )
    compare(CompareConfig(inputs=inputs, out=root / "comparison"))
    return root / "comparison" / "report.md"


def _finding_row(md: str, claim: str) -> list[str]:
    return md_row(md, "simclr: VRN 30 vs none", after=f"*{CLAIMS[claim].title}")


def test_known_truth_large_effect_is_supported_and_null_effect_inconclusive(tmp_path):
    # a large effect: VRN cuts the variance to a third, every seed
    large = _study(tmp_path / "large", [0.033, 0.035, 0.031])
    # a null effect: the VRN runs are the same numbers up to seed noise
    null = _study(tmp_path / "null", [0.101, 0.097, 0.103])
    for md_path, want in ((large, "supported"), (null, "inconclusive")):
        md = md_path.read_text(encoding="utf-8")
        # the report opens with its findings
        assert md.index("## Findings") < md.index("## Runs") < md.index("## Layer 'projector'")
        row = _finding_row(md, "vrn_variance")
        # cells after the subject: measured, effect, interval, n, verdict, replicates,
        # sensitivity or power, how
        assert row[4] == want, row
        assert row[3] == "3 seeds"
    md = large.read_text(encoding="utf-8")
    row = _finding_row(md, "vrn_variance")
    # paired by seed: mean of ln(var_VRN / var_none), exponentiated, minus one
    logs = np.log(np.array([0.033, 0.035, 0.031]) / np.array([0.100, 0.104, 0.098]))
    assert row[1] == f"{100 * math.expm1(logs.mean()):+.4g} %"
    assert "paired by seed" in row[7]
    # a decided verdict prints its replication odds and the design's sensitivity (issue 32),
    # in the table and in the summary sentence
    assert row[5].endswith(" %") and float(row[5].split(" ")[0]) > 99, row
    assert row[6].startswith("true effects of -") and row[6].endswith(" % or beyond"), row
    assert "Sensitivity: 3 seeds call a true effect of -" in row[7]
    summary = md[md.index("VRN lowers the variance") :]
    assert "; replicates " in summary and "; sensitive to true effects of -" in summary
    # the null effect's row says how many seeds would give 80 % power at the margin
    null_row = _finding_row(null.read_text(encoding="utf-8"), "vrn_variance")
    assert null_row[6].split(" ")[0].isdigit() and "80 % power" in null_row[7]
    assert null_row[6].endswith(" seeds (add " + null_row[6].split("(add ")[1])
    # a fixed lambda = 30 is not a tuned one: the accuracy claim is not applicable
    assert "VRN at a tuned λ raises linear-probe accuracy" in md
    assert "not applicable to simclr: VRN 30 vs none (needs a tuned λ" in md


def test_analysis_report_opens_with_its_findings(tmp_path):
    from cl_diag.report import render_analysis

    render_analysis(Result.from_dict(_run(seed=1, vrn=0.0, var=0.1, top1=0.9)), tmp_path)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    # issue 24: the headline counts this run's verdicts, then the contents, then the Findings
    assert md.startswith(
        "# cl-diag analysis\n\n**Findings: 0 supported, 0 not borne out, 0 contradicted, "
        "1 inconclusive, 0 not applicable (predictions of the registry); 1 described without a "
        "verdict; "
        "consistency checks: 4 of 4 hold.**\n"
    )
    assert md.index("**Contents**") < md.index("## Findings") < md.index("## Run")
    assert md.index("## Run") < md.index("## Layer 'projector'")
    # one trained SimCLR model without VRN: the rebuttal's 57 % claim with the sampling error
    # of its 50 analysed images
    row = md_row(md, "this run, projector", after=f"*{CLAIMS['excessive_share'].title}")
    assert row[3] == "50 images"
    # the band is described, not judged; the identities are checked
    assert "### Descriptions (no verdict)" in md and "### Consistency checks" in md
    for identity in ("thm52_ceiling", "lemma_c6", "lemma_c7", "lemma_c8"):
        assert CLAIMS[identity].title in md


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
    assert ": supported" in variance and "(simclr: VRN 30 vs none, 3 seeds" in variance
    assert "(Lee et al. 2025, §6.1, Table 1; Def. 5.7)" in variance
    checks = lines[-1]
    assert checks.startswith("Consistency checks") and "4 of 4 hold" in checks


def test_run_data_reads_the_loss_layer_and_every_layers_moments():
    result = Result.from_dict(_run(seed=1, vrn=0.0, var=0.1, top1=0.9))
    data = RunData.of(result, label="r")
    assert data is not None and data.layer == "projector" and data.neg_var == 0.1
    assert [layer.name for layer in data.layers] == ["projector", "backbone"]
    assert data.top1 == 0.9 and data.n_test == 300 and not data.free_embeddings
    assert data.delta == -1 / 999
    assert {f.kind for f in run_findings([data])} == {"prediction", "description", "consistency"}
