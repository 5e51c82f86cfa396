"""The models home: the architecture registry, the one builder, and rebuilding a checkpoint."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from cl_diag.errors import UserError
from cl_diag.models import (
    ARCHS,
    FOREIGN_ARCHS,
    ArchSpec,
    BackboneOptions,
    arch_names,
    build_backbone,
    build_model,
    default_arch,
    default_projector_hidden,
    get_arch,
    is_convolutional,
    load_foreign_encoder,
    read_checkpoint_file,
    register_arch_family,
    registry,
)
from cl_diag.orchestration.subject import open_subject
from cl_diag.training.checkpoint import load_checkpoint

#: (arch, input shape of one image, expected feature width)
EVERY_ARCH = [
    ("small-cnn", (1, 8, 8), 64),
    ("resnet18-cifar", (3, 32, 32), 512),
    ("resnet18", (3, 64, 64), 512),
    ("resnet34-cifar", (3, 32, 32), 512),
    ("resnet34", (3, 64, 64), 512),
    ("resnet50-cifar", (3, 32, 32), 2048),
    ("resnet50", (3, 64, 64), 2048),
]


def test_every_registered_arch_is_covered_here():
    assert set(arch_names()) == {name for name, _, _ in EVERY_ARCH} | {"embedding"}


@pytest.mark.parametrize("arch, shape, width", EVERY_ARCH)
def test_every_arch_builds_and_outputs_its_feature_dim(arch, shape, width):
    spec = get_arch(arch)
    backbone, dim = build_backbone(arch, BackboneOptions(in_channels=shape[0]))
    assert dim == spec.feature_dim == width
    with torch.no_grad():
        out = backbone.eval()(torch.randn(2, *shape, generator=torch.Generator().manual_seed(0)))
    assert out.shape == (2, width)
    assert spec.convolutional and is_convolutional(arch)
    if arch.startswith("resnet"):
        # the CIFAR stem: a 3x3 stride-1 convolution and no max-pool; else torchvision's 7x7/2
        assert spec.cifar_stem == arch.endswith("-cifar")
        assert backbone.conv1.kernel_size == ((3, 3) if spec.cifar_stem else (7, 7))
        assert backbone.conv1.stride == ((1, 1) if spec.cifar_stem else (2, 2))
        assert isinstance(backbone.maxpool, nn.Identity) == spec.cifar_stem
        assert isinstance(backbone.fc, nn.Identity)


def test_cifar_stem_padding_and_channels_reach_the_stem():
    padded, _ = build_backbone("resnet18-cifar", BackboneOptions(cifar_stem_padding=2))
    assert padded.conv1.padding == (2, 2)
    grey, _ = build_backbone("resnet18", BackboneOptions(in_channels=1))
    assert grey.conv1.in_channels == 1 and grey.conv1.kernel_size == (7, 7)


def test_embedding_arch_is_the_toy_vectors():
    spec = get_arch("embedding")
    vectors, dim = build_backbone("embedding", BackboneOptions(num_samples=5, dim=7))
    assert dim == 7 and vectors.weight.shape == (10, 7)
    assert spec.projector_hidden is None and not spec.convolutional
    assert not is_convolutional("embedding")


def test_names_offered_for_training_and_for_foreign_checkpoints():
    # the choices `train --arch` and `analyze --arch` list, in the order their messages give
    assert ARCHS == ("small-cnn", "resnet18-cifar", "resnet18", "resnet50", "embedding")
    assert FOREIGN_ARCHS == (
        "resnet18-cifar",
        "resnet18",
        "resnet34-cifar",
        "resnet34",
        "resnet50-cifar",
        "resnet50",
    )
    assert [default_arch(d) for d in ("digits", "cifar10", "cifar100", "imagefolder", "toy")] == [
        "small-cnn",
        "resnet18-cifar",
        "resnet18-cifar",
        "resnet18",
        "embedding",
    ]
    assert default_projector_hidden("resnet50") == 2048
    assert default_projector_hidden("resnet18") == 512
    assert default_projector_hidden("small-cnn") == 512


def test_unknown_arch_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown arch 'vgg11'.*resnet18-cifar"):
        get_arch("vgg11")
    with pytest.raises(ValueError, match="unknown arch 'timm:vit_tiny'"):
        get_arch("timm:vit_tiny")  # the timm family: timm has no model 'vit_tiny'


def test_an_arch_family_resolves_prefixed_names(monkeypatch):
    monkeypatch.setattr(registry, "_FAMILIES", {})
    built: list[str] = []

    def resolve(name: str) -> ArchSpec:
        if name != "tiny":
            raise ValueError(f"unknown test arch {name!r}")

        def build(options: BackboneOptions) -> nn.Module:
            built.append(name)
            return nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 5))

        return ArchSpec(
            "test:tiny",
            build,
            5,
            16,
            convolutional=False,
            cifar_stem=False,
            trainable=False,
            foreign=False,
        )

    register_arch_family("test", resolve)
    module, dim = build_backbone("test:tiny")
    assert dim == 5 and built == ["tiny"] and module(torch.zeros(2, 3, 4, 4)).shape == (2, 5)
    with pytest.raises(ValueError, match="unknown test arch 'huge'"):
        get_arch("test:huge")
    with pytest.raises(ValueError, match="test:NAME"):
        get_arch("nothing")
    with pytest.raises(ValueError):
        register_arch_family("test", resolve)  # a prefix is registered once
    assert "test:tiny" not in arch_names()  # families are resolved, not listed


def test_build_model_reads_projector_options_from_the_registry():
    model = build_model({"dataset": "imagefolder", "arch": "resnet50", "projector_dim": 32}, seed=0)
    assert model.feature_dim == 2048 and model.projector[0].out_features == 2048
    assert model.projector[3].out_features == 32
    with pytest.raises(ValueError, match="unknown arch"):
        build_model({"dataset": "cifar10", "arch": "vgg11"})


def test_one_builder_for_training_and_foreign_checkpoints(tmp_path):
    """A backbone the trainer builds loads strictly as a foreign checkpoint of the same arch
    and computes the same function: both paths build through the one registry builder."""
    model = build_model({"dataset": "cifar10", "arch": "resnet18-cifar"}, seed=4).eval()
    path = tmp_path / "backbone.pth"
    torch.save({f"backbone.{k}": v for k, v in model.backbone.state_dict().items()}, path)
    file = read_checkpoint_file(path)
    assert file.kind == "state-dict"
    encoder = load_foreign_encoder(file, arch="resnet18-cifar", dataset="cifar10")
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(encoder.backbone(x), model.backbone(x))


def test_foreign_random_twin_is_seeded_and_leaves_the_rng_alone():
    torchvision_net = torchvision.models.resnet18(weights=None)
    torchvision_net.fc = nn.Identity()
    path_state = {k: v for k, v in torchvision_net.state_dict().items()}
    torch.manual_seed(123)
    before = torch.get_rng_state()

    class _File:  # the fields load_foreign_encoder reads
        kind, payload, path = "state-dict", path_state, None

    encoder = load_foreign_encoder(_File(), arch="resnet18", dataset="imagefolder")
    a, _ = encoder.random_init(7)
    b, _ = encoder.random_init(7)
    c, _ = encoder.random_init(8)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(a.conv1.weight, b.conv1.weight)
    assert not torch.equal(a.conv1.weight, c.conv1.weight)


def test_open_subject_rebuilds_a_cl_diag_checkpoint_without_reading_it_twice(
    tmp_path, monkeypatch, make_checkpoint
):
    make_checkpoint(tmp_path / "last.pt", dataset="digits", seed=3)
    model = build_model(load_checkpoint(tmp_path / "last.pt")["config"], seed=3).eval()
    file = read_checkpoint_file(tmp_path / "last.pt")

    def no_second_read(*args, **kwargs):
        raise AssertionError("the checkpoint was read again")

    monkeypatch.setattr(torch, "load", no_second_read)
    subject = open_subject(file, seed=0, run_record_fields={"workers", "device"})
    x = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.equal(subject.projector(subject.backbone(x)), model(x))
        assert not torch.equal(subject.random_backbone(x), model.backbone(x))
    assert list(subject.source)[:3] == ["kind", "format", "path"]
    assert subject.source["kind"] == "checkpoint" and subject.source["arch"] == "small-cnn"
    assert list(subject.source)[-1] == "weights_sha256"
    assert "workers" not in subject.training_config and subject.training_config["loss"] == "simclr"
    assert subject.n_train == len(subject.two_views)
    assert len(subject.eval_split("test")) > 0


def test_open_subject_refuses_foreign_options_and_another_dataset(tmp_path, make_checkpoint):
    make_checkpoint(tmp_path / "last.pt", dataset="digits")
    file = read_checkpoint_file(tmp_path / "last.pt")
    with pytest.raises(UserError, match="--arch applies to foreign checkpoints only"):
        open_subject(file, arch="resnet18")
    with pytest.raises(UserError, match="trained on digits; --dataset cifar10 cannot change that"):
        open_subject(file, dataset="cifar10")
