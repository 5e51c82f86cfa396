"""The CCEM's sigmoid-loss optimum checked through the tool (issue 33, the CCEM study).

Free embeddings (``--dataset toy``, N = 6 pairs in d = 6) are trained with the cross-view sigmoid
loss on the full batch by ``cl-diag train``'s own code, at (t, b) in three regimes of the CCEM
(paper-notes 11.1): the simplex ETF (x* = 1), the antipodal optimum (x* = 0) and the interior
root between them; each is analysed by ``cl-diag analyze``'s code and the runs are compared. The
measured x = (1 + mean positive similarity)/2 must be the closed form's x*, the registry's
``ccem_optimum`` must say so (supported at every (t, b)), and the comparison must draw the CCEM
figure beside its finding.

Speed: 600 Adam steps of 12 vectors; the checkpoint is written at the loop's cadence (a small
share of the time), so the six runs take a few seconds.
"""

from __future__ import annotations

import pytest
import torch

from cl_diag.measurement.theory import sigmoid_optimum
from cl_diag.orchestration.analyze import AnalyzeConfig, analyze
from cl_diag.orchestration.train import TrainConfig, train
from cl_diag.report.comparison import Comparison, build_comparison
from cl_diag.report.document import Figure
from cl_diag.result import load

N = 6
#: (t, b) -> the regime the CCEM predicts at N = 6
POINTS = {(1.0, 2.0): "etf", (1.0, -1.0): "antipodal", (8.0, -1.0): "interior"}


def _run(root, t: float, b: float, seed: int):
    out = root / f"t{t:g}_b{b:g}_s{seed}"
    train(
        TrainConfig(
            dataset="toy",
            num_samples=N,
            dim=N,
            loss="sigmoid",
            temperature=t,
            bias=b,
            within_view=False,
            batch_size=N,
            steps=600,
            optimizer="adam",
            lr=0.05,
            weight_decay=0.0,
            warmup_epochs=0,
            schedule="cosine",
            seed=seed,
            out=str(out),
            quiet=True,
        )
    )
    analyze(AnalyzeConfig(input=out / "last.pt", out=out / "analysis", probes=()))
    return out.name, load(out / "analysis")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ccem")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only contend
    try:
        return [_run(root, t, b, seed) for (t, b) in POINTS for seed in (1, 2)]
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_free_optimisation_ends_at_the_ccem_optimum(runs):
    for name, result in runs:
        t, b = result.config["temperature"], result.config["bias"]
        ccem = result.theory.sigmoid.ccem
        expected = sigmoid_optimum(t, b, N)
        assert ccem.N == N and ccem.regime == POINTS[(t, b)] == expected.regime, name
        assert ccem.x_star == pytest.approx(expected.x)
        pos = result.layers["embedding"].pairs["positive"].mean
        neg = result.layers["embedding"].pairs["cross_view_negative"].mean
        assert (1 + pos) / 2 == pytest.approx(expected.x, abs=5e-3), name
        assert neg == pytest.approx(expected.s_neg, abs=5e-3), name


@pytest.mark.slow
def test_ccem_claim_and_figure_in_the_comparison(runs):
    cmp = Comparison(runs)
    doc = build_comparison(cmp)
    findings = [f for f in cmp.findings if f.claim == "ccem_optimum"]
    assert sorted(f.verdict for f in findings) == ["supported"] * len(POINTS), [
        (f.subject, f.verdict, f.note) for f in findings
    ]
    figures = {b.filename: b for b in doc.blocks if isinstance(b, Figure)}
    figure = figures["ccem_x_vs_temperature.svg"]
    assert "CCEM's optimum x*(t, b; N = 6)" in figure.caption
    svg = figure.svg.decode()
    assert "CCEM x* (b = -1)" in svg and "CCEM x* (b = 2)" in svg
    # the same bytes every time
    again = {b.filename: b.svg for b in build_comparison(runs).blocks if isinstance(b, Figure)}
    assert again["ccem_x_vs_temperature.svg"] == figure.svg
