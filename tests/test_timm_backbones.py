"""timm backbones (issue 13, section 3): ``--arch timm:NAME`` for analyze and train, built with
``pretrained=False``, a strict key check, tested with small timm models built and saved here."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from cl_diag.errors import UserError
from cl_diag.models import (
    BackboneOptions,
    build_backbone,
    get_arch,
    load_foreign_encoder,
    read_checkpoint_file,
)
from cl_diag.models.timm_backbones import resolve_timm

timm = pytest.importorskip("timm")


def _assert_refused(result, *fragments):
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.err + result.out
    message = " ".join(result.err.split()).lower()
    for fragment in fragments:
        assert fragment.lower() in message, (fragment, result.err)


def _saved_classifier(path, name: str, seed: int) -> torch.nn.Module:
    """A timm classifier (head included) saved as its plain state dict, as users save one."""
    torch.manual_seed(seed)
    model = timm.create_model(name, pretrained=False, num_classes=5).eval()
    torch.save(model.state_dict(), path)
    return model


def test_timm_names_resolve_without_downloading(monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("timm was asked for pretrained weights")

    monkeypatch.setattr(timm.models._builder, "load_pretrained", no_download)
    vit = get_arch("timm:test_vit")
    assert (vit.name, vit.input_size, vit.heads, vit.feature_dim) == (
        "timm:test_vit",
        160,  # fixed by its position embeddings
        ("head",),
        None,  # read off the built model
    )
    assert vit.trainable and vit.foreign and not vit.cifar_stem
    backbone, dim = build_backbone("timm:test_vit")
    assert dim == 64
    with torch.no_grad():
        assert backbone.eval()(torch.zeros(2, 3, 160, 160)).shape == (2, 64)
    resnet = get_arch("timm:test_resnet")
    assert resnet.input_size is None and resnet.heads == ("fc",)
    grey, dim = build_backbone("timm:test_resnet", BackboneOptions(in_channels=1))
    assert dim == 96 and grey.conv1[0].in_channels == 1


def test_unknown_timm_name_and_missing_timm(monkeypatch):
    with pytest.raises(ValueError, match=r"unknown arch 'timm:vit_tiny'.*vit_tiny_patch16_224"):
        get_arch("timm:vit_tiny")
    resolve_timm.cache_clear()
    monkeypatch.setitem(sys.modules, "timm", None)  # as if timm were not installed
    try:
        with pytest.raises(UserError, match=r"needs the timm package.*cl-diag\[timm\]"):
            get_arch("timm:test_vit")
    finally:
        resolve_timm.cache_clear()


def test_saved_timm_state_dict_loads_strictly_without_its_head(tmp_path):
    path = tmp_path / "vit.pth"
    model = _saved_classifier(path, "test_vit", seed=0)
    file = read_checkpoint_file(path, arch="timm:test_vit")  # any state dict, given --arch
    assert file.kind == "state-dict"
    enc = load_foreign_encoder(file, arch="timm:test_vit", dataset="imagefolder")
    assert enc.ignored == ["head"] and enc.projector is None and enc.feature_dim == 64
    x = torch.randn(2, 3, 160, 160, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model.forward_head(model.forward_features(x), pre_logits=True)
        assert torch.allclose(enc.backbone(x), expected, atol=1e-5)
    # without --arch the message shows the keys and names the timm model they match, with the
    # command that reads it (the command itself succeeds two lines up)
    with pytest.raises(
        UserError,
        match=r"'blocks\.' \(\d+ tensors\).*those of timm's test_vit.*"
        r"--arch timm:test_vit --image-size 160",
    ):
        read_checkpoint_file(path)


def test_wrong_timm_model_lists_missing_and_unexpected_keys(run_cli, tmp_path):
    path = tmp_path / "vit.pth"
    _saved_classifier(path, "test_vit", seed=0)
    result = run_cli(
        "analyze",
        path,
        "--arch",
        "timm:test_resnet",
        "--dataset",
        "imagefolder",
        "--out",
        tmp_path / "o",
    )
    _assert_refused(
        result,
        "backbone (timm:test_resnet) weights do not fit",
        "missing keys: conv1.0.weight",
        "unexpected keys: cls_token, pos_embed",
    )
    result = run_cli("analyze", path, "--arch", "timm:no_such_model", "--out", tmp_path / "o")
    _assert_refused(result, "--arch timm:no_such_model", "has no model 'no_such_model'")


def test_timm_state_dict_end_to_end(run_cli, tmp_path, tiny_imagefolder):
    path = tmp_path / "resnet.pth"
    _saved_classifier(path, "test_resnet", seed=2)
    train, val = tiny_imagefolder
    out = tmp_path / "analysis"
    result = run_cli(
        "analyze",
        path,
        "--arch",
        "timm:test_resnet",
        "--dataset",
        "imagefolder",
        "--data-root",
        train,
        "--val-root",
        val,
        "--probe",
        "quick",
        "--probes",
        "retrieval",
        "--num-images",
        "8",
        "--out",
        out,
    )
    assert result.code == 0, result.err
    data = json.loads((out / "result.json").read_text())
    src = data["source"]
    assert (src["format"], src["arch"], src["ignored_modules"]) == (
        "state-dict",
        "timm:test_resnet",
        ["fc"],
    )
    assert src["provenance"]["arch"] == "--arch"
    # nothing records the side it was trained at: an image folder at ImageNet's, with a warning
    assert src["image_size"]["value"] == 224 and src["image_size"]["from"].startswith("a guess")
    assert "records no training image size" in " ".join(result.err.split())
    assert list(data["layers"]) == ["backbone"] and data["layers"]["backbone"]["d"] == 96
    assert src["layers_skipped"] == {"projector": "the file holds no projector weights"}
    assert sorted(data["probes"]["baselines"]) == ["random_init", "raw_pixels"]


@pytest.mark.slow
def test_train_and_analyze_a_timm_backbone(run_cli, tmp_path):
    out = tmp_path / "run"
    common = ("--dataset", "digits", "--batch-size", "16", "--steps", "2", "--device", "cpu")
    result = run_cli(
        "train", *common, "--arch", "timm:test_resnet", "--workers", "0", "--out", out, "--quiet"
    )
    assert result.code == 0, result.err
    saved = torch.load(out / "last.pt", weights_only=True)
    assert saved["config"]["arch"] == "timm:test_resnet"
    assert saved["backbone"]["conv1.0.weight"].shape[1] == 1  # digits: one channel
    analysis = tmp_path / "analysis"
    result = run_cli(
        "analyze", out / "last.pt", "--probes", "none", "--num-images", "16", "--out", analysis
    )
    assert result.code == 0, result.err
    data = json.loads((analysis / "result.json").read_text())
    assert data["source"]["arch"] == "timm:test_resnet"
    assert (data["layers"]["backbone"]["d"], data["layers"]["projector"]["d"]) == (96, 128)

    # a ViT's input size is fixed by its position embeddings
    result = run_cli(
        "train", *common, "--arch", "timm:test_vit", "--image-size", "32", "--out", out
    )
    _assert_refused(result, "--arch timm:test_vit takes 160x160 images", "--image-size 32")
    result = run_cli("train", *common, "--arch", "timm:vit_tiny", "--out", out)
    _assert_refused(result, "unknown arch 'timm:vit_tiny'")
