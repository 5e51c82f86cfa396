"""No silent resolution mismatch (issue 24, items 1 and 2): the side of the images ``analyze``
encodes, recorded in result.json and the report; foreign models on the embedded digits; plain
progress lines in a pipe.

The users' paths as tests: lightly's tutorial save of a ResNet-18 loads with the flag the
error message suggests and, analysed at the side it was trained at, gives the statistics of
``cl_diag.analyze(..., image_size=32)`` on the same module; a timm state dict on digits gives
the statistics of the same timm model fed the grey digit repeated to three channels.
"""

from __future__ import annotations

import json
import re
import shlex
import warnings

import pytest
import torch
import torchvision
from torch import nn

import cl_diag
from cl_diag.errors import InputWarning, UserError
from cl_diag.models.subject import DataSpec
from cl_diag.orchestration.subject import resolve_image_size
from cl_diag.training.augment import eval_transform, train_transform
from cl_diag.training.data import load_dataset


def _spec(dataset: str = "cifar10", **fields) -> DataSpec:
    return DataSpec(dataset, data_root=None, val_root=None, num_samples=None, **fields)


def _resolve(spec: DataSpec, requested: int | None = None):
    """(side, record, warnings raised) of resolve_image_size."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        side, record = resolve_image_size(spec, requested, where="m.pt", option="--image-size")
    return side, record, [str(w.message) for w in caught if w.category is InputWarning]


# --------------------------------------------------------------------------- the rule


def test_the_dataset_decides_when_nothing_else_is_known():
    assert _resolve(_spec("cifar10", image_size=None)) == (
        32,
        {"value": 32, "from": "the cifar10 images' own size"},
        [],
    )
    side, record, said = _resolve(_spec("digits", image_size=None, channels=3))
    assert (side, record["channels"], said) == (8, 3, [])
    # an image folder: 224 is a guess, and the warning says so in one line
    side, record, said = _resolve(_spec("imagefolder", image_size=None))
    assert side == 224 and record["from"].startswith("a guess")
    assert len(said) == 1 and "\n" not in said[0]
    assert "records no training image size" in said[0] and "give --image-size" in said[0]


def test_the_recorded_training_size_wins_over_the_dataset_and_a_request_over_both():
    recorded = _spec(
        "imagefolder",
        image_size=None,
        trained_size=32,
        trained_size_from="args.json beside the checkpoint",
    )
    assert _resolve(recorded) == (
        32,
        {
            "value": 32,
            "from": "the training size (args.json beside the checkpoint)",
            "trained": 32,
        },
        [],
    )
    side, record, said = _resolve(recorded, 96)
    assert (side, record) == (96, {"value": 96, "from": "--image-size", "trained": 32})
    assert said == [
        "m.pt was trained at 32 px (args.json beside the checkpoint) but is analysed at 96 px "
        "(--image-size): its similarities at another resolution are not the ones it learned; "
        "drop --image-size to analyse at 32 px."
    ]
    # the same side as recorded: no warning
    assert _resolve(recorded, 32)[2] == []


def test_a_cl_diag_checkpoint_without_a_recorded_size_was_trained_at_the_default():
    spec = _spec("digits", image_size=None, trained_size_from="cl-diag train's default for digits")
    assert _resolve(spec)[:2] == (
        8,
        {
            "value": 8,
            "from": "the training size (cl-diag train's default for digits)",
            "trained": 8,
        },
    )
    assert "was trained at 8 px" in _resolve(spec, 16)[2][0]


def test_a_fixed_input_is_required_and_a_cifar_stem_only_suggested():
    vit = _spec("imagefolder", image_size=160, image_size_from="the fixed input", fixed_size=True)
    assert _resolve(vit)[:2] == (160, {"value": 160, "from": "the fixed input"})
    with pytest.raises(UserError, match=r"--image-size 96: m.pt takes 160-px images only"):
        _resolve(vit, 96)
    stem = _spec("imagefolder", image_size=32, image_size_from="CIFAR's side")
    assert _resolve(stem) == (32, {"value": 32, "from": "CIFAR's side"}, [])
    assert _resolve(stem, 64)[:2] == (64, {"value": 64, "from": "--image-size"})


def test_digits_for_a_three_channel_model_are_resized_and_repeated():
    digit = load_dataset("digits", "test")[0][0]
    grey = eval_transform("digits", 32)(digit)
    rgb = eval_transform("digits", 32, channels=3)(digit)
    assert grey.shape == (1, 32, 32) and rgb.shape == (3, 32, 32)
    assert all(torch.equal(rgb[c], grey[0]) for c in range(3))
    torch.manual_seed(0)
    a = train_transform("digits", 16)(digit)
    torch.manual_seed(0)
    b = train_transform("digits", 16, channels=3)(digit)
    assert torch.equal(b, a.expand(3, 16, 16))


# --------------------------------------------------------------------------- progress


def test_plain_progress_lines_are_rate_limited():
    from cl_diag.cli.progress import plain_counter

    lines: list[str] = []

    class Out:
        def write(self, text: str) -> None:
            lines.extend(t for t in text.splitlines() if t)

        def flush(self) -> None:
            pass

    now = [0.0]
    factory = plain_counter(Out(), every=5.0, clock=lambda: now[0])
    advance = factory("encoding 10,000 images", 10_000)
    for _ in range(99):  # 100 images a second for 99 seconds: a line every 5 seconds
        now[0] += 1.0
        advance(100)
    now[0] += 1.0
    advance(100)
    assert lines[0] == "encoding 10,000 images: 0/10,000"
    assert lines[1] == "encoding 10,000 images: 500/10,000 (5 %, 100/s)"
    assert lines[-1] == "encoding 10,000 images: 10,000/10,000 (100 %, 100/s)"
    assert len(lines) == 1 + 19 + 1  # the start, every 5 s up to 95 s, and the end
    other = factory("fitting the probes", None)
    other(1)
    assert lines[-2:] == ["fitting the probes ...", "fitting the probes: done"]


# --------------------------------------------------------------------------- lightly


def _randomise_bn(module: nn.Module) -> nn.Module:
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return module


def _suggestion(message: str) -> list[str]:
    """The flags after 'e.g.' in the unknown-layout message, as a shell would split them."""
    found = re.search(r"; e\.g\. (.+?)\. Supported layouts", " ".join(message.split()))
    assert found, message
    return shlex.split(found.group(1))


def _same_layer(cli: dict, api: dict) -> None:
    """One layer's block of result.json, from the CLI and from the API: the same numbers
    (the same weights on the same images: the same features, bit for bit)."""
    assert cli == json.loads(json.dumps(api))


@pytest.mark.slow  # end to end: the full suite runs it
def test_lightly_tutorial_save_analysed_at_the_right_size_with_the_suggested_flag(
    run_cli, tiny_imagefolder, tmp_path
):
    torch.manual_seed(5)
    # lightly's tutorials: the ResNet's children without fc, saved under a name of their own
    backbone = nn.Sequential(*list(torchvision.models.resnet18().children())[:-1])
    backbone = _randomise_bn(backbone).eval()
    path = tmp_path / "model.pth"
    torch.save({"resnet18_parameters": backbone.state_dict()}, path)
    train, val = tiny_imagefolder
    data = ["--dataset", "imagefolder", "--data-root", train, "--val-root", val]
    quick = ["--num-images", "8", "--probes", "none", "--layers", "backbone"]

    refused = run_cli("analyze", path, *data, "--out", tmp_path / "no")
    assert refused.code == 2 and not (tmp_path / "no").exists()
    flags = _suggestion(refused.err)
    assert flags == ["--arch", "resnet18", "--backbone-prefix", "resnet18_parameters."]

    # nothing records the side it was trained at: an image folder is read at 224, with a warning
    guessed = run_cli("analyze", path, *flags, *data, *quick, "--out", tmp_path / "guess")
    assert guessed.code == 0, guessed.err
    assert "warning: " in guessed.err and "224 px, a guess" in " ".join(guessed.err.split())
    guess = json.loads((tmp_path / "guess" / "result.json").read_text())
    assert guess["source"]["image_size"]["value"] == 224

    out = tmp_path / "at32"
    run = run_cli("analyze", path, *flags, *data, *quick, "--image-size", "32", "--out", out)
    assert run.code == 0, run.err
    assert "warning" not in run.err
    result = json.loads((out / "result.json").read_text())
    assert result["source"]["image_size"] == {"value": 32, "from": "--image-size"}
    assert result["source"]["layout"]["key_map"].startswith("nn.Sequential of ResNet children")
    assert "| image size | 32 px (--image-size) |" in (out / "report.md").read_text()
    assert "<td>image size</td><td>32 px (--image-size)</td>" in (out / "report.html").read_text()
    # a pipe: plain progress lines on stderr, never a bar's control characters
    assert "encoding 2 augmented views of 8 training images: 0/8" in run.err
    assert re.search(r"encoding 2 augmented views of 8 training images: 8/8 \(100 %", run.err)
    assert "\x1b" not in run.err + run.out

    api = cl_diag.analyze(
        encoder=backbone,
        dataset="imagefolder",
        data_root=train,
        val_root=val,
        image_size=32,
        out=tmp_path / "api",
        num_images=8,
        probes=(),
        layers=("backbone",),
    )
    assert api.result.source.image_size is not None
    assert api.result.source.image_size.value == 32
    _same_layer(result["layers"]["backbone"], api.result.layers["backbone"].to_dict())
    # at 224 px the same weights measure something else: the size is not a detail
    assert guess["layers"]["backbone"]["pairs"] != result["layers"]["backbone"]["pairs"]


@pytest.mark.slow  # end to end: the full suite runs it
def test_a_size_other_than_the_recorded_one_is_measured_with_a_warning(run_cli, tmp_path):
    torch.manual_seed(6)
    backbone = _randomise_bn(
        nn.Sequential(*list(torchvision.models.resnet18().children())[:-1])
    ).eval()
    path = tmp_path / "lightly.ckpt"
    # a Lightning checkpoint of a lightly module: its hyper_parameters state the crop side
    state = {f"backbone.{k}": v for k, v in backbone.state_dict().items()}
    torch.save({"state_dict": state, "hyper_parameters": {"input_size": 16}, "epoch": 3}, path)
    quick = [
        "--arch",
        "resnet18",
        "--dataset",
        "digits",
        "--num-images",
        "8",
        "--probes",
        "none",
        "-q",
    ]
    recorded = run_cli("analyze", path, *quick, "--out", tmp_path / "a")
    assert recorded.code == 0, recorded.err
    assert recorded.err == ""  # --quiet: no progress, and no warning to give
    source = json.loads((tmp_path / "a" / "result.json").read_text())["source"]
    assert source["image_size"] == {
        "value": 16,
        "from": "the training size (the Lightning checkpoint's hyper_parameters)",
        "trained": 16,
        "channels": 3,
    }
    other = run_cli("analyze", path, *quick, "--image-size", "8", "--out", tmp_path / "b")
    assert other.code == 0, other.err
    warning = [line for line in other.err.splitlines() if line.startswith("warning:")]
    assert warning == [
        f"warning: {path} was trained at 16 px (the Lightning checkpoint's hyper_parameters) "
        "but is analysed at 8 px (--image-size): its similarities at another resolution are "
        "not the ones it learned; drop --image-size to analyse at 16 px."
    ]
    report = (tmp_path / "b" / "report.md").read_text()
    assert "| image size | 8 px (--image-size; trained at 16 px, NOT the size analysed; " in report


# --------------------------------------------------------------------------- timm on digits


@pytest.mark.slow  # end to end: the full suite runs it
def test_a_timm_state_dict_on_digits(run_cli, tmp_path):
    timm = pytest.importorskip("timm")
    torch.manual_seed(7)
    model = timm.create_model("test_resnet", pretrained=False, num_classes=0).eval()
    path = tmp_path / "timm.pth"
    torch.save(model.state_dict(), path)
    out = tmp_path / "a"
    args = ["--num-images", "24", "--probes", "knn", "--no-baselines"]
    run = run_cli(
        "analyze", path, "--arch", "timm:test_resnet", "--dataset", "digits", *args, "--out", out
    )
    assert run.code == 0, run.err
    result = json.loads((out / "result.json").read_text())
    assert result["source"]["dataset"] == "digits"
    assert result["source"]["image_size"] == {
        "value": 8,
        "from": "the digits images' own size",
        "channels": 3,
    }
    assert result["layers"]["backbone"]["n"] == 24
    assert 0.0 <= result["probes"]["knn"]["k20"]["top1"] <= 1.0

    # the API feeds the grey digit to the 3-channel network as the command line does
    with pytest.warns(InputWarning, match="analysed at 8 px"):
        api = cl_diag.analyze(
            encoder=model,
            dataset="digits",
            out=tmp_path / "api",
            num_images=24,
            probes=("knn",),
            baselines=False,
            layers=("backbone",),
        )
    _same_layer(result["layers"]["backbone"], api.result.layers["backbone"].to_dict())
    assert result["probes"]["knn"] == api.result.probes.to_dict()["knn"]


def test_the_crop_side_foreign_configs_state():
    from argparse import Namespace

    from cl_diag.models.foreign import recorded_crop_side, solo_training_config

    # solo-learn: new (Hydra) args.json, old flat argparse with multi-crop sides
    hydra = {"method": "simclr", "augmentations": [{"crop_size": 32, "num_crops": 2}]}
    assert recorded_crop_side(hydra) == 32
    assert solo_training_config(hydra)["image_size"] == 32
    assert recorded_crop_side({"crop_size": [224, 96], "num_crops_per_aug": [2, 6]}) == 224
    # a Lightning module's hyper_parameters, DINOv2's crops, timm's (C, H, W)
    assert recorded_crop_side({"input_size": 64}) == 64
    assert recorded_crop_side(Namespace(crops={"global_crops_size": 224})) == 224
    assert recorded_crop_side({"img_size": (3, 96, 96)}) == 96
    # nothing stated, or not a side: nothing recorded (the dataset then decides)
    assert recorded_crop_side({"global_crops_scale": (0.4, 1.0)}) is None
    assert recorded_crop_side({"crop_size": True}) is None
    assert recorded_crop_side({"img_size": (3, 96, 64)}) is None
    assert "image_size" not in solo_training_config({"method": "simclr"})
