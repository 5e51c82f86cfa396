"""Choosing the VRN weight on a validation split (issue 23 item 2): the validation probe of
``analyze --validation-fraction``, the tuning record ``train --vrn-tuning-*`` writes and
:mod:`cl_diag.runconfig` reads, the selection of :mod:`cl_diag.orchestration.tune` and
``tools/select_vrn.py``, and the comparison's VRN weight view."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from test_report import make_result

from cl_diag.errors import UserError
from cl_diag.orchestration.analysis_config import AnalyzeConfig, check_analysis
from cl_diag.orchestration.train import ResolvedTrainConfig, TrainConfig, check_train_options
from cl_diag.orchestration.tune import CRITERION, SPLIT, run_test_stage, select_vrn
from cl_diag.result import Result
from cl_diag.runconfig import lambda_grid_text, parse_lambda_grid, parse_run_config

REPO = Path(__file__).resolve().parent.parent
GRID = (0.0, 0.1, 1.0, 10.0)


# ---- the tuning record -------------------------------------------------------------------------


def test_train_tuning_options_read_as_the_runs_own_tuned_lambda():
    cfg = parse_run_config(
        {
            "loss": "simclr",
            "vrn": 3.0,
            "vrn_tuning_grid": "0.1,0.3,1,3",
            "vrn_tuning_split": "validation",
            "vrn_tuning_criterion": "top-1",
            "seed": 4,
        }
    )
    tuning = cfg.vrn.tuning
    assert tuning is not None
    assert tuning.grid == (0.1, 0.3, 1.0, 3.0)
    assert tuning.selected == 3.0 and tuning.split == "validation" and tuning.criterion == "top-1"
    assert cfg.vrn.untuned_reason is None
    # one spelling for every reader: the flat keys become the nested record's
    assert "vrn_tuning_grid" not in cfg.options
    assert cfg.options["vrn_tuning.selected"] == 3.0
    # a control run and a tuned run differ only in vrn and vrn_tuning: one replicate key
    control = parse_run_config({"loss": "simclr", "vrn": 0.0, "seed": 4})
    assert cfg.without(("vrn", "vrn_tuning")) == control.without(("vrn", "vrn_tuning"))


def test_too_small_a_recorded_grid_is_not_tuned():
    cfg = parse_run_config({"vrn": 3.0, "vrn_tuning_grid": "1,3", "vrn_tuning_split": "validation"})
    assert cfg.vrn.untuned_reason == "the tuning record tried 2 λ values (fewer than 3)"


def test_unset_tuning_options_record_nothing():
    cfg = parse_run_config({"vrn": 30.0, "vrn_tuning_grid": None, "vrn_tuning_split": None})
    assert cfg.vrn.tuning is None
    assert not any(k.startswith("vrn_tuning") for k in cfg.options)


@pytest.mark.parametrize(
    ("text", "values"),
    [("0.1,0.3,1,3,10,30,100", (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)), (" 3 , 0 ", (3.0, 0.0))],
)
def test_lambda_grid_text_round_trips(text, values):
    assert parse_lambda_grid(text) == values
    assert parse_lambda_grid(lambda_grid_text(values)) == values


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1,x", "'x' is not a number"),
        ("1,-2", "'-2' is not a finite number ≥ 0"),
        ("1,1.0", "'1.0' is given twice"),
        ("1,nan", "'nan' is not a finite number ≥ 0"),
    ],
)
def test_bad_lambda_grids_name_the_entry(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_lambda_grid(text)


def _train(**options) -> TrainConfig:
    return check_train_options(TrainConfig(**options))


def test_train_normalises_the_grid_and_records_it_only_when_set():
    c = _train(vrn=3.0, vrn_tuning_grid=" 0.1, 1,3.0 ,10", vrn_tuning_split="validation")
    assert c.vrn_tuning_grid == "0.1,1,3,10"
    plain = ResolvedTrainConfig(
        n_train=10,
        world=1,
        device_type="cpu",
        autocast="fp32",
        peak_lr=1.0,
        steps_per_epoch=1,
        total_steps=1,
        run_epochs=1,
        warmup_steps=0,
    )
    assert not any(k.startswith("vrn_tuning") for k in plain.record())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"vrn": 0.0, "vrn_tuning_grid": "1,3,10", "vrn_tuning_split": "validation"},
            "but --vrn is 0 (off)",
        ),
        (
            {"vrn": 2.0, "vrn_tuning_grid": "1,3,10", "vrn_tuning_split": "validation"},
            "--vrn 2 is not in --vrn-tuning-grid",
        ),
        (
            {"vrn": 3.0, "vrn_tuning_grid": "1,3,10", "vrn_tuning_split": " Test"},
            "a weight chosen on the test split is not tuned",
        ),
        ({"vrn": 3.0, "vrn_tuning_grid": "1,3,10"}, "give both"),
        ({"vrn": 3.0, "vrn_tuning_split": "validation"}, "give both"),
        ({"vrn": 3.0, "vrn_tuning_criterion": "top-1"}, "add --vrn-tuning-grid"),
        (
            {"vrn": 3.0, "vrn_tuning_grid": "1,y", "vrn_tuning_split": "validation"},
            "'y' is not a number",
        ),
    ],
)
def test_train_refuses_a_tuning_record_that_cannot_be_true(options, message):
    with pytest.raises(UserError, match=re.escape(message)):
        _train(**options)


def test_the_cli_refuses_a_test_split_tuning_with_exit_2(tmp_path, run_cli):
    r = run_cli(
        "train",
        "--vrn",
        "3",
        "--vrn-tuning-grid",
        "1,3,10",
        "--vrn-tuning-split",
        "test",
        "--out",
        tmp_path / "r",
    )
    assert r.code == 2
    assert "test split is not tuned" in r.err
    assert "Traceback" not in r.err
    assert not (tmp_path / "r").exists()


# ---- the validation split of analyze --------------------------------------------------------


def test_validation_fraction_is_bounded_and_recorded_only_when_set(tmp_path):
    base = AnalyzeConfig(input=Path("x.pt"), out=tmp_path / "o")
    assert "validation_fraction" not in base.record()
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(UserError, match="--validation-fraction"):
            check_analysis(
                AnalyzeConfig(input=Path("x.pt"), out=tmp_path / "o", validation_fraction=bad)
            )
    given = AnalyzeConfig(input=Path("x.pt"), out=tmp_path / "o", validation_fraction=0.2)
    assert given.record()["validation_fraction"] == 0.2
    assert AnalyzeConfig.from_record(given.record()).validation_fraction == 0.2


def test_the_validation_probe_holds_out_each_class_share_and_scores_on_it_only():
    import torch

    from cl_diag.measurement.probes import linear_probe
    from cl_diag.orchestration.probe_plan import _validation_probe

    rng = np.random.default_rng(3)
    sizes = {0: 40, 1: 25, 2: 17}
    y = np.concatenate([np.full(n, c) for c, n in sizes.items()])
    rng.shuffle(y)
    centres = rng.normal(size=(3, 6))
    x = torch.from_numpy(centres[y] + rng.normal(scale=1.5, size=(y.size, 6))).float()
    config = AnalyzeConfig(input=Path("x"), out=Path("o"), validation_fraction=0.2, seed=5)
    block = _validation_probe(config, (x, torch.from_numpy(y)))
    # by hand: round(0.2 n_c) of each class held out: 8 + 5 + 3 (round(3.4) = 3)
    assert (block.n_val, block.n_fit) == (16, y.size - 16)
    assert (block.fraction, block.seed) == (0.2, 5)
    # the held-out images, found independently: the rows the seeded per-class draw sends out
    held = []
    g = np.random.default_rng(5)
    for c in sorted(sizes):
        idx = np.flatnonzero(y == c)
        held += list(g.permutation(idx)[: round(0.2 * sizes[c])])
    held = np.sort(np.array(held))
    fit = np.setdiff1d(np.arange(y.size), held)
    direct = linear_probe(x[fit], y[fit], x[held], y[held], seed=5)
    assert block.linear is not None
    assert block.linear.top1 == direct.top1
    assert block.linear.settings["n_test"] == held.size


# ---- the selection ----------------------------------------------------------------------------


def _tuning_result(batch: int, vrn: float, seed: int, val_top1: float | None) -> Result:
    d = make_result(batch_size=batch, vrn=vrn, seed=seed, layers=("projector",))
    d["config"] = {"loss": "simclr", "batch_size": batch, "vrn": vrn, "seed": seed}
    if val_top1 is not None:
        d["probes"]["validation"] = {
            "fraction": 0.2,
            "seed": 0,
            "n_fit": 80,
            "n_val": 20,
            "linear": {"top1": val_top1, "top5": 1.0},
        }
    return Result.from_dict(d)


def _runs(scores: dict[int, dict[float, list[float]]]) -> list[tuple[str, Result]]:
    return [
        (f"b{b}_v{v:g}_s{k}", _tuning_result(b, v, k + 1, top1))
        for b, by_v in scores.items()
        for v, values in by_v.items()
        for k, top1 in enumerate(values)
    ]


def test_selection_takes_the_best_mean_per_batch_size_never_zero_ties_to_the_smaller():
    scores = {
        16: {0.0: [0.99, 0.99], 0.1: [0.80, 0.84], 1.0: [0.85, 0.83], 10.0: [0.86, 0.82]},
        64: {0.0: [0.5, 0.5], 0.1: [0.90, 0.88], 1.0: [0.70, 0.72], 10.0: [0.91, 0.87]},
    }
    selection = select_vrn(_runs(scores))
    by_batch = {dict(s.values)["batch_size"]: s for s in selection.settings}
    # b16: 1 and 10 tie at 0.84 -> the smaller; λ = 0 (0.99) is never chosen
    assert by_batch[16].selected == 1.0
    # b64: 0.1 and 10 tie at 0.89 -> 0.1
    assert by_batch[64].selected == 0.1
    assert by_batch[16].grid == (0.1, 1.0, 10.0)
    score = next(s for s in by_batch[16].scores if s.weight == 0.1)
    assert score.mean == pytest.approx(0.82)
    assert score.sd == pytest.approx(np.std([0.80, 0.84], ddof=1))
    record = json.loads(selection.json_text())
    assert record["settings"][0]["split"] == SPLIT
    assert record["settings"][0]["criterion"] == CRITERION
    assert "| 1 **λ\\*** | 84.00 ± 1.41 | 1, 2 |" in selection.markdown()


@pytest.mark.slow
def test_selection_follows_the_data_either_way():
    """Random validation scores: the selected λ is the argmax of the means, and over many draws
    every λ of the grid gets chosen somewhere (the rule is not stuck on one answer)."""
    rng = np.random.default_rng(0)
    chosen = set()
    for _ in range(30):
        scores = {16: {v: list(rng.uniform(0.5, 0.9, 3)) for v in GRID}}
        (setting,) = select_vrn(_runs(scores)).settings
        means = {v: np.mean(s) for v, s in scores[16].items() if v > 0}
        assert setting.selected == max(means, key=lambda v: (means[v], -v))
        chosen.add(setting.selected)
    assert chosen == {0.1, 1.0, 10.0}


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ({16: {0.0: [0.5], 0.1: [0.6], 1.0: [0.7], 10.0: [None]}}, "has no validation accuracy"),
        ({16: {0.0: [0.5], 1.0: [0.7], 10.0: [0.6]}}, "try 2 VRN weight"),
    ],
)
def test_selection_refuses_what_cannot_choose_a_tuned_lambda(scores, message):
    with pytest.raises(UserError, match=message):
        select_vrn(_runs(scores))


def test_selection_refuses_an_unbalanced_grid():
    runs = _runs({16: {0.0: [0.5, 0.5], 0.1: [0.6, 0.6], 1.0: [0.7, 0.7], 10.0: [0.6]}})
    with pytest.raises(UserError, match="different seeds"):
        select_vrn(runs)


def test_the_test_stage_refuses_a_tuning_seed(tmp_path):
    selection = select_vrn(_runs({16: {v: [0.6, 0.7] for v in GRID}}))
    (tmp_path / "tuning" / "comparison").mkdir(parents=True)
    (tmp_path / "tuning" / "comparison" / "provenance.json").write_text(
        json.dumps({"sweep": {"recipe": None, "overrides": {}, "analysis": {}}})
    )
    with pytest.raises(UserError, match="Seed\\(s\\) 2 trained the tuning runs"):
        run_test_stage(tmp_path / "tuning", selection, [2, 3], tmp_path / "test")
    assert not (tmp_path / "test").exists()


def test_the_test_stage_runs_its_sweeps_with_the_given_parallel(tmp_path, monkeypatch):
    # --parallel reaches every sweep of the test stage (the controls and each setting's λ*),
    # which take the tuning sweep's recipe, overrides and equal steps
    from cl_diag.orchestration import compare as compare_module
    from cl_diag.orchestration import sweep as sweep_module

    selection = select_vrn(_runs({16: {v: [0.6, 0.7] for v in GRID}}))
    (tmp_path / "tuning" / "comparison").mkdir(parents=True)
    (tmp_path / "tuning" / "comparison" / "provenance.json").write_text(
        json.dumps(
            {"sweep": {"recipe": "r.toml", "overrides": {}, "analysis": {}, "equal_steps": 200}}
        )
    )
    seen = []

    def fake_sweep(config):
        seen.append(config)
        return sweep_module.SweepResult(out=config.out, cells=[], skipped=[], comparison=None)

    class Made:
        report_html = tmp_path / "report.html"

    monkeypatch.setattr(sweep_module, "sweep", fake_sweep)
    monkeypatch.setattr(compare_module, "compare", lambda config: Made())
    run_test_stage(tmp_path / "tuning", selection, [7, 8], tmp_path / "study", parallel=2)
    assert len(seen) == 2  # the controls, then batch 16 at its λ*
    assert all(c.parallel == 2 and c.equal_steps == 200 for c in seen)
    assert "--parallel 2" in seen[0].command_line()


def _tool():
    spec = importlib.util.spec_from_file_location("select_vrn", REPO / "tools" / "select_vrn.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["select_vrn"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_tool_writes_the_selection_and_exits_2_without_validation(tmp_path, capsys):
    tuning = tmp_path / "tuning"
    for name, result in _runs({16: {v: [0.6 + v / 100, 0.7] for v in GRID}}):
        (tuning / name / "analysis").mkdir(parents=True)
        result.save(tuning / name / "analysis")
    tool = _tool()
    assert tool.main([str(tuning), "--out", str(tmp_path / "study"), "--select-only"]) == 0
    assert (
        "batch size 16: λ* = 10" in capsys.readouterr().out
        or "λ* = 10" in (tmp_path / "study" / "selection.md").read_text()
    )
    record = json.loads((tmp_path / "study" / "selection.json").read_text())
    assert record["settings"][0]["selected"] == 10.0
    first = (tmp_path / "study" / "selection.json").read_bytes()
    assert tool.main([str(tuning), "--out", str(tmp_path / "study"), "--select-only"]) == 0
    assert (tmp_path / "study" / "selection.json").read_bytes() == first  # same bytes
    empty = tmp_path / "empty"
    empty.mkdir()
    assert tool.main([str(empty), "--out", str(tmp_path / "s2"), "--select-only"]) == 2
    assert "holds no <cell>/analysis/result.json" in capsys.readouterr().err
    # a test stage it cannot run is refused before anything is written: a reused seed, or none
    assert tool.main([str(tuning), "--out", str(tmp_path / "s3"), "--test-seeds", "1,9"]) == 2
    assert "Seed(s) 1 trained the tuning runs" in capsys.readouterr().err
    assert tool.main([str(tuning), "--out", str(tmp_path / "s4")]) == 2
    assert "Give --test-seeds" in capsys.readouterr().err
    assert not (tmp_path / "s3").exists() and not (tmp_path / "s4").exists()
    # a number of processes out of cl-diag sweep's bounds: argparse's exit 2, before any file
    with pytest.raises(SystemExit) as stop:
        tool.main(
            [str(tuning), "--out", str(tmp_path / "s5"), "--test-seeds", "9", "--parallel", "0"]
        )
    assert stop.value.code == 2 and "--parallel 0 must be in [1, 64]" in capsys.readouterr().err
    assert not (tmp_path / "s5").exists()


# ---- the comparison's VRN weight view ------------------------------------------------------------


def test_the_vrn_weight_view_shows_means_with_their_t_intervals():
    from cl_diag.report.comparison import Comparison
    from cl_diag.report.comparison.studies import vrn_weight_study
    from cl_diag.report.document import Figure, Table, fmt

    runs = _runs({16: {v: [0.6 + v / 100, 0.7, 0.65] for v in GRID}})
    cmp = Comparison([(name, r) for name, r in runs])
    blocks = vrn_weight_study(cmp, "projector")
    # the weight table first; then (validation split, λ = 0 and a grid on 3 seeds) the nested
    # tuned-λ procedure's tables (cl_diag.report.tuning_section)
    table, *nested = [b for b in blocks if isinstance(b, Table)]
    assert len(nested) == 2 and nested[0].columns[0] == "setting"
    figures = [b.filename for b in blocks if isinstance(b, Figure)]
    assert figures == [
        "accuracy_vs_vrn.svg",
        "validation_accuracy_vs_vrn.svg",
        "variance_vs_vrn.svg",
        "positive_mean_vs_vrn.svg",
        "vrn_selection_stability.svg",
    ]
    row = next(r for r in table.rows if r[1] == "10")
    values = 100 * np.array([0.7, 0.7, 0.65])
    half = stats.t.ppf(0.975, 2) * values.std(ddof=1) / math.sqrt(3)
    mean = values.mean()
    assert row[3] == f"{fmt(mean, 4)} [{fmt(mean - half, 4)}, {fmt(mean + half, 4)}] (n = 3)"
    # fewer than three weights: no view
    two = _runs({16: {0.0: [0.6, 0.7], 1.0: [0.6, 0.7]}})
    assert vrn_weight_study(Comparison(two), "projector") == []
