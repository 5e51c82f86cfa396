"""One resolved training config, one merge path, a sweep that builds configs without the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from cl_diag.cli import app
from cl_diag.errors import UserError
from cl_diag.measurement.theory import delta
from cl_diag.orchestration.sweep import SweepConfig, sweep
from cl_diag.orchestration.train import (
    ResolvedTrainConfig,
    TrainConfig,
    config_from_checkpoint,
    resolve_config,
    train,
    train_options,
)
from cl_diag.recipes import merge_layers, read_recipe
from cl_diag.trainconfig import RECORDED_WHEN_SET, RESUME_FREE_FIELDS, TUNING_FIELDS
from cl_diag.training.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "trainers" / "rebuttal-toy.toml"


def test_default_config_resolves_every_derived_value():
    c = resolve_config(TrainConfig(device="cpu"))
    assert isinstance(c, ResolvedTrainConfig) and isinstance(c, TrainConfig)
    # digits: 1,347 training images, batch 128 -> 10 full batches per epoch
    assert (c.n_train, c.steps_per_epoch, c.total_steps, c.run_epochs) == (1347, 10, 400, 40)
    assert c.warmup_steps == 30  # 3 warm-up epochs x 10 steps
    assert c.peak_lr == 0.5  # lr 1.0 x 128/256, linear scaling for SGD on images
    assert c.vrn_delta == delta(1347) == -1 / 1346
    assert (c.arch, c.projector_hidden, c.lr_scaling) == ("small-cnn", 512, "linear")
    assert c.temperature == 0.2  # the loss's default, filled in
    assert (c.device_type, c.autocast, c.workers, c.world) == ("cpu", "fp32", 0, 1)
    assert c.device == "cpu" and c.out == "runs/digits-simclr"
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.batch_size = 64  # type: ignore[misc]


def test_steps_and_partial_epochs():
    options = TrainConfig(
        dataset="toy", num_samples=5, batch_size=2, steps=5, lr=0.5, warmup_epochs=1.5
    )
    c = resolve_config(options)
    # 5 instances in batches of 2: 2 steps an epoch, the 5th step starts a third epoch
    assert (c.n_train, c.steps_per_epoch, c.total_steps, c.run_epochs) == (5, 2, 5, 3)
    assert c.warmup_steps == 3  # 1.5 epochs x 2 steps
    assert c.peak_lr == 0.5 and c.lr_scaling == "none" and c.vrn_delta == -0.25


def test_record_is_exactly_the_options():
    c = resolve_config(TrainConfig(dataset="toy", batch_size=2, steps=2))
    record = c.record()
    # the options added after runs were recorded (the VRN tuning record, --online-knn) are
    # recorded only when set: a run without them records the bytes it did before they existed
    assert set(TUNING_FIELDS) | {"online_knn"} == set(RECORDED_WHEN_SET)
    assert list(record) == [n for n in TrainConfig.option_names() if n not in RECORDED_WHEN_SET]
    defaults = TrainConfig.defaults()
    assert TrainConfig(**record).options() == {
        **record,
        **{n: defaults[n] for n in RECORDED_WHEN_SET},
    }
    tuned = resolve_config(
        TrainConfig(
            dataset="toy",
            batch_size=2,
            steps=2,
            vrn=3.0,
            vrn_tuning_grid="1,3,10",
            vrn_tuning_split="validation",
            vrn_tuning_criterion="top-1",
        )
    ).record()
    assert list(tuned) == [n for n in TrainConfig.option_names() if n != "online_knn"]
    assert TrainConfig(**tuned).options() == {**tuned, "online_knn": 0}
    assert "log_every" in RESUME_FREE_FIELDS  # how often to log is not what a run computes


@pytest.mark.parametrize(
    "options, n_train, world, message",
    [
        (dict(batch_size=8), 4, 1, "--batch-size 8 is larger than the 4 training instances"),
        (dict(batch_size=4), 4, 3, "--batch-size 4 (the global batch) must be divisible by the 3"),
        (dict(vrn_power=0.5), None, None, "--vrn-power 0.5 must be at least 1"),
        (
            dict(log_every=-1),
            None,
            None,
            "--log-every -1 must be in [0, 1000000000000] (0: once per epoch)",
        ),
        (
            dict(batch_size=1),
            None,
            None,
            "--batch-size 1 must be in [2, 1048576] (a batch of 1 has no negative pairs)",
        ),
    ],
)
def test_each_value_is_checked_once_here(options, n_train, world, message):
    base = dict(dataset="toy", num_samples=4, batch_size=2, steps=2)
    with pytest.raises(UserError, match=re.escape(message)):
        resolve_config(TrainConfig(**{**base, **options}), n_train=n_train, world=world)


def test_world_size_comes_from_torchrun(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(UserError, match="divisible by the 3 processes"):
        resolve_config(TrainConfig(dataset="toy", num_samples=4, batch_size=2, steps=2))
    options = TrainConfig(dataset="toy", num_samples=6, batch_size=6, steps=2)
    assert resolve_config(options).world == 3


def test_merge_layers_later_wins_and_given_is_the_union():
    values, given = merge_layers({"a": 1, "b": 2, "c": 3}, {"b": 20}, {"b": 200, "c": 30})
    assert values == {"a": 1, "b": 200, "c": 30} and given == {"b", "c"}


def test_train_options_with_resume_applies_only_given_options(tmp_path):
    out = tmp_path / "run"
    train(TrainConfig(dataset="toy", num_samples=4, batch_size=2, steps=2, lr=0.25, out=str(out)))
    defaults = TrainConfig.defaults()
    # lr at its default but not given: the run's 0.25 stays; seed given: applied
    values = {**defaults, "resume": str(out / "last.pt"), "seed": 5}
    options = train_options(values, {"seed", "resume"})
    assert options.lr == 0.25 and options.seed == 5 and options.dataset == "toy"
    assert options.resume == str(out / "last.pt") and options.out is None
    assert train_options({**defaults, "lr": 0.3}, {"lr"}) == TrainConfig(lr=0.3)


@pytest.mark.parametrize("path", sorted((ROOT / "trainers").glob("*.toml")), ids=lambda p: p.stem)
def test_a_recipe_reads_the_same_from_the_config_as_from_the_command(path):
    command = typer.main.get_command(app).commands["train"]
    assert read_recipe(path, TrainConfig) == read_recipe(path, command)


def test_no_module_outside_the_command_line_imports_typer_or_click():
    """The fast lane's check that sweep and train need no CLI (the architecture test keeps
    ``cl_diag.cli`` itself out of every other module): no import of typer or click, at any
    depth (a function's lazy import too), in any module outside ``cl_diag/cli``."""
    import ast

    package = ROOT / "cl_diag"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
                for name in names
                if name.split(".")[0] in ("typer", "click")
            ]
    assert offenders == []


@pytest.mark.slow  # a fresh interpreter (torch's import); the static test above is the fast lane's
def test_sweep_and_train_need_no_cli():
    code = (
        "import sys, cl_diag.orchestration.sweep, cl_diag.orchestration.train\n"
        "from cl_diag.orchestration.train import TrainConfig, resolve_config\n"
        "resolve_config(TrainConfig())\n"
        "bad = sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in ('typer', 'click') or m.startswith('cl_diag.cli'))\n"
        "print(bad)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_sweep_from_python_with_typed_overrides(tmp_path):
    out = tmp_path / "sweep"
    seen = []
    result = sweep(
        SweepConfig(
            recipe=TOY,
            grid=["vrn=0,3"],
            out=out,
            overrides={"steps": 4, "lr": 0.25},
            analysis={"probes": ()},
        ),
        on_progress=lambda name, done, total: seen.append((name, done, total)),
    )
    assert seen == [("", 0, 2), ("vrn=0", 1, 2), ("vrn=3", 2, 2)]
    assert result.skipped == [] and result.comparison.is_file()
    for cell, vrn in (("vrn=0", 0.0), ("vrn=3", 3.0)):
        config = load_checkpoint(out / cell / "last.pt")["config"]
        assert config["vrn"] == vrn and isinstance(config["vrn"], float)
        assert config["steps"] == 4 and config["lr"] == 0.25 and config["quiet"]
        assert config["temperature"] == 0.5  # from the recipe
        result_json = json.loads((out / cell / "analysis" / "result.json").read_text())
        assert result_json["config"]["vrn"] == vrn and "log_every" not in result_json["config"]
    # grid values that do not parse, and a cell too large for the data, fail before any training
    for grid, message in (
        (["steps=2,x"], "Sweep cell steps=x: the train options are not valid: --steps 'x' is not"),
        (["batch-size=2,8"], "Sweep cell batch-size=8: --batch-size 8 is larger than the 4"),
    ):
        with pytest.raises(UserError) as err:
            sweep(SweepConfig(recipe=TOY, grid=grid, out=tmp_path / "bad"))
        assert message in str(err.value)
        assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_sweep_cli_parses_shared_overrides_as_train_does(run_cli, tmp_path):
    out = tmp_path / "sweep"
    r = run_cli("sweep", TOY, "--grid", "seed=1", "--steps", "x", "--out", out)
    assert r.code == 2 and "--steps" in r.err and "Traceback" not in r.err and not out.exists()
    r = run_cli("sweep", TOY, "--grid", "seed=1", "--resume", "x.pt", "--out", out)
    assert r.code == 2 and "--resume is the sweep's to set" in r.err and not out.exists()
    r = run_cli(
        "sweep", TOY, "--grid", "seed=1", "--steps", "3", "--no-download", "--out", out, "-q"
    )
    assert r.code == 0, r.err
    config = load_checkpoint(out / "seed=1" / "last.pt")["config"]
    assert config["steps"] == 3 and config["seed"] == 1 and config["download"] is False
    # one line per cell, not its training rows (issue 37): those are in its metrics.csv
    assert "[1/1] seed=1 done" in r.out and "epoch 2/2" not in r.out


def test_train_summary_and_already_complete(tmp_path):
    out = tmp_path / "run"
    first = train(TrainConfig(dataset="toy", num_samples=4, batch_size=2, steps=2, out=str(out)))
    assert first.summary().startswith("trained 2 steps (1 epochs) on 4 toy instances: loss ")
    again = train(config_from_checkpoint(out / "last.pt"))
    assert again.steps_this_run == 0
    expected = f"{out / 'last.pt'}: the run is already complete (2 steps); nothing to do."
    assert again.summary() == expected


def test_warmup_steps_override_the_epochs_and_are_recorded_as_given():
    # equal-steps studies warm every batch size up over the same number of steps
    c = resolve_config(TrainConfig(device="cpu", batch_size=64, steps=200, warmup_steps=15))
    assert (c.steps_per_epoch, c.total_steps, c.warmup_steps) == (21, 200, 15)
    assert c.record()["warmup_steps"] == 15
    # by default the warm-up comes from --warmup-epochs, and the record keeps the option unset,
    # so that runs at different batch sizes record the same options
    d = resolve_config(TrainConfig(device="cpu"))
    assert d.warmup_steps == 30 and d.record()["warmup_steps"] is None
    with pytest.raises(UserError, match="--warmup-steps -1 must be in \\[0, 1000000000000\\]"):
        resolve_config(TrainConfig(device="cpu", warmup_steps=-1))
