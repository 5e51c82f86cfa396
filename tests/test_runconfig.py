"""RunConfig (issue 20): a recorded training config parsed once, each key with one meaning for
every reader (the theory panel, the single-run report, the comparison and its findings)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_report import make_result

from cl_diag.measurement.theory import theory_panel
from cl_diag.models.foreign import solo_training_config
from cl_diag.orchestration.train import TrainConfig, resolve_config
from cl_diag.report.analysis import build_analysis
from cl_diag.report.claims import RunData
from cl_diag.report.comparison import Comparison
from cl_diag.report.markdown import render_markdown
from cl_diag.report.runs import run_labels
from cl_diag.result import Result, load
from cl_diag.runconfig import RunConfig, Vrn, parse_run_config

REPO = Path(__file__).resolve().parents[1]

#: a recorded ``vrn`` -> (on, weight λ, the option ``vrn`` the labels and tables compare)
VRN_MEANINGS = [
    (30.0, True, 30.0, 30.0),
    (3, True, 3.0, 3),
    (0.0, False, 0.0, 0.0),
    ({"enabled": True, "lambda": 3.0}, True, 3.0, 3.0),
    ({"enabled": False, "lambda": 3.0}, False, 0.0, 0.0),
    ({"lambda": 2.0}, True, 2.0, 2.0),
    ({"enabled": True}, True, None, True),
    ({"enabled": False}, False, 0.0, 0.0),
    (True, True, None, True),
    (False, False, 0.0, 0.0),
    ("30", False, 0.0, "30"),  # not a number: nothing a reader could act on
]


@pytest.mark.parametrize(("recorded", "on", "weight", "option"), VRN_MEANINGS)
def test_vrn_has_one_meaning(recorded, on, weight, option):
    config = parse_run_config({"loss": "simclr", "vrn": recorded})
    assert config.vrn.on is on
    assert config.vrn.weight == weight and (weight is None) is (config.vrn.weight is None)
    assert config.option("vrn") == option and type(config.option("vrn")) is type(option)
    assert "vrn.enabled" not in config.options and "vrn.lambda" not in config.options


def test_no_vrn_recorded_is_off_and_no_option():
    config = parse_run_config({"loss": "simclr"})
    assert config.vrn == Vrn() and not config.vrn.on
    assert "vrn" not in config.options
    empty = parse_run_config(None)
    assert empty == RunConfig() and not empty.recorded


def _enabled_run(vrn: object, seed: int = 1) -> Result:
    return Result.from_dict(
        make_result(
            n=50,
            n_ref=1000,
            config={"loss": "simclr", "batch_size": 32, "vrn": vrn, "seed": seed},
            labels=False,
        )
    )


@pytest.mark.slow
def test_an_enabled_vrn_without_a_weight_reads_the_same_in_every_reader():
    # the case: {"enabled": true} was weight 1.0 in the comparison and 0 in the
    # single-run report; now every reader says "on, weight not recorded"
    on, off = _enabled_run({"enabled": True}), _enabled_run({"enabled": False, "lambda": 5.0})
    # the theory panel
    statement = theory_panel(RunConfig.of(on), 1000, {}).statement
    assert "VRN (lambda not recorded) penalises" in statement
    assert "penalises" not in theory_panel(RunConfig.of(off), 1000, {}).statement
    # the single-run report: the Thm 5.5 band is shown for reference only, with VRN on
    md = render_markdown(build_analysis(on))
    assert "this run has VRN λ = not recorded, which changes the fixed-batch optimum" in md
    assert "this run has VRN" not in render_markdown(build_analysis(off))
    # the findings' runs
    data = RunData.of(on)
    assert data is not None and data.config.vrn.on and data.vrn is None
    off_data = RunData.of(off)
    assert off_data is not None and not off_data.config.vrn.on and off_data.vrn == 0.0
    # the comparison: labels, the runs table, the VRN-against-none findings
    assert run_labels([("a", on), ("b", off)]) == ["simclr +VRN", "simclr"]
    runs = [
        (f"{v}{s}", _enabled_run(vrn, s))
        for s in (1, 2, 3)
        for v, vrn in (("a", {}), ("b", {"enabled": True}))
    ]
    cmp = Comparison(runs)
    assert sorted(set(cmp.labels)) == sorted(
        {f"simclr seed{s}" for s in (1, 2, 3)} | {f"simclr +VRN seed{s}" for s in (1, 2, 3)}
    )
    assert {f.subject for f in cmp.findings if f.claim == "vrn_variance"} == {
        "simclr: VRN (λ not recorded) vs none"
    }


def test_a_cl_diag_checkpoint_config_parses_to_the_options_it_records():
    # the record a checkpoint stores (ResolvedTrainConfig.record) and the RunConfig made of it
    options = TrainConfig(
        loss="supcl",
        alpha=0.3,
        temperature=0.2,
        batch_size=20,
        vrn=3.0,
        vrn_power=4.0,
        views=2,
        queue=0,
        seed=7,
        image_size=16,
        out="somewhere",
    )
    resolved = resolve_config(options, n_train=100)
    record = json.loads(json.dumps(resolved.record()))  # as result.json keeps it
    config = parse_run_config(record, n_train=resolved.n_train)
    assert (config.loss, config.alpha, config.temperature) == ("supcl", 0.3, 0.2)
    assert (config.batch_size, config.seed, config.views, config.queue) == (20, 7, 2, 0)
    assert config.vrn == Vrn(weight=3.0, power=4.0, delta=resolved.vrn_delta)
    assert (config.image_size, config.dataset, config.n_train) == (16, "digits", 100)
    assert config.balanced_batch is False and config.classes_per_batch is None
    assert config.hyperparameters(("temperature", "alpha")) == {"temperature": 0.2, "alpha": 0.3}
    assert config.hyperparameters(("bias", "margin")) == {}  # not given: the loss's defaults
    # every recorded option but the output folder, under the same names
    assert set(config.options) == set(record) - {"out"}
    assert all(config.option(k) == v for k, v in record.items() if k != "out")


def test_a_results_config_falls_back_to_its_theory_batch_size_and_records_n_train():
    result = load(
        REPO / "reports" / "supcl-collapse" / "alpha=0.2_seed=1" / "analysis" / "result.json"
    )
    config = RunConfig.of(result)
    assert config.loss == "supcl" and config.alpha == 0.2 and config.batch_size == 100
    assert config.balanced_batch is True and config.classes_per_batch == 10
    assert config.n_train == result.source.n_train
    nothing = dataclasses.replace(result, config={})
    assert RunConfig.of(nothing).batch_size == result.theory.batch_size == 100
    assert RunConfig.of(nothing).option("batch_size") == 100


def test_foreign_configs_parse_in_the_same_vocabulary():
    solo = solo_training_config(
        {
            "method": "simclr",
            "backbone": {"name": "resnet18"},
            "data": {"dataset": "cifar100"},
            "optimizer": {"batch_size": 64},
            "devices": [0, 1],
            "method_kwargs": {"temperature": 0.2},
            "add_vrn_loss_term": {"enabled": True, "weight": 30, "delta": -0.01, "p": 2},
            "seed": 5,
        }
    )
    config = parse_run_config(solo)
    assert (config.loss, config.batch_size, config.temperature) == ("simclr", 128, 0.2)
    assert config.vrn == Vrn(weight=30.0, power=2, delta=-0.01) and config.seed == 5
    assert config.option("batch_size_per_device") == 64  # kept for the labels, not the batch m
    nested = parse_run_config({"loss": {"name": "dcl", "temperature": 0.5}, "out": "x"})
    assert nested.loss == "dcl" and nested.option("loss.temperature") == 0.5
    assert nested.temperature is None  # a nested hyper-parameter is no top-level one
    assert "out" not in nested.options


def test_replicates_differ_in_the_options_left_out_only():
    a = parse_run_config({"loss": "simclr", "batch_size": 32, "seed": 1})
    b = parse_run_config({"loss": "simclr", "batch_size": 32, "seed": 2})
    c = parse_run_config({"loss": "simclr", "batch_size": 64, "seed": 1})
    assert a.without(["seed"]) == b.without(["seed"]) != c.without(["seed"])
    assert a.without(["seed", "batch_size"]) == c.without(["seed", "batch_size"])


@pytest.mark.parametrize(
    "path",
    sorted(REPO.glob("reports/**/analysis/result.json")),
    ids=lambda p: p.parent.parent.relative_to(REPO / "reports").as_posix(),
)
def test_the_theory_panel_of_each_reference_run_reads_its_recorded_config_as_before(path):
    # the committed results were measured before the config was typed: the panel made from
    # the RunConfig of each recorded config is the block they store, word for word
    result = load(path)
    assert result.theory is not None
    config = parse_run_config(result.config, n_train=result.source.n_train)
    panel = theory_panel(config, result.n_ref, result.layers)
    stored = result.theory.ssem
    if stored is not None and stored.alpha_split is None:
        # written before the SSEM's region (issue 23, docs/ssem.md): the panel now adds it, a
        # clause of the statement and two fields, in place of the small_alpha flag (kept in
        # the stored block's extra); the rest is word for word
        assert panel.ssem is not None and stored.extra == {"small_alpha": False}
        assert panel.ssem.alpha_split is not None and panel.ssem.outside_ssem_region is False
        clause = (
            f"; the SSEM is the optimum for alpha >= alpha_s = {panel.ssem.alpha_split:.4g} "
            "(docs/ssem.md)"
        )
        assert clause in panel.statement
        panel = dataclasses.replace(
            panel,
            statement=panel.statement.replace(clause, ""),
            ssem=dataclasses.replace(
                panel.ssem, alpha_split=None, outside_ssem_region=None, extra=stored.extra
            ),
        )
    assert panel == result.theory and panel.to_dict() == result.theory.to_dict()


def test_the_vrn_tuning_record_says_whether_lambda_was_tuned():
    # issue 21: "VRN at a tuned λ": the record of how λ was chosen, top level or nested in vrn
    record = {"grid": [0.1, 1, 3, 10], "selected": 3, "split": "validation", "criterion": "top-1"}
    top = parse_run_config({"loss": "simclr", "vrn": 3.0, "vrn_tuning": record})
    nested = parse_run_config(
        {"loss": "simclr", "vrn": {"enabled": True, "lambda": 3.0, "tuning": record}}
    )
    for config in (top, nested):
        tuning = config.vrn.tuning
        assert tuning is not None and tuning.grid == (0.1, 1.0, 3.0, 10.0)
        assert tuning.selected == 3.0 and tuning.split == "validation"
        assert config.vrn.untuned_reason is None
    # a fixed λ, a λ the record did not choose, a choice on the test split, a grid of two
    assert parse_run_config({"vrn": 30.0}).vrn.untuned_reason == (
        "the config records no tuning of λ (a fixed λ)"
    )
    other = parse_run_config({"vrn": 30.0, "vrn_tuning": record}).vrn.untuned_reason
    assert other == "the tuning record selected λ = 3.0, not this run's λ = 30"
    cheat = parse_run_config({"vrn": 3.0, "vrn_tuning": {**record, "split": "Test"}})
    assert cheat.vrn.untuned_reason == "λ was chosen on the test split"
    few = parse_run_config({"vrn": 3.0, "vrn_tuning": {**record, "grid": [1, 3]}})
    assert few.vrn.untuned_reason == "the tuning record tried 2 λ values (fewer than 3)"
    assert parse_run_config({"vrn": 0.0}).vrn.untuned_reason == "VRN is off"


def test_leaving_out_an_option_leaves_out_its_sub_options():
    # runs with and without a tuning record are still VRN against none at an equal config
    tuned = parse_run_config({"loss": "simclr", "vrn": 3.0, "vrn_tuning": {"grid": [1, 3, 10]}})
    none = parse_run_config({"loss": "simclr", "vrn": 0.0})
    assert tuned.without(["vrn", "vrn_tuning"]) == none.without(["vrn", "vrn_tuning"])
    assert tuned.without(["vrn"]) != none.without(["vrn"])
