"""Options declared once (issue 20 item 5, issue 26's option and config values).

Every option of ``train`` and ``analyze`` (and ``cl_diag.measure`` / ``cl_diag.analyze``) is
declared in :mod:`cl_diag.options`: its type and bounds, the fix its message names, and the
products of options that bound memory. The same declaration refuses a value on the command
line (exit 2, no traceback), in Python (a ``UserError``) and in a checkpoint's stored config.
The cases of issue 26 that allocate are run in a child under an address-space cap
(RLIMIT_AS), so that a missing bound fails as a MemoryError, not a slow test.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path, PurePath

import numpy as np
import pytest
import torch
import typer.main
from conftest import refused

import cl_diag
from cl_diag.cli import app
from cl_diag.errors import UserError
from cl_diag.options import (
    CLI,
    PYTHON,
    OptionError,
    Spelling,
    check_values,
    in_config,
)
from cl_diag.orchestration.analysis_config import ANALYZE, MEASURE, AnalyzeConfig
from cl_diag.trainconfig import RUN_CONFIG, TRAIN, TrainConfig

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "trainers" / "rebuttal-toy.toml"


# --------------------------------------------------------------------------- the declarations


def check(name: str, value: typing.Any, spelling: Spelling = CLI) -> typing.Any:
    return TRAIN[name].normalise(value, spelling)


def _kind(annotation: typing.Any, name: str) -> type:
    """The declared kind an annotation stands for: a path option is declared PurePath and
    held as a str (train) or a Path (analyze)."""
    if typing.get_origin(annotation) is tuple:
        return tuple
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if args else annotation
    paths = {"data_root", "val_root", "out", "resume", "input"}
    return PurePath if base is Path or (base is str and name in paths) else base


def _command(name: str):
    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]


def test_every_train_option_is_declared_once_with_its_type():
    hints = typing.get_type_hints(TrainConfig)
    fields = [f.name for f in dataclasses.fields(TrainConfig)]
    assert list(TRAIN.names) == fields  # one declaration per option, in the same order
    for name in fields:
        option = TRAIN[name]
        assert option.kind is _kind(hints[name], name), name
        assert option.optional == (TrainConfig.defaults()[name] is None), name
        # the default itself passes its declaration
        assert check(name, TrainConfig.defaults()[name]) == TrainConfig.defaults()[name]
    cli = {p.name for p in _command("train").params if p.param_type_name == "option"}
    assert cli - {"recipe_name"} == set(fields)


def test_every_analyze_option_is_declared_once_with_its_type():
    """AnalyzeConfig's fields are ANALYZE's options, in order, each of its annotation's kind
    with a default that passes its own declaration; the command is made from them: one
    parameter per field (the input a positional argument), with the field's help and panel."""
    hints = typing.get_type_hints(AnalyzeConfig)
    fields = [f.name for f in dataclasses.fields(AnalyzeConfig)]
    assert list(ANALYZE.names) == fields
    for f in dataclasses.fields(AnalyzeConfig):
        option = ANALYZE[f.name]
        assert option.kind is _kind(hints[f.name], f.name), f.name
        if f.default is not dataclasses.MISSING:
            assert option.normalise(f.default) == f.default, f.name
    params = {p.name: p for p in _command("analyze").params}
    assert params["input"].param_type_name == "argument"
    options = {n for n, p in params.items() if p.param_type_name == "option"}
    assert options - {"probe", "quiet", "batch_size", "help"} == set(fields) - {"input"}
    for name in set(fields) - {"input"}:
        assert params[name].help == ANALYZE[name].help, name
        assert params[name].rich_help_panel == (ANALYZE[name].panel or None), name
    assert params["renames"].opts == ["--rename"] and params["renames"].multiple
    assert params["out"].default is None  # <source>-analysis, read by from_command_line
    assert params["probes"].default == "all"
    assert set(MEASURE.names) == {"n_ref", "pairs", "num_pairs", "seed", "block_size", "hist_bins"}


def test_a_probe_suite_keys_an_option_as_the_command_line_spells_it(tmp_path):
    """``rename`` in a probe suite fills the field --rename fills (renames)."""
    from cl_diag.recipes import read_recipe

    suite = tmp_path / "suite.toml"
    suite.write_text('rename = ["^net\\\\.=backbone."]\nlayers = "all"\n', encoding="utf-8")
    assert read_recipe(suite, _command("analyze")) == {
        "renames": ["^net\\.=backbone."],
        "layers": "all",
    }
    suite.write_text("renames = 5\n", encoding="utf-8")
    with pytest.raises(UserError, match="must be a list"):
        read_recipe(suite, _command("analyze"))


def test_the_losses_that_take_views_and_queues_are_named_where_the_options_are():
    from cl_diag.losses import LOSSES
    from cl_diag.options import MULTI_VIEW_LOSSES, QUEUE_LOSSES

    assert {n for n, loss in LOSSES.items() if loss.multi_view} == set(MULTI_VIEW_LOSSES)
    assert {n for n, loss in LOSSES.items() if loss.takes_queue} == set(QUEUE_LOSSES)


@pytest.mark.parametrize("option", [o for o in TRAIN.options if o.low is not None or o.high])
def test_each_bound_refuses_the_value_beyond_it_and_keeps_the_one_at_it(option):
    kind = option.kind
    for edge, opened, step in (
        (option.low, option.low_open, -1),
        (option.high, option.high_open, 1),
    ):
        if edge is None:
            continue
        at = kind(edge)
        beyond = at + step if kind is int else math.nextafter(float(at), step * math.inf)
        with pytest.raises(OptionError) as err:
            check(option.name, at if opened else beyond)
        assert str(err.value).startswith(f"--{option.name.replace('_', '-')} ")
        assert option.range_text() in str(err.value)
        if not opened:
            assert check(option.name, at) == at


def test_one_declaration_three_spellings():
    for spelling, expected in (
        (CLI, "--batch-size -4 must be in [2, 1048576]"),
        (PYTHON, "batch_size=-4 must be in [2, 1048576]"),
        (in_config("runs/a/last.pt"), "config.batch_size = -4 must be in [2, 1048576]"),
    ):
        with pytest.raises(OptionError) as err:
            check("batch_size", -4, spelling=spelling)
        assert expected in str(err.value) and "no negative pairs" in str(err.value)
    with pytest.raises(OptionError, match=r"runs/a/last\.pt is a damaged cl-diag checkpoint"):
        check("batch_size", -4, spelling=in_config("runs/a/last.pt"))


def test_numbers_of_any_integer_type_are_whole_numbers_and_the_rest_are_not():
    assert check("epochs", np.int64(3)) == 3 and type(check("epochs", np.int64(3))) is int
    assert check("epochs", torch.tensor(3)) == 3
    assert check("lr", np.float32(0.5)) == 0.5 and check("lr", 2) == 2.0
    for bad in (3.0, "3", True, np.float64(3.0)):
        with pytest.raises(OptionError, match="must be a whole number"):
            check("epochs", bad)
    with pytest.raises(OptionError, match="must be a finite number"):
        check("bias", float("nan"))
    with pytest.raises(OptionError, match="must be a number"):
        check("temperature", "hot")


@pytest.mark.parametrize(
    "values, fragment",
    [
        (
            dict(projector_hidden=65536, projector_dim=65536),
            "--projector-hidden 65536 x --projector-dim 65536 = 4,294,967,296 float32 numbers",
        ),
        (dict(queue=1 << 24, projector_dim=128), "lower --queue to 524,288 or less"),
        (dict(views=64, batch_size=2048), "--views 64^2 x --batch-size 2048^2"),
        (
            dict(views=2, batch_size=4096, image_size=1024),
            "2 x --batch-size 4096 x --image-size 1024^2",
        ),
        (dict(num_samples=1 << 20, dim=1 << 10), "lower --num-samples to 131,072 or less"),
    ],
)
def test_products_of_options_are_bounded_and_the_message_says_what_fits(values, fragment):
    with pytest.raises(OptionError) as err:
        check_values(values, TRAIN)
    message = str(err.value)
    assert fragment in message and "cl-diag allows" in message, message
    # the largest value the message offers fits
    product = next(p for p in TRAIN.products if set(p.names) == set(values))
    fits = int(message.rsplit("lower ", 1)[1].split(" to ")[1].split(" ")[0].replace(",", ""))
    assert product.size({**values, product.lower: fits}) <= product.limit
    assert product.size({**values, product.lower: fits + 1}) > product.limit


# --------------------------------------------------------------------------- the command line


def test_train_values_out_of_bounds_exit_2_before_anything_is_written(run_cli, tmp_path):
    out = tmp_path / "run"
    for args, fragment in (
        (["--warmup-epochs", "1e308"], "--warmup-epochs 1e+308 must be in [0, 1000000]"),
        (["--views", "100000"], "--views 100000 must be in [2, 64]"),
        (["--queue", "1000000000"], "--queue 1000000000 must be in [0, 16777216]"),
        (["--loss", "vrn"], "vrn is a regulariser: --vrn LAMBDA adds it to any of them"),
        (["--key-momentum", "1"], "--key-momentum 1.0 must be in [0, 1)"),
    ):
        refused(run_cli("train", *args, "--out", out), fragment)
    assert not out.exists()


def test_options_that_do_not_apply_are_refused(run_cli, tmp_path, pairs_file):
    out = tmp_path / "out"
    refused(
        run_cli("train", "--val-root", tmp_path, "--out", out),
        "--val-root is the test split of --dataset imagefolder; digits has its own",
    )
    for option, value in (("--dataset", "cifar10"), ("--backbone-prefix", "net.")):
        refused(
            run_cli("analyze", pairs_file, option, value, "--out", out),
            f"{option} describes a checkpoint",
            "is an embeddings file",
            "drop it",
        )
    refused(
        run_cli("analyze", pairs_file, "--arch", "resnet18", "--rename", "a=b", "--out", out),
        "--arch, --rename describe a checkpoint",
    )
    assert not out.exists()


def test_options_of_an_embeddings_file_are_refused_for_a_checkpoint(
    run_cli, tmp_path, make_checkpoint
):
    source = make_checkpoint(tmp_path / "last.pt", dataset="digits")
    out = tmp_path / "out"
    # (--keys makes a file an embeddings file: a checkpoint given it lists its own arrays)
    refused(
        run_cli("analyze", source, "--labels", "class_ids", "--out", out),
        "--labels describes the arrays of an embeddings file",
        "is a checkpoint",
        "whose labels are its data set's",
        "drop it",
    )
    refused(
        run_cli("analyze", source, "--labels", "ids", "--cross-modal", "--out", out),
        "--labels and --cross-modal describe the arrays",
        "drop them",
    )
    assert not out.exists()


def test_a_missing_val_root_is_refused_by_train_not_by_the_analysis(
    run_cli, tmp_path, tiny_imagefolder
):
    train_root, _ = tiny_imagefolder
    out = tmp_path / "run"
    refused(
        run_cli(
            "train",
            "--dataset",
            "imagefolder",
            "--data-root",
            train_root,
            "--val-root",
            tmp_path / "no-such-folder",
            "--out",
            out,
        ),
        f"--val-root {tmp_path / 'no-such-folder'} does not exist; give the ImageFolder root",
    )
    assert not out.exists()


def test_analyze_batch_size_names_its_new_option(run_cli, tmp_path, pairs_file):
    out = tmp_path / "out"
    refused(
        run_cli("analyze", pairs_file, "--batch-size", "64", "--out", out),
        "--encode-batch-size (images per encoding batch; --batch-size is train's",
        "give --encode-batch-size 64",
    )
    suite = tmp_path / "old.toml"
    suite.write_text("batch-size = 128\n")
    refused(
        run_cli("analyze", pairs_file, "--probe", suite, "--out", out),
        "encode-batch-size = 128",
    )
    refused(
        run_cli("sweep", TOY, "--grid", "seed=1,2", "--probe", suite, "--out", tmp_path / "s"),
        "encode-batch-size = 128",
    )
    assert not out.exists() and not (tmp_path / "s").exists()


# --------------------------------------------------------------------------- the Python API


def test_measure_takes_numpy_integers_as_whole_numbers(pairs_file):
    data = np.load(pairs_file)
    z1, z2 = data["z1"], data["z2"]
    numpy_n = cl_diag.measure(z1, z2, n_ref=np.int64(100), num_pairs=np.int32(50))
    plain_n = cl_diag.measure(z1, z2, n_ref=100, num_pairs=50)
    assert numpy_n.n_ref == 100 and type(numpy_n.n_ref) is int
    assert numpy_n.to_json() == plain_n.to_json()


def test_analyze_api_names_its_options_in_python(tmp_path):
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 4))
    for kwargs, fragment in (
        (dict(image_size=10**6), "image_size=1000000 must be in [1, 1024]"),
        (dict(batch_size=64), "takes the encoding batch as encode_batch_size"),
        (dict(num_images=1), "num_images=1 must be in [2, 67108864]"),
        (dict(training_config={"loss": 7}), "training_config: config.loss = 7 must be a string"),
        (
            dict(training_config={"loss": "sigmoid", "temperature": "hot"}),
            "config.temperature = 'hot' must be a number",
        ),
        (
            dict(training_config={"loss": "sigmoid", "bias": float("nan")}),
            "config.bias = nan must be a finite number",
        ),
        (
            dict(training_config={"loss": "simclr", "batch_size": -4}),
            "config.batch_size = -4 must be in [2, 1048576]",
        ),
        (
            dict(training_config={"loss": "sigmoid", "temperature": -1.0}),
            "config.temperature = -1.0 is not a value the sigmoid loss takes",
        ),
    ):
        with pytest.raises(UserError) as err:
            cl_diag.analyze(encoder=encoder, dataset="digits", out=tmp_path / "o", **kwargs)
        assert fragment in str(err.value), (kwargs, str(err.value))
    assert not (tmp_path / "o").exists()


def test_analyze_api_bounds_the_encoding_batch_of_images(tmp_path):
    encoder = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    with pytest.raises(UserError) as err:
        cl_diag.analyze(
            encoder=encoder, dataset="digits", out=tmp_path / "o", image_size=1024, num_images=8
        )
    assert "3 x encode_batch_size=512 x image_size=1024^2" in str(err.value)
    assert "lower encode_batch_size to 341 or less" in str(err.value)
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- stored configs


def _config_case(key, value):
    return pytest.param(key, value, id=f"{key}={value!r}")


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"loss": "sigmoid", "temperature": "hot"}, "config.temperature = 'hot' must be a number"),
        ({"loss": "sigmoid", "bias": float("nan")}, "config.bias = nan must be a finite number"),
        ({"batch_size": -4}, "config.batch_size = -4 must be in [2, 1048576]"),
        ({"loss": 7}, "config.loss = 7 must be a string"),
        ({"loss": "nce"}, "config.loss = 'nce' is not one of: infonce"),
        (
            {"projector_hidden": 65536, "projector_dim": 65536},
            "config.projector_hidden = 65536 x config.projector_dim = 65536",
        ),
        ({"views": 100000}, "config.views = 100000 must be in [2, 64]"),
    ],
)
def test_a_checkpoints_config_is_checked_by_the_options_declarations(
    run_cli, make_checkpoint, tmp_path, change, fragment
):
    path = make_checkpoint(tmp_path / "last.pt", dataset="digits")
    bad = make_checkpoint.crafted(path, tmp_path / "bad.pt", config=change)
    refused(
        run_cli("analyze", bad, "--out", tmp_path / "out"),
        f"{bad} is a damaged cl-diag checkpoint: {fragment}",
        "Give the last.pt that cl-diag train wrote",
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "classes, fragment", [(0, "must be in [1, 67108864]"), ("x", "must be a whole number")]
)
def test_a_toy_checkpoints_classes_are_checked(
    run_cli, make_checkpoint, tmp_path, classes, fragment
):
    path = make_checkpoint(tmp_path / "last.pt", dataset="toy", batch_size=2)
    bad = make_checkpoint.crafted(path, tmp_path / "bad.pt", config={"num_classes": classes})
    refused(
        run_cli("analyze", bad, "--out", tmp_path / "out"),
        f"config.num_classes = {classes!r} {fragment}",
    )
    bad = make_checkpoint.crafted(path, tmp_path / "more.pt", config={"num_classes": 5})
    refused(run_cli("analyze", bad, "--out", tmp_path / "out"), "exceeds the 4 toy instances")


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"epoch": 1000}, "its epoch 1000 lies beyond the 3 epochs of the run"),
        ({"step": 10**15, "epoch": 3}, "its step 1000000000000000 lies beyond the 6 steps"),
        ({"step": 5, "epoch": 1}, "step 5 cannot be reached in 1 epochs of 2 steps"),
    ],
)
def test_resume_refuses_a_position_beyond_the_run(run_cli, tmp_path, change, fragment):
    run = tmp_path / "run"
    assert run_cli("train", TOY, "--steps", "6", "--out", run, "-q").code == 0
    payload = torch.load(run / "last.pt", weights_only=True)
    assert (payload["epoch"], payload["step"]) == (3, 6)  # 4 instances, batches of 2
    payload.update(change)
    bad = tmp_path / "bad" / "last.pt"
    bad.parent.mkdir()
    torch.save(payload, bad)
    refused(run_cli("train", "--resume", bad), fragment, "damaged cl-diag checkpoint")
    assert sorted(p.name for p in bad.parent.iterdir()) == ["last.pt"]


# --------------------------------------------------------------------------- under a memory cap

#: what the capped children may allocate beyond what they hold once cl-diag is imported
HEADROOM = 1 << 30


#: train's command lines that would allocate past any machine's memory, and what refuses them
TOO_BIG = [
    (["--queue", "1000000000"], "--queue 1000000000 must be in [0, 16777216]"),
    (["--views", "100000"], "--views 100000 must be in [2, 64]"),
    (
        ["--projector-hidden", "65536", "--projector-dim", "65536"],
        "lower --projector-hidden to 1,024 or less",
    ),
    (["--queue", "16777216", "--projector-dim", "4096"], "lower --queue to 16,384 or less"),
    (
        ["--batch-size", "4096", "--views", "8", "--image-size", "1024"],
        "8 x --batch-size 4096 x --image-size 1024^2",
    ),
    (
        ["--arch", "timm:vit_gigantic_patch14_224", "--dataset", "cifar10"],
        "--arch timm:vit_gigantic_patch14_224 has 1,842,775,680 parameters (6.9 GiB",
    ),
]


@pytest.mark.slow  # a child that imports torch and timm under the cap
def test_train_refuses_what_would_not_fit_under_a_memory_cap(capped_cli, tmp_path):
    """Each command line in one child capped at what it holds plus 1 GiB: a bound that is
    missing ends in a MemoryError (or a child killed), not in exit 2 with its message."""
    pytest.importorskip("timm")
    out = tmp_path / "run"
    commands = [["train", "--steps", "1", *args, "--out", str(out)] for args, _ in TOO_BIG]
    child = capped_cli(commands, HEADROOM)
    assert child.codes == [2] * len(TOO_BIG), child.stderr[-3000:]
    errors = [" ".join(line.split()) for line in child.stderr.split("error: ")[1:]]
    assert len(errors) == len(TOO_BIG), child.stderr[-3000:]
    for (args, fragment), error in zip(TOO_BIG, errors, strict=True):
        assert fragment in error, (args, error)
    assert "Traceback" not in child.stderr and not out.exists()


@pytest.mark.slow  # a child that imports torch and timm under the cap
def test_a_checkpoint_or_the_api_asking_too_much_is_refused_under_a_memory_cap(
    capped_cli, make_checkpoint, tmp_path
):
    pytest.importorskip("timm")
    path = make_checkpoint(tmp_path / "last.pt", dataset="digits")
    giant = make_checkpoint.crafted(
        path, tmp_path / "giant.pt", config={"arch": "timm:vit_gigantic_patch14_224"}
    )
    code = (
        "import torch, cl_diag\n"
        "from cl_diag.errors import UserError\n"
        "encoder = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())\n"
        "try:\n"
        f"    cl_diag.analyze(encoder=encoder, dataset='digits', out={str(tmp_path / 'o')!r},\n"
        "                    image_size=10**6, num_images=8)\n"
        "except UserError as err:\n"
        "    print('refused:', err)\n"
    )
    child = capped_cli([["analyze", str(giant), "--out", str(tmp_path / "out")]], HEADROOM, code)
    assert child.codes == [2], child.stderr[-3000:]
    message = " ".join(child.stderr.split())
    assert "The backbone timm:vit_gigantic_patch14_224 has 1,842,123,392 parameters" in message
    assert "more than the 1,073,741,824 cl-diag builds; choose a smaller model" in message
    assert "refused: image_size=1000000 must be in [1, 1024]" in child.stdout, child.stderr[-3000:]
    assert not (tmp_path / "out").exists() and not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- stored bounds


def test_the_run_config_table_is_trains_and_the_stem_padding():
    assert set(RUN_CONFIG.names) == set(TRAIN.names) | {"conv1_padding"}
    assert RUN_CONFIG.products == TRAIN.products
