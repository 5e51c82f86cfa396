"""`cl-diag train` options, recipes and bad input: exit 2, a clear message, nothing damaged."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import math
from pathlib import Path

import pytest
import torch
import typer.main

from cl_diag.cli import app
from cl_diag.errors import UserError
from cl_diag.options import TRAINING_LOSSES
from cl_diag.orchestration.train import TrainConfig, resolve_config, train
from cl_diag.recipes import read_recipe
from cl_diag.training.checkpoint import load_checkpoint
from cl_diag.training.loop import METRIC_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "trainers").glob("*.toml"))
TOY = [
    "--dataset",
    "toy",
    "--num-samples",
    "4",
    "--dim",
    "3",
    "--batch-size",
    "2",
    "--steps",
    "4",
    "--quiet",
]


def _command():
    return typer.main.get_command(app).commands["train"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- config <-> CLI


def test_config_fields_are_exactly_the_cli_options_with_the_same_defaults():
    cmd = _command()
    # --recipe names the file the options come from; it is not itself a training option
    options = {
        p.name: p for p in cmd.params if p.param_type_name == "option" and p.name != "recipe_name"
    }
    fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    assert set(options) == set(fields)
    for name, default in fields.items():
        assert options[name].default == default, name
        assert options[name].help, f"--{name} has no help text"


def test_training_losses_are_the_library_losses_but_vrn():
    from cl_diag.losses import LOSSES

    assert set(TRAINING_LOSSES) == set(LOSSES) - {"vrn"}


# --------------------------------------------------------------------------- recipes


def test_recipes_exist_for_every_loss_with_and_without_vrn():
    names = {p.stem for p in RECIPES}
    for loss in TRAINING_LOSSES:
        assert {loss, f"{loss}-vrn"} <= names
    assert {"paper-cifar100-simclr", "paper-cifar100-simclr-vrn"} <= names


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_loads_and_validates(path):
    recipe = read_recipe(path, _command())
    config = resolve_config(TrainConfig(**recipe))
    assert (config.vrn > 0) == path.stem.endswith("-vrn")
    # a recipe named after its loss (simclr, simclr-vrn) trains that loss; others (rebuttal-toy,
    # sigmoid-toy) say theirs in their keys
    if path.stem.removesuffix("-vrn") in TRAINING_LOSSES:
        assert config.loss == path.stem.removesuffix("-vrn")


def test_paper_recipe_is_the_paper_setup():
    r = read_recipe(ROOT / "trainers" / "paper-cifar100-simclr-vrn.toml", _command())
    assert r["dataset"] == "cifar100" and r["arch"] == "resnet18-cifar" and r["temperature"] == 0.2
    assert (
        r["epochs"] == 200
        and r["batch_size"] == 256
        and r["lr"] == 0.3
        and r["warmup_epochs"] == 10
    )
    assert r["vrn"] == 30 and r["momentum"] == 0.9 and r["weight_decay"] == 1e-4


def test_unknown_key_lists_the_valid_keys(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('loss = "simclr"\nbatchsize = 4\n')
    with pytest.raises(UserError) as err:
        read_recipe(bad, _command())
    message = str(err.value)
    assert (
        "'batchsize' is not an option" in message
        and "batch-size" in message
        and "vrn-delta" in message
    )


def test_recipe_type_errors_and_bad_toml(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('batch-size = "big"\n')
    with pytest.raises(UserError, match="batch_size = 'big' must be an integer"):
        read_recipe(bad, _command())
    bad.write_text("vrn = \n")
    with pytest.raises(UserError, match="not valid TOML"):
        read_recipe(bad, _command())
    bad.write_text("[train]\nvrn = 1\n")
    with pytest.raises(UserError, match="flat"):
        read_recipe(bad, _command())


def test_command_line_wins_over_recipe_over_default(tmp_path, run_cli):
    recipe = tmp_path / "r.toml"
    recipe.write_text(
        'dataset = "toy"\nnum_samples = 4\ndim = 3\nbatch-size = 2\nsteps = 2\ntemperature = 0.7\n'
        "lr = 0.25\nquiet = true\n"
    )
    out = tmp_path / "run"
    # --lr is given with the *default* value: still explicit, so it beats the recipe's 0.25.
    r = run_cli("train", recipe, "--out", out, "--steps", "3", "--lr", str(TrainConfig.lr))
    assert r.code == 0, r.err
    config = load_checkpoint(out / "last.pt")["config"]
    assert config["steps"] == 3 and config["lr"] == TrainConfig.lr  # command line
    assert config["temperature"] == 0.7 and config["batch_size"] == 2  # recipe
    assert config["momentum"] == TrainConfig.momentum  # default


# --------------------------------------------------------------------------- runs


def test_toy_run_writes_embeddings_metrics_and_a_complete_config(tmp_path, run_cli):
    out = tmp_path / "toy"
    r = run_cli(
        "train",
        *TOY,
        "--temperature",
        "0.5",
        "--lr",
        "0.5",
        "--seed",
        "1",
        "--vrn",
        "3",
        "--out",
        out,
        "--save-every",
        "2",
    )
    assert r.code == 0, r.err
    assert sorted(p.name for p in out.iterdir()) == [
        "epoch_0002.pt",
        "last.pt",
        "metrics.csv",
        "training_curves.svg",
    ]
    assert r.out.count("epoch ") == 2  # --quiet: one plain line per epoch
    ck = load_checkpoint(out / "last.pt")
    assert (
        ck["dataset"] == "toy"
        and ck["n_train"] == 4
        and ck["step"] == 4
        and ck["epoch"] == 2
        and ck["complete"]
    )
    z1, z2 = ck["embeddings"]["z1"], ck["embeddings"]["z2"]
    assert z1.shape == z2.shape == (4, 3)
    assert torch.equal(torch.cat([z1, z2]), ck["backbone"]["weight"])
    c = ck["config"]
    assert (
        c["vrn_delta"] == pytest.approx(-1 / 3)
        and c["arch"] == "embedding"
        and c["lr_scaling"] == "none"
    )
    assert c["temperature"] == 0.5 and c["vrn"] == 3.0 and c["seed"] == 1
    assert set(ck["rng"]) == {"torch", "cuda", "numpy", "python", "loader"}
    with open(out / "metrics.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == METRIC_COLUMNS and [int(r["epoch"]) for r in rows] == [1, 2]
    for row in rows:
        loss, contrastive, vrn = float(row["loss"]), float(row["contrastive"]), float(row["vrn"])
        assert loss == pytest.approx(contrastive + 3 * vrn, rel=1e-6)
        assert -1 <= float(row["cross_neg_mean"]) <= 1 and float(row["pos_var"]) >= 0
    assert "trained 4 steps" in r.out


def test_default_out_and_rerun_protection(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_cli("train", *TOY).code == 0
    last = tmp_path / "runs" / "toy-simclr" / "last.pt"
    digest = _sha(last)
    r = run_cli("train", *TOY, "--seed", "9")
    assert (
        r.code == 2
        and "already holds a run" in r.err
        and "--resume" in r.err
        and "Traceback" not in r.err
    )
    assert _sha(last) == digest
    assert run_cli("train", *TOY, "--seed", "9", "--overwrite").code == 0
    assert load_checkpoint(last)["config"]["seed"] == 9


@pytest.fixture
def toy_run(tmp_path, run_cli):
    out = tmp_path / "run"
    assert run_cli("train", *TOY, "--out", out).code == 0
    return out / "last.pt"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--batch-size", "1"], "no negative pairs"),
        (["--batch-size", "8"], "larger than the 4 training instances"),
        (["--loss", "nce"], "--loss 'nce' is not one of"),
        (["--arch", "vgg11"], "--arch 'vgg11' is not one of"),
        (["--dataset", "mnist"], "--dataset 'mnist' is not one of"),
        (["--margin", "0.5"], "--margin is not a hyper-parameter of the simclr loss"),
        (
            ["--loss", "spectral", "--temperature", "0.5"],
            "spectral loss (it takes: no hyper-parameters)",
        ),
        (["--loss", "triplet", "--mining", "hardest"], "mining"),
        (["--temperature", "0"], "temperature must be"),
        (["--vrn", "-1"], "--vrn -1.0 must be"),
        (["--optimizer", "lamb"], "--optimizer 'lamb'"),
        (["--lr", "-1"], "--lr -1.0 must be > 0"),
        (["--epochs", "0"], "--epochs 0 must be in [1, 1000000]"),
        (["--seed", "-1"], "--seed -1 must be in [0, 2^63 - 1]"),
    ],
)
def test_bad_options_exit_2_and_leave_the_run_alone(toy_run, run_cli, args, message):
    digest = _sha(toy_run)
    argv = [*TOY, "--out", str(toy_run.parent), *args]
    r = run_cli("train", *argv)
    assert r.code == 2, (r.out, r.err)
    assert message in " ".join(r.err.split()), r.err
    assert "Traceback" not in r.err
    assert _sha(toy_run) == digest
    assert sorted(p.name for p in toy_run.parent.iterdir()) == [
        "last.pt",
        "metrics.csv",
        "training_curves.svg",
    ]


def test_resume_of_a_foreign_file_or_with_contradicting_options(toy_run, tmp_path, run_cli):
    digest = _sha(toy_run)
    foreign = tmp_path / "weights.pt"
    torch.save({"state_dict": {}}, foreign)
    for target in (foreign, tmp_path / "missing.pt", Path(__file__)):
        r = run_cli("train", "--resume", target)
        assert r.code == 2 and "checkpoint" in r.err and "Traceback" not in r.err
    r = run_cli("train", "--resume", toy_run, "--lr", "0.1", "--loss", "dcl")
    assert r.code == 2
    text = " ".join(r.err.split())
    assert (
        "contradict" in text
        and "--lr 0.1 (the checkpoint has 1.0)" in text
        and "--loss 'dcl'" in text
    )
    r = run_cli("train", "--resume", toy_run, "--steps", "6")
    assert r.code == 2 and "--steps 6 (the checkpoint has 4)" in " ".join(r.err.split())
    assert _sha(toy_run) == digest
    r = run_cli(
        "train", "--resume", toy_run, "--quiet"
    )  # options that change nothing computed are fine
    assert r.code == 0 and "already complete" in r.out
    assert _sha(toy_run) == digest


def test_unwritable_out_exits_2(tmp_path, run_cli):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    r = run_cli("train", *TOY, "--out", blocker / "run")
    assert r.code == 2 and "cannot write to --out" in r.err and "Traceback" not in r.err
    assert blocker.read_text() == "x"


def test_missing_cifar_exits_2_with_the_layout(tmp_path, run_cli):
    r = run_cli("train", "--dataset", "cifar10", "--data-root", tmp_path, "--out", tmp_path / "o")
    text = " ".join(r.err.split())
    assert r.code == 2 and "cifar-10-batches-py" in text and "--download" in text
    assert not (tmp_path / "o").exists()  # nothing created for a run that could not start


def test_nan_loss_stops_naming_the_step_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    from cl_diag.losses import LOSSES

    real = LOSSES["simclr"]
    calls = {"n": 0}

    class Poisoned:
        hyperparameter_names = real.hyperparameter_names
        resolve = real.resolve

        def __call__(self, *args, **kwargs):
            calls["n"] += 1
            value = real(*args, **kwargs)
            return value * float("nan") if calls["n"] == 3 else value

    monkeypatch.setitem(LOSSES, "simclr", Poisoned())
    out = tmp_path / "nan"
    config = TrainConfig(
        dataset="toy", num_samples=4, batch_size=2, steps=8, out=str(out), quiet=True
    )
    with pytest.raises(
        UserError, match=r"loss became nan at step 3 \(epoch 2\).*last good checkpoint"
    ):
        train(config)
    ck = load_checkpoint(out / "last.pt")
    assert ck["step"] == 2 and ck["epoch"] == 1 and not ck["complete"]


@pytest.mark.slow
def test_rebuttal_toy_experiment_vrn_shrinks_the_negative_spread(tmp_path):
    """The rebuttal's toy claim (paper-notes 7.2): with VRN the negative similarities centre
    on -1/(n-1) = -1/3 and their spread shrinks by about an order of magnitude."""
    from cl_diag.recipes import read_recipe

    spread = {}
    for name in ("rebuttal-toy", "rebuttal-toy-vrn"):
        recipe = read_recipe(ROOT / "trainers" / f"{name}.toml", _command())
        stds, means = [], []
        for seed in (1, 2, 3):
            train(
                TrainConfig(
                    **{
                        **recipe,
                        "seed": seed,
                        "out": str(tmp_path / f"{name}-{seed}"),
                        "quiet": True,
                    }
                )
            )
            emb = load_checkpoint(tmp_path / f"{name}-{seed}" / "last.pt")["embeddings"]
            u = torch.nn.functional.normalize(emb["z1"], dim=1)
            v = torch.nn.functional.normalize(emb["z2"], dim=1)
            s = u @ v.T
            neg = s[~torch.eye(4, dtype=torch.bool)]
            assert s.diagonal().mean() > 0.95  # positives aligned either way
            stds.append(float(neg.std(unbiased=False)))
            means.append(float(neg.mean()))
        spread[name] = (sum(stds) / 3, sum(means) / 3)
    plain, vrn = spread["rebuttal-toy"], spread["rebuttal-toy-vrn"]
    assert vrn[0] < 0.25 * plain[0]
    assert abs(vrn[1] + 1 / 3) < 0.01


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_autocast_paths_run_on_cpu(tmp_path, precision):
    # The CUDA AMP code path (autocast; GradScaler for fp16) exercised on CPU.
    out = tmp_path / precision
    r = train(
        TrainConfig(
            num_samples=64,
            batch_size=32,
            steps=3,
            precision=precision,
            device="cpu",
            out=str(out),
            quiet=True,
        )
    )
    assert r.steps == 3 and all(math.isfinite(row["loss"]) for row in r.history)
    ck = load_checkpoint(out / "last.pt")
    if precision == "fp16":
        assert ck["scaler"]["scale"] > 0  # GradScaler state is saved for resume
    else:
        assert ck["scaler"] is None
    assert ck["backbone"]["features.0.weight"].dtype == torch.float32  # master weights stay fp32


@pytest.mark.slow
def test_compile_runs(tmp_path):
    r = train(
        TrainConfig(
            num_samples=64,
            batch_size=32,
            steps=2,
            compile=True,
            out=str(tmp_path / "c"),
            quiet=True,
        )
    )
    assert r.steps == 2 and math.isfinite(r.final_loss)


def test_progress_bar_on_a_tty_replaces_the_plain_lines(tmp_path, run_cli, monkeypatch):
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    r = run_cli("train", *[a for a in TOY if a != "--quiet"], "--out", tmp_path / "bar")
    assert r.code == 0, r.err
    assert "epoch 1/2  step" not in r.out  # the bar, not the plain per-epoch lines
    r = run_cli("train", *TOY, "--out", tmp_path / "plain")
    assert "epoch 1/2  step 2" in r.out


@pytest.mark.parametrize("loss", TRAINING_LOSSES)
def test_every_loss_trains_with_vrn(tmp_path, loss):
    from cl_diag.recipes import read_recipe

    recipe = read_recipe(ROOT / "trainers" / f"{loss}-vrn.toml", _command())
    r = train(
        TrainConfig(
            **{
                **recipe,
                "num_samples": 64,
                "batch_size": 16,
                "steps": 3,
                "out": str(tmp_path),
                "quiet": True,
            }
        )
    )
    row = r.history[-1]
    assert r.steps == 3 and math.isfinite(row["loss"])
    assert row["loss"] == pytest.approx(row["contrastive"] + 30 * row["vrn"], rel=1e-5)


def test_views_do_not_depend_on_the_number_of_workers(tmp_path):
    runs = []
    for workers in (0, 2):
        out = tmp_path / f"w{workers}"
        train(
            TrainConfig(
                num_samples=64, batch_size=16, steps=4, workers=workers, out=str(out), quiet=True
            )
        )
        runs.append(load_checkpoint(out / "last.pt"))
    for k, v in runs[0]["backbone"].items():
        assert torch.equal(v, runs[1]["backbone"][k]), k
