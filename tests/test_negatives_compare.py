"""hcl, --views and --queue runs go through analyze and ``cl-diag compare`` like any other run:
their options are columns of the comparison, their statistics rows, with no special case."""

from __future__ import annotations

import csv

import pytest

from cl_diag.orchestration.analyze import AnalyzeConfig, analyze
from cl_diag.orchestration.compare import CompareConfig, compare
from cl_diag.orchestration.train import TrainConfig, train

TOY = dict(dataset="toy", arch="embedding", num_samples=8, dim=4, batch_size=4, steps=12)
TOY.update(optimizer="sgd", lr=0.5, momentum=0.0, weight_decay=0.0, warmup_epochs=0.0)


@pytest.mark.slow
def test_hcl_views_and_queue_runs_are_compared(tmp_path):
    runs = {
        "simclr": dict(TOY, loss="simclr", temperature=0.5),
        "hcl": dict(TOY, loss="hcl", temperature=0.5, beta=2.0, tau_plus=0.1),
        "queue": dict(TOY, loss="infonce", temperature=0.5, queue=6, key_encoder="same"),
        "views": dict(loss="simclr", views=3, num_samples=64, batch_size=16, steps=2),
    }
    folders = []
    for name, options in runs.items():
        train(TrainConfig(out=str(tmp_path / name), quiet=True, **options))
        out = tmp_path / f"{name}-analysis"
        extra = {"views": 3, "num_images": 32, "probes": ()} if name == "views" else {}
        analyze(AnalyzeConfig(input=tmp_path / name / "last.pt", out=out, device="cpu", **extra))
        folders.append(out)
    result = compare(CompareConfig(inputs=folders, out=tmp_path / "cmp"))
    with open(result.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    labels = {r["label"]: r for r in rows if r["layer"] in ("embedding", "projector")}
    assert len(labels) == 4 and {r["loss"] for r in labels.values()} == {
        "simclr",
        "hcl",
        "infonce",
    }
    # each run's label names the options that set it apart, from its config alone
    (hcl,) = [label for label in labels if label.startswith("hcl")]
    assert "beta=2" in hcl and "tau_plus=0.1" in hcl
    (queue,) = [label for label in labels if label.startswith("infonce")]
    assert "queue=6" in queue and "key_encoder=same" in queue
    (views,) = [label for label in labels if "views=3" in label]
    assert labels[views]["layer"] == "projector"
    for row in labels.values():
        assert -1.0 <= float(row["cross_view_negative_mean"]) <= 1.0
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert hcl in report and queue in report
