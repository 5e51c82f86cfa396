"""``cl_diag.analyze(encoder=..., projector=..., dataset=..., out=...)`` (issue 15): the whole
protocol on an ``nn.Module`` the tool has never seen, no file format in between."""

from __future__ import annotations

import copy
import json
import re

import pytest
import torch
from torch import nn

import cl_diag
from cl_diag.errors import UserError


class _TinyEncoder(nn.Module):
    """A model of the user's own: nothing in cl-diag knows this class."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 12)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        return self.fc(h.mean(dim=(2, 3)))


class _WithLooseParameter(_TinyEncoder):
    """A parameter on a module without reset_parameters() (like a ViT's position embedding)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(12))

    def forward(self, x):
        return super().forward(x) * self.scale


def _models(seed: int = 0):
    torch.manual_seed(seed)
    encoder = _TinyEncoder()
    encoder.bn.running_mean.uniform_(-0.1, 0.1)
    projector = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 6))
    return encoder, projector


@pytest.mark.slow
def test_analyze_any_module_runs_the_whole_protocol(tmp_path, tiny_imagefolder):
    from cl_diag.measurement.views import sample_indices
    from cl_diag.training.augment import train_transform
    from cl_diag.training.data import TwoViews, load_dataset

    encoder, projector = _models()
    before = copy.deepcopy(encoder.state_dict())
    train, val = tiny_imagefolder
    out = tmp_path / "a"
    outcome = cl_diag.analyze(
        encoder=encoder,
        projector=projector,
        dataset="imagefolder",
        data_root=train,
        val_root=val,
        out=out,
        image_size=32,
        training_config={"loss": "simclr", "batch_size": 8, "temperature": 0.5},
        num_images=8,
        device="cpu",
    )
    data = json.loads((out / "result.json").read_text())
    assert outcome.result.to_dict() == data
    src = data["source"]
    assert (src["kind"], src["format"], src["dataset"], src["n_train"]) == (
        "module",
        "nn.Module",
        "imagefolder",
        16,
    )
    assert (
        src["arch"].endswith("_TinyEncoder")
        and src["projector"] == "torch.nn.modules.container.Sequential"
    )
    assert re.fullmatch(r"[0-9a-f]{64}", src["weights_sha256"])
    assert src["image_size"] == {"value": 32, "from": "image_size"}
    assert list(data["layers"]) == ["projector", "backbone"]
    assert (data["layers"]["projector"]["d"], data["layers"]["backbone"]["d"]) == (6, 12)
    assert data["n_ref"] == 16 and data["layers"]["backbone"]["n"] == 8
    probes = data["probes"]
    assert {"linear", "knn", "clustering", "retrieval"} <= set(probes)
    assert sorted(probes["baselines"]) == ["random_init", "raw_pixels"]
    assert set(probes["baselines"]["random_init"]) >= {"linear", "knn", "retrieval"}
    # theory from the config the caller passed
    assert data["config"]["loss"] == "simclr"
    assert data["theory"]["theorem"] == "5.1(i)" and data["theory"]["variance_band"]["m"] == 8

    # the measured positive mean is that of the modules themselves on the same two views
    views = TwoViews(
        load_dataset("imagefolder", "train", data_root=str(train)),
        train_transform("imagefolder", 32),
        0,
    )
    idx = sample_indices(16, 8, 0)
    x1 = torch.stack([views[int(i)][1] for i in idx])
    x2 = torch.stack([views[int(i)][2] for i in idx])
    encoder.eval()
    projector.eval()
    with torch.no_grad():
        z1, z2 = projector(encoder(x1)), projector(encoder(x2))
    expected = nn.functional.cosine_similarity(z1.double(), z2.double()).mean()
    assert data["layers"]["projector"]["pairs"]["positive"]["mean"] == pytest.approx(
        float(expected), abs=1e-5
    )
    assert all(torch.equal(before[k], v) for k, v in encoder.state_dict().items())
    report = (out / "report.md").read_text()
    assert "image sample, augmentations" in report


def test_modules_come_back_as_they_were(tmp_path, tiny_imagefolder):
    encoder, projector = _models(1)
    encoder.train(), projector.train()
    weights = copy.deepcopy(encoder.state_dict())
    cl_diag.analyze(
        encoder=encoder,
        projector=projector,
        dataset="imagefolder",
        data_root=tiny_imagefolder[0],
        out=tmp_path / "a",
        image_size=32,
        num_images=6,
        probes=("retrieval",),
        device="cpu",
    )
    assert encoder.training and encoder.bn.training and projector.training
    assert all(torch.equal(weights[k], v) for k, v in encoder.state_dict().items())


def test_a_module_that_cannot_be_reinitialised_has_no_random_twin(tmp_path, tiny_imagefolder):
    torch.manual_seed(2)
    encoder = _WithLooseParameter()
    out = tmp_path / "a"
    cl_diag.analyze(
        encoder=encoder,
        dataset="imagefolder",
        data_root=tiny_imagefolder[0],
        out=out,
        image_size=32,
        num_images=6,
        probes="retrieval",
        layers="backbone",
        device="cpu",
    )
    data = json.loads((out / "result.json").read_text())
    assert "scale" in data["source"]["random_init"]["encoder"]
    assert sorted(data["probes"]["baselines"]) == ["raw_pixels"]
    assert list(data["layers"]) == ["backbone"] and data["config"] == {}
    assert data["theory"]["statement"].startswith("No optimum is predicted")


def test_analyze_module_refuses_mistakes_with_the_fix(tmp_path):
    encoder, _ = _models()
    with pytest.raises(UserError, match="dataset 'mnist' is not one of digits, cifar10"):
        cl_diag.analyze(encoder=encoder, dataset="mnist", out=tmp_path / "a")
    with pytest.raises(UserError, match=r"unknown option.*num_imgs.*num_images"):
        cl_diag.analyze(encoder=encoder, dataset="digits", out=tmp_path / "a", num_imgs=5)
    with pytest.raises(UserError, match=r"encoder must be a torch.nn.Module"):
        cl_diag.analyze(encoder=lambda x: x, dataset="digits", out=tmp_path / "a")
    with pytest.raises(UserError, match="training_config must be a mapping"):
        cl_diag.analyze(encoder=encoder, dataset="digits", out=tmp_path / "a", training_config=3)
    with pytest.raises(UserError, match=re.escape("num_images=1 must be in [2, 67108864]")):
        cl_diag.analyze(encoder=encoder, dataset="digits", out=tmp_path / "a", num_images=1)
    assert not (tmp_path / "a").exists()
