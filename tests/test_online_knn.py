"""``cl-diag train --online-knn N`` and the training-curve figure (issue 37 item 8): the online
kNN top-1 is the analysis's kNN probe of the same weights, it leaves the training unchanged,
and every run folder gets a figure of its metrics.csv."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET

import pytest
from conftest import refused

from cl_diag.cli.progress import row_line
from cl_diag.report.figures import training_curves
from cl_diag.trainconfig import TrainConfig

STEPS = ("--epochs", "2", "--num-samples", "256", "--batch-size", "64", "--quiet")
TIMING = {"seconds", "images_per_s"}


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The same run with and without --online-knn 1 (digits, 2 epochs of 4 steps)."""
    from cl_diag.cli import main

    root = tmp_path_factory.mktemp("online-knn")
    for name, extra in (("plain", ()), ("knn", ("--online-knn", "1"))):
        with pytest.raises(SystemExit) as stop:
            main(["train", *STEPS, *extra, "--out", str(root / name)])
        assert stop.value.code in (0, None)
    return root


@pytest.mark.slow
def test_online_knn_leaves_the_training_unchanged(two_runs):
    plain, knn = _rows(two_runs / "plain" / "metrics.csv"), _rows(two_runs / "knn" / "metrics.csv")
    assert len(plain) == len(knn) == 2
    for a, b in zip(plain, knn, strict=True):
        assert {k: v for k, v in a.items() if k not in TIMING} == {
            k: v for k, v in b.items() if k not in TIMING | {"knn_top1"}
        }
    assert [0.5 < float(row["knn_top1"]) <= 1.0 for row in knn] == [True, True]
    assert "knn_top1" not in plain[0]


@pytest.mark.slow
def test_online_knn_is_the_analysis_knn_probe_of_the_same_weights(two_runs, run_cli):
    out = two_runs / "knn-analysis"
    result = run_cli(
        "analyze",
        two_runs / "knn" / "last.pt",
        "--probes",
        "knn",
        "--no-baselines",
        "--layers",
        "backbone",
        "--out",
        out,
    )
    assert result.code == 0, result.err
    probes = json.loads((out / "result.json").read_text(encoding="utf-8"))["probes"]
    last = _rows(two_runs / "knn" / "metrics.csv")[-1]
    # the same split, features, k = 20 and T = 0.07: the same count of correct test images
    assert float(last["knn_top1"]) == probes["knn"]["k20"]["top1"]


@pytest.mark.slow
def test_the_analysis_report_draws_the_checkpoints_training_curves(two_runs, run_cli):
    out = two_runs / "curves-analysis"
    args = ("--probes", "none", "--no-baselines", "--layers", "backbone", "--out", out)
    assert run_cli("analyze", two_runs / "knn" / "last.pt", *args).code == 0
    source = json.loads((out / "result.json").read_text(encoding="utf-8"))["source"]
    rows = [
        {k: float(v) for k, v in row.items() if v != "" and k not in TIMING}
        for row in _rows(two_runs / "knn" / "metrics.csv")
    ]
    # every row kept (2 <= 200), the timings left out: identical weights give identical bytes
    assert source["curves"]["rows"] == 2
    assert source["curves"]["columns"]["step"] == [4, 8]
    assert not TIMING & set(source["curves"]["columns"])
    assert source["curves"]["columns"]["knn_top1"] == [r["knn_top1"] for r in rows]
    # the run folder's figure of the same rows, under the analysis's title
    svg = (out / "training_curves.svg").read_bytes()
    assert svg == training_curves(rows, title="training curves (checkpoint)")
    assert b"<!-- training curves (checkpoint) -->" in svg
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## Training\n" in report and "(2 of 2 drawn)" in report


def test_curve_columns_thin_evenly_and_keep_the_sparse_rows():
    from cl_diag.measurement.convergence import MAX_CURVE_ROWS, curve_columns

    assert curve_columns([]) is None and curve_columns([{"loss": 1.0}]) is None
    rows = [{"step": s, "loss": float(s), "seconds": 0.5} for s in range(1, 1001)]
    for s in (333, 777):  # the online kNN, logged on two rows only
        rows[s - 1]["knn_top1"] = s / 1000
    cols = curve_columns(rows)
    assert cols is not None and set(cols) == {"step", "loss", "knn_top1"}
    assert cols["step"][0] == 1 and cols["step"][-1] == 1000  # the first and the last
    assert len(cols["step"]) == MAX_CURVE_ROWS + 2  # the evenly spaced ones and the two kNN rows
    assert {333, 777} <= set(cols["step"]) and cols["step"] == sorted(cols["step"])
    assert [v for v in cols["knn_top1"] if v is not None] == [0.333, 0.777]
    assert cols["loss"] == [float(s) for s in cols["step"]]


def test_online_knn_is_recorded_only_when_set(two_runs):
    import torch

    records = {
        name: torch.load(two_runs / name / "last.pt", weights_only=True)["config"]
        for name in ("plain", "knn")
    }
    assert "online_knn" not in records["plain"]  # a run without it records as runs before it
    assert records["knn"]["online_knn"] == 1
    assert TrainConfig.defaults()["online_knn"] == 0


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--dataset", "toy", "--online-knn", "1"), ["--online-knn 1", "toy", "drop --online-knn"]),
        (("--dataset", "imagefolder", "--data-root", ".", "--online-knn", "2"), ["--val-root"]),
    ],
)
def test_online_knn_without_a_test_split_is_refused(run_cli, tmp_path, args, fragments):
    result = run_cli("train", *args, "--out", tmp_path / "run")
    refused(result, *fragments)
    assert not (tmp_path / "run").exists()


def test_the_run_folder_gets_its_training_curves(two_runs):
    for name, panels in (("plain", 3), ("knn", 4)):
        svg = (two_runs / name / "training_curves.svg").read_bytes()
        ET.fromstring(svg)  # well-formed SVG
        rows = [
            {k: float(v) for k, v in row.items() if v != ""}
            for row in _rows(two_runs / name / "metrics.csv")
        ]
        assert training_curves(rows) == svg  # the figure of metrics.csv, byte for byte
        # one axes per panel: loss, VRN term, similarity means (+ the online kNN)
        assert svg.count(b'<g id="axes_') == panels


def test_training_curves_leave_out_what_no_row_has():
    assert training_curves([]) is None
    only_loss = training_curves([{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}])
    assert only_loss is not None and only_loss.count(b'<g id="axes_') == 1


def test_the_progress_line_shows_the_online_knn():
    row = {"epoch": 1, "step": 4, "loss": 1.0, "vrn": 0.1, "lr": 0.5, "images_per_s": 10.0}
    assert "kNN" not in row_line(row, 2)
    assert row_line({**row, "knn_top1": 0.9125}, 2).endswith("kNN top-1 91.25%")
