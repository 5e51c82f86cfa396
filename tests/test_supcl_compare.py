"""Class-collapse metrics in `cl-diag compare` (no special case: metrics like the others) and the
general study of a metric against a swept numeric option, with a theory's threshold marked."""

from __future__ import annotations

import copy
import json

import pandas as pd
import pytest

from cl_diag.report import Comparison, render_comparison
from cl_diag.report.comparison import build_comparison
from cl_diag.report.document import Figure, Heading, Table
from cl_diag.result import Result


@pytest.fixture(scope="module")
def labelled(tmp_path_factory, pairs_file_module):
    from cl_diag.orchestration.analyze import AnalyzeConfig, analyze

    out = tmp_path_factory.mktemp("labelled") / "a"
    analyze(AnalyzeConfig(input=pairs_file_module, out=out))
    return json.loads((out / "result.json").read_text())


@pytest.fixture(scope="module")
def pairs_file_module(tmp_path_factory):
    import numpy as np

    rng = np.random.default_rng(0)
    z1 = rng.standard_normal((60, 8)).astype(np.float32)
    z2 = (z1 + 0.3 * rng.standard_normal((60, 8))).astype(np.float32)
    path = tmp_path_factory.mktemp("pairs") / "pairs.npz"
    np.savez(path, z1=z1, z2=z2, labels=np.arange(60) % 3)
    return path


def _typed(runs: list[tuple[str, dict]]) -> list[tuple[str, Result]]:
    return [(name, Result.from_dict(result)) for name, result in runs]


def _run(base: dict, alpha: float, within: float, knn: float | None = None) -> dict:
    r = copy.deepcopy(base)
    r["config"] = {"loss": "supcl", "alpha": alpha, "batch_size": 100, "seed": 0}
    r["layers"]["embedding"]["collapse"]["within_class_variance"] = within
    # the instance means' share: half of it here (docs/ssem.md)
    r["layers"]["embedding"]["collapse"]["instance_within_class_variance"] = within / 2
    r["theory"] = {
        "statement": "",
        "ssem": {"alpha_c": 0.25, "m": 10, "n": 10, "tau": 0.3, "alpha": alpha},
    }
    if knn is not None:
        r["probes"] = {"layer": "backbone", "knn": {"k20": {"top1": knn}}}
    return r


def test_collapse_metrics_are_compared_like_the_others(labelled, tmp_path):
    runs = [("a", _run(labelled, 0.1, 0.01)), ("b", _run(labelled, 0.9, 0.4))]
    cmp = Comparison(_typed(runs))
    assert cmp.value(0, "embedding/within_class_variance") == 0.01
    assert cmp.value(1, "embedding/s_w") == labelled["layers"]["embedding"]["collapse"]["s_w"]
    written = render_comparison(cmp, tmp_path)
    frame = pd.read_csv(tmp_path / "comparison.csv")
    assert frame["within_class_variance"].tolist() == [0.01, 0.4]
    assert "ssem_residual" in frame.columns
    report = (tmp_path / "report.md").read_text()
    assert "Class collapse (labelled runs), layer 'embedding'" in report
    assert "within-class var" in report
    # two values of alpha make no curve
    assert not any(p.name.endswith("_vs_alpha.svg") for p in written)


def test_a_swept_option_gets_its_study_with_the_theory_marked(labelled, tmp_path):
    runs = [
        (f"run{k}", _run(labelled, alpha, within, knn))
        for k, (alpha, within, knn) in enumerate(
            [(0.0, 0.001, 0.95), (0.5, 0.2, 0.9), (1.0, 0.6, 0.8), (0.25, 0.05, 0.93)]
        )
    ]
    runs = _typed(runs)
    doc = build_comparison(runs)
    headings = [b.text for b in doc.blocks if isinstance(b, Heading)]
    assert "alpha study" in headings
    figures = {b.filename: b for b in doc.blocks if isinstance(b, Figure)}
    assert {
        "within_class_variance_vs_alpha.svg",
        "instance_within_class_variance_vs_alpha.svg",
        "knn_k20_top1_vs_alpha.svg",
    } <= set(figures)
    assert "α_c = 0.25" in figures["within_class_variance_vs_alpha.svg"].caption
    table = next(b for b in doc.blocks if isinstance(b, Table) and b.columns[1] == "alpha")
    # one row per run, in the order of the option
    assert [row[1] for row in table.rows] == ["0", "0.25", "0.5", "1"]
    assert [row[2] for row in table.rows] == ["0.001", "0.05", "0.2", "0.6"]
    assert [row[3] for row in table.rows] == ["0.0005", "0.025", "0.1", "0.3"]
    assert [row[4] for row in table.rows] == ["95.00 %", "93.00 %", "90.00 %", "80.00 %"]
    # the same bytes every time
    again = {b.filename: b.svg for b in build_comparison(runs).blocks if isinstance(b, Figure)}
    assert (
        again["within_class_variance_vs_alpha.svg"]
        == figures["within_class_variance_vs_alpha.svg"].svg
    )


def test_options_with_views_of_their_own_or_two_values_get_no_option_study(labelled):
    runs = []
    for k, (vrn, seed) in enumerate([(0, 1), (3, 1), (0, 2), (3, 2), (0, 3), (3, 3)]):
        r = copy.deepcopy(labelled)
        r["config"] = {"loss": "simclr", "vrn": vrn, "seed": seed}
        runs.append((f"r{k}", r))
    doc = build_comparison(_typed(runs))
    assert not [b for b in doc.blocks if isinstance(b, Heading) and b.text.endswith(" study")]
