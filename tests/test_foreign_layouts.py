"""Checkpoints from the field (issue 15): lightly (plain and Lightning), MoCo v2/v3, DINO, and
files of any other layout mapped with --backbone-prefix / --projector-prefix / --rename.

Each layout is built here with the real module structure (lightly's SimCLRProjectionHead from
lightly itself; MoCo's and DINO's wrappers as their official repositories define them), saved
as those projects save it, and then loaded: the rebuilt modules must compute the same function
as the originals, and the analysis must run end to end on a tiny ImageFolder.
"""

from __future__ import annotations

import argparse
import json
import warnings

import pytest
import torch
import torchvision
from torch import nn
from torch.nn import functional as F

from cl_diag.errors import UserError
from cl_diag.models import KeyMapping, load_foreign_encoder, read_checkpoint_file
from cl_diag.models.checkpoints import weights_sha256
from cl_diag.models.foreign import layout_of

X32 = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))
X64 = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))


def _assert_refused(result, *fragments):
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.err + result.out
    message = " ".join(result.err.split()).lower()
    for fragment in fragments:
        assert fragment.lower() in message, (fragment, result.err)


def _randomise_bn(module: nn.Module) -> nn.Module:
    # Non-trivial running statistics, so that eval mode (what is measured) is what is tested.
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) and m.running_mean is not None:
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return module


def _cifar_resnet18(num_classes: int = 1000) -> nn.Module:
    net = torchvision.models.resnet18(weights=None, num_classes=num_classes)
    net.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    net.maxpool = nn.Identity()
    return net


def _stepped(optimizer: torch.optim.Optimizer) -> dict:
    """The optimiser's state after one step: momentum buffers, as a real checkpoint has."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            param.grad = torch.full_like(param, 1e-3)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return optimizer.state_dict()


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def _analyze(run_cli, path, images, out, *extra, probes="all"):
    """Analyse on the tiny ImageFolder: the quick suite, 8 images; ``probes="retrieval"``
    keeps both baselines but skips the classification probes (seconds on a busy CPU)."""
    train, val = images
    result = run_cli(
        "analyze",
        path,
        "--dataset",
        "imagefolder",
        "--data-root",
        train,
        "--val-root",
        val,
        "--probe",
        "quick",
        "--num-images",
        "8",
        "--probes",
        probes,
        "--out",
        out,
        *extra,
    )
    assert result.code == 0, result.err
    return json.loads((out / "result.json").read_text())


def _check_layers(data: dict, d: dict) -> None:
    assert list(data["layers"]) == list(d)
    for layer, width in d.items():
        entry = data["layers"][layer]
        assert (entry["n"], entry["d"]) == (8, width)
        assert entry["pairs"]["cross_view_negative"]["count"] == 8 * 7
    assert data["n_ref"] == 16 and data["source"]["n_train"] == 16
    assert sorted(data["probes"]["baselines"]) == ["random_init", "raw_pixels"]


# --------------------------------------------------------------------------- lightly


class _LightlySimCLR(nn.Module):
    """lightly's SimCLR tutorial model: the ResNet's children without fc, and lightly's head."""

    def __init__(self, resnet: nn.Module):
        from lightly.models.modules import SimCLRProjectionHead

        super().__init__()
        self.backbone = nn.Sequential(*list(resnet.children())[:-1])
        self.projection_head = SimCLRProjectionHead(512, 512, 128)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection_head(self.backbone(x).flatten(start_dim=1))


@pytest.fixture(scope="module")
def lightly_model():
    pytest.importorskip("lightly")
    torch.manual_seed(3)
    return _randomise_bn(_LightlySimCLR(_cifar_resnet18())).eval()


def _lightning_ckpt(state: dict, path, epoch: int = 9) -> None:
    """What Lightning's Trainer.save_checkpoint writes (the keys of lightning 2.x)."""
    params = [torch.zeros(2, requires_grad=True)]
    optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    params[0].grad = torch.ones(2)
    optimizer.step()
    torch.save(
        {
            "epoch": epoch,
            "global_step": 10 * (epoch + 1),
            "pytorch-lightning_version": "2.5.0",
            "state_dict": state,
            "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"current": {}}}},
            "callbacks": {},
            "optimizer_states": [optimizer.state_dict()],
            "lr_schedulers": [],
        },
        path,
    )


def test_lightly_plain_and_lightning_files_rebuild_the_same_function(tmp_path, lightly_model):
    plain, ckpt = tmp_path / "simclr.pth", tmp_path / "simclr.ckpt"
    torch.save(lightly_model.state_dict(), plain)
    _lightning_ckpt(lightly_model.state_dict(), ckpt)
    expected = lightly_model(X32)
    fingerprints = []
    for path in (plain, ckpt):
        file = read_checkpoint_file(path)
        assert file.kind == "lightly"  # the Lightning .ckpt is not taken for solo-learn's
        enc = load_foreign_encoder(file, arch="resnet18-cifar", dataset="imagefolder")
        with torch.no_grad():
            assert _same(enc.projector(enc.backbone(X32)), expected)
        # lightly 1.5+'s SimCLR head (v2 style) ends in a BatchNorm1d
        assert enc.projector_layout == "Linear(512,512)-BN-ReLU-Linear(512,128)-BN"
        assert enc.layout["backbone_keys"] == "backbone.*"
        assert enc.layout["projector_keys"] == "projection_head.layers.*"
        assert "0 -> conv1" in enc.layout["key_map"] and enc.ignored == []
        fingerprints.append(weights_sha256(file))
    # the Lightning run records (optimiser states, loops) are not the weights
    assert fingerprints[0] == fingerprints[1]


def test_lightly_backbone_state_dict_alone(tmp_path, lightly_model):
    path = tmp_path / "backbone.pth"
    torch.save(lightly_model.backbone.state_dict(), path)  # keys 0.weight, 4.0.conv1.weight, ...
    file = read_checkpoint_file(path)
    assert file.kind == "lightly"
    enc = load_foreign_encoder(file, arch="resnet18-cifar", dataset="imagefolder")
    assert enc.projector is None and enc.layout["backbone_keys"] == "*"
    with torch.no_grad():
        assert _same(enc.backbone(X32), lightly_model.backbone(X32).flatten(1))


def test_lightly_with_the_wrong_arch_names_the_right_one(run_cli, tmp_path, lightly_model):
    path = tmp_path / "simclr.ckpt"
    _lightning_ckpt(lightly_model.state_dict(), path)
    result = run_cli("analyze", path, "--arch", "resnet18", "--dataset", "cifar10")
    _assert_refused(result, "wrong shapes", "conv1.weight", "--arch resnet18-cifar")


@pytest.mark.slow  # end to end: the full suite runs it
def test_lightly_lightning_ckpt_end_to_end(run_cli, tmp_path, lightly_model, tiny_imagefolder):
    path = tmp_path / "epoch=9-step=100.ckpt"
    _lightning_ckpt(lightly_model.state_dict(), path)
    data = _analyze(run_cli, path, tiny_imagefolder, tmp_path / "a", "--arch", "resnet18-cifar")
    _check_layers(data, {"projector": 128, "backbone": 512})
    src = data["source"]
    assert (src["format"], src["arch"], src["epoch"], src["global_step"]) == (
        "lightly",
        "resnet18-cifar",
        9,
        100,
    )
    assert src["layout"]["name"] == "lightly" and src["provenance"] == {
        "arch": "--arch",
        "dataset": "--dataset",
    }
    assert src["cifar_stem_padding"]["value"] == 1
    report = (tmp_path / "a" / "report.md").read_text()
    assert "layout.key map" in report and "projection_head.layers.*" in report


@pytest.mark.slow
def test_a_resnet_analysed_at_the_digits_own_8_px_is_warned(run_cli, tmp_path, lightly_model):
    """Before: a lightly ResNet-18 analysed with --dataset digits and no --image-size was encoded
    at the digits' own 8 px with nothing said, and its report read "collapsed". Now one warning
    names both sides and the flag; the side used and why are recorded; given the flag, no word."""
    path = tmp_path / "lightly.pth"
    torch.save(lightly_model.state_dict(), path)
    quick = ["--dataset", "digits", "--num-images", "8", "--probes", "none", "-q"]
    run = run_cli("analyze", path, "--arch", "resnet18-cifar", *quick, "--out", tmp_path / "a")
    assert run.code == 0, run.err
    said = " ".join(run.err.split())
    assert said.count("warning: ") == 1, said
    assert "analysed at 8 px (the digits images' own size), far below 32 px" in said
    assert "give --image-size with that side, e.g. --image-size 32" in said
    record = json.loads((tmp_path / "a" / "result.json").read_text())["source"]["image_size"]
    assert record["value"] == 8 and record["from"] == "the digits images' own size"
    given = ["--image-size", "32", "--out", tmp_path / "b"]
    run = run_cli("analyze", path, "--arch", "resnet18-cifar", *quick, *given)
    assert run.code == 0 and "warning" not in run.err, run.err


# --------------------------------------------------------------------------- MoCo


class _MoCoV2(nn.Module):
    """facebookresearch/moco's builder (mlp=True: MoCo v2), as its checkpoints hold it."""

    def __init__(self, base_encoder, dim: int = 16, K: int = 32, mlp: bool = True):
        super().__init__()
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)
        if mlp:
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(
                nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc
            )
            self.encoder_k.fc = nn.Sequential(
                nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc
            )
        for q, k in zip(self.encoder_q.parameters(), self.encoder_k.parameters(), strict=True):
            k.data.copy_(q.data + 0.05 * torch.randn_like(q))  # as after momentum updates
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))


def _build_mlp(num_layers, input_dim, mlp_dim, output_dim, last_bn=True):
    """moco-v3's MLP (moco/builder.py)."""
    mlp: list[nn.Module] = []
    for layer in range(num_layers):
        dim1 = input_dim if layer == 0 else mlp_dim
        dim2 = output_dim if layer == num_layers - 1 else mlp_dim
        mlp.append(nn.Linear(dim1, dim2, bias=False))
        if layer < num_layers - 1:
            mlp.append(nn.BatchNorm1d(dim2))
            mlp.append(nn.ReLU(inplace=True))
        elif last_bn:
            mlp.append(nn.BatchNorm1d(dim2, affine=False))
    return nn.Sequential(*mlp)


class _MoCoV3(nn.Module):
    """moco-v3's MoCo_ResNet: base and momentum encoders with an MLP as fc, a predictor."""

    def __init__(self, base_encoder, dim: int = 16, mlp_dim: int = 32):
        super().__init__()
        self.base_encoder = base_encoder(num_classes=mlp_dim)
        self.momentum_encoder = base_encoder(num_classes=mlp_dim)
        hidden_dim = self.base_encoder.fc.weight.shape[1]
        del self.base_encoder.fc, self.momentum_encoder.fc
        self.base_encoder.fc = _build_mlp(2, hidden_dim, mlp_dim, dim)
        self.momentum_encoder.fc = _build_mlp(2, hidden_dim, mlp_dim, dim)
        self.predictor = _build_mlp(2, dim, mlp_dim, dim, False)


def _moco_file(model: nn.Module, path, arch: str = "resnet18") -> None:
    # main_moco.py: DDP's module. prefix, the arch name, the optimiser
    params = [p.detach().clone().requires_grad_() for p in model.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.03, momentum=0.9)
    torch.save(
        {
            "epoch": 200,
            "arch": arch,
            "state_dict": {f"module.{k}": v for k, v in model.state_dict().items()},
            "optimizer": _stepped(optimizer),
        },
        path,
    )


@pytest.fixture(scope="module")
def moco_v2():
    torch.manual_seed(4)
    return _randomise_bn(_MoCoV2(torchvision.models.resnet18)).eval()


@pytest.mark.slow
def test_moco_v2_query_and_key_encoders(tmp_path, moco_v2):
    path = tmp_path / "checkpoint_0199.pth.tar"
    _moco_file(moco_v2, path)
    file = read_checkpoint_file(path)
    assert file.kind == "moco"
    query = load_foreign_encoder(file, dataset="imagefolder")  # arch from the file
    key = load_foreign_encoder(file, dataset="imagefolder", encoder="key")
    with torch.no_grad():
        # encoder(x) = fc(features): the MLP in fc is the projector
        assert _same(query.projector(query.backbone(X64)), moco_v2.encoder_q(X64))
        assert _same(key.projector(key.backbone(X64)), moco_v2.encoder_k(X64))
        assert not _same(query.backbone(X64), key.backbone(X64))
    assert query.arch == "resnet18"
    assert query.provenance == {
        "encoder": "default",
        "arch": "the checkpoint's 'arch' entry",
        "dataset": "--dataset",
    }
    assert key.provenance["encoder"] == "--encoder"
    assert query.projector_layout == "Linear(512,512)-ReLU-Linear(512,16)"
    assert query.ignored == ["encoder_k", "queue", "queue_ptr"]
    assert key.ignored == ["encoder_q", "queue", "queue_ptr"]
    assert (query.layout["encoder"], query.layout["backbone_keys"]) == ("query", "encoder_q.*")
    assert query.layout["ddp_prefix_removed"] == "module."
    assert key.layout["projector_keys"] == "encoder_k.fc.*"
    # the optimiser's momentum buffers are not part of the weights' fingerprint
    state = torch.load(path, weights_only=True)
    buffers = state["optimizer"]["state"]
    assert buffers
    for entry in buffers.values():
        entry["momentum_buffer"].add_(1.0)
    torch.save(state, tmp_path / "other.pth.tar")
    assert weights_sha256(read_checkpoint_file(tmp_path / "other.pth.tar")) == weights_sha256(file)


@pytest.mark.slow
def test_moco_v1_single_linear_fc_and_v3_mlp_with_last_bn(tmp_path):
    torch.manual_seed(5)
    v1 = _MoCoV2(torchvision.models.resnet18, mlp=False).eval()
    _moco_file(v1, tmp_path / "v1.pth.tar")
    enc = load_foreign_encoder(read_checkpoint_file(tmp_path / "v1.pth.tar"), dataset="cifar10")
    assert enc.projector_layout == "Linear(512,16)"
    with torch.no_grad():
        assert _same(enc.projector(enc.backbone(X64)), v1.encoder_q(X64))

    v3 = _randomise_bn(_MoCoV3(torchvision.models.resnet18)).eval()
    _moco_file(v3, tmp_path / "v3.pth.tar")
    file = read_checkpoint_file(tmp_path / "v3.pth.tar")
    assert file.kind == "moco"
    base = load_foreign_encoder(file, dataset="cifar10")
    momentum = load_foreign_encoder(file, dataset="cifar10", encoder="key")
    assert base.projector_layout == "Linear(512,32)-BN-ReLU-Linear(32,16)-BN"
    assert base.ignored == ["momentum_encoder", "predictor"]
    with torch.no_grad():
        assert _same(base.projector(base.backbone(X64)), v3.base_encoder(X64))
        assert _same(momentum.projector(momentum.backbone(X64)), v3.momentum_encoder(X64))


@pytest.mark.slow  # end to end: the full suite runs it
def test_moco_end_to_end_with_arch_override(run_cli, tmp_path, tiny_imagefolder):
    torch.manual_seed(6)
    model = _randomise_bn(_MoCoV2(_cifar_resnet18)).eval()
    path = tmp_path / "moco.pth.tar"
    _moco_file(model, path)  # records "resnet18"; the weights have the CIFAR stem
    result = run_cli(
        "analyze", path, "--dataset", "imagefolder", "--data-root", tiny_imagefolder[0]
    )
    _assert_refused(result, "wrong shapes", "--arch resnet18-cifar")
    data = _analyze(
        run_cli,
        path,
        tiny_imagefolder,
        tmp_path / "a",
        "--arch",
        "resnet18-cifar",
        "--encoder",
        "key",
        probes="retrieval",
    )
    _check_layers(data, {"projector": 16, "backbone": 512})
    src = data["source"]
    assert (src["format"], src["arch"], src["epoch"]) == ("moco", "resnet18-cifar", 200)
    assert src["provenance"] == {"encoder": "--encoder", "arch": "--arch", "dataset": "--dataset"}
    assert src["layout"]["encoder"] == "key" and src["ignored_modules"][0] == "encoder_q"


def test_encoder_option_is_checked_against_the_layout(tmp_path, moco_v2, lightly_model):
    _moco_file(moco_v2, tmp_path / "moco.pth.tar")
    moco = read_checkpoint_file(tmp_path / "moco.pth.tar")
    with pytest.raises(
        UserError, match="'teacher': a moco checkpoint holds the encoders query, key"
    ):
        load_foreign_encoder(moco, dataset="cifar10", encoder="teacher")
    torch.save(lightly_model.state_dict(), tmp_path / "lightly.pth")
    lightly = read_checkpoint_file(tmp_path / "lightly.pth")
    with pytest.raises(UserError, match=r"--encoder applies to MoCo .* and DINO"):
        load_foreign_encoder(lightly, arch="resnet18-cifar", dataset="cifar10", encoder="key")
    state = torch.load(tmp_path / "moco.pth.tar", weights_only=True)
    state["state_dict"] = {
        k: v for k, v in state["state_dict"].items() if not k.startswith("module.encoder_k.")
    }
    torch.save(state, tmp_path / "query-only.pth.tar")
    with pytest.raises(UserError, match=r"holds no key encoder .* use --encoder query"):
        load_foreign_encoder(
            read_checkpoint_file(tmp_path / "query-only.pth.tar"), dataset="cifar10", encoder="key"
        )


# --------------------------------------------------------------------------- DINO


class _DINOHead(nn.Module):
    """facebookresearch/dino's DINOHead (vision_transformer.py)."""

    def __init__(self, in_dim, out_dim, use_bn=False, nlayers=3, hidden_dim=32, bottleneck_dim=16):
        super().__init__()
        nlayers = max(nlayers, 1)
        if nlayers == 1:
            self.mlp = nn.Linear(in_dim, bottleneck_dim)
        else:
            layers: list[nn.Module] = [nn.Linear(in_dim, hidden_dim)]
            if use_bn:
                layers.append(nn.BatchNorm1d(hidden_dim))
            layers.append(nn.GELU())
            for _ in range(nlayers - 2):
                layers.append(nn.Linear(hidden_dim, hidden_dim))
                if use_bn:
                    layers.append(nn.BatchNorm1d(hidden_dim))
                layers.append(nn.GELU())
            layers.append(nn.Linear(hidden_dim, bottleneck_dim))
            self.mlp = nn.Sequential(*layers)
        with warnings.catch_warnings():  # DINO uses the old weight_norm: its keys are these
            warnings.simplefilter("ignore")
            self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
        self.last_layer.weight_g.data.fill_(1)

    def forward(self, x):
        return self.last_layer(F.normalize(self.mlp(x), dim=-1, p=2))


class _MultiCropWrapper(nn.Module):
    """DINO's wrapper (utils.py): backbone with fc and head removed, then the DINO head."""

    def __init__(self, backbone: nn.Module, head: nn.Module):
        super().__init__()
        backbone.fc, backbone.head = nn.Identity(), nn.Identity()
        self.backbone, self.head = backbone, head


def _dino_file(student, teacher, path, *, teacher_ddp: bool, args=None) -> None:
    # main_dino.py's save_dict: the student is DDP-wrapped, the teacher only with BatchNorms
    params = [p.detach().clone().requires_grad_() for p in student.parameters()]
    payload = {
        "student": {f"module.{k}": v for k, v in student.state_dict().items()},
        "teacher": {
            (f"module.{k}" if teacher_ddp else k): v for k, v in teacher.state_dict().items()
        },
        "optimizer": _stepped(torch.optim.AdamW(params, lr=1e-3)),
        "epoch": 100,
        "dino_loss": {"center": torch.zeros(1, 64)},
    }
    if args is not None:
        payload["args"] = args
    torch.save(payload, path)


def _dino_pair(make_backbone, in_dim: int, use_bn: bool = False):
    torch.manual_seed(7)
    student = _MultiCropWrapper(make_backbone(), _DINOHead(in_dim, 64, use_bn=use_bn))
    teacher = _MultiCropWrapper(make_backbone(), _DINOHead(in_dim, 64, use_bn=use_bn))
    return _randomise_bn(student).eval(), _randomise_bn(teacher).eval()


def _test_vit():
    timm = pytest.importorskip("timm")
    return timm.create_model("test_vit", pretrained=False, num_classes=0)


def test_dino_resnet_teacher_and_student(tmp_path):
    student, teacher = _dino_pair(_cifar_resnet18, 512, use_bn=True)
    path = tmp_path / "checkpoint.pth"
    _dino_file(student, teacher, path, teacher_ddp=True)
    file = read_checkpoint_file(path)
    assert file.kind == "dino"
    enc = load_foreign_encoder(file, arch="resnet18-cifar", dataset="cifar10")
    other = load_foreign_encoder(file, arch="resnet18-cifar", dataset="cifar10", encoder="student")
    x = X32
    with torch.no_grad():
        # the projector is the head's MLP up to the bottleneck (before the normalised last layer)
        assert _same(enc.projector(enc.backbone(x)), teacher.head.mlp(teacher.backbone(x)))
        assert _same(other.projector(other.backbone(x)), student.head.mlp(student.backbone(x)))
    assert enc.projector_layout == "Linear(512,32)-BN-GELU-Linear(32,32)-BN-GELU-Linear(32,16)"
    assert enc.layout["encoder"] == "teacher" and enc.provenance["encoder"] == "default"
    assert enc.layout["backbone_keys"] == "teacher.module.backbone.*"
    assert enc.ignored == ["dino_loss", "optimizer", "student", "teacher.module.head.last_layer"]
    # the random-init twin keeps the GELUs
    _, twin = enc.random_init(0)
    assert [type(m).__name__ for m in twin][2] == "GELU"


@pytest.mark.slow
def test_dino_vit_via_timm_end_to_end(run_cli, tmp_path, tiny_imagefolder):
    student, teacher = _dino_pair(_test_vit, 64)
    path = tmp_path / "checkpoint.pth"
    args = argparse.Namespace(arch="vit_small", patch_size=16, batch_size_per_gpu=32, world_size=2)
    _dino_file(student, teacher, path, teacher_ddp=False, args=args)  # args: a Namespace, as DINO's
    file = read_checkpoint_file(path)
    enc = load_foreign_encoder(file, arch="timm:test_vit", dataset="imagefolder")
    x = torch.randn(2, 3, 160, 160, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert _same(enc.projector(enc.backbone(x)), teacher.head.mlp(teacher.backbone(x)))
    # DINO's args name the architecture: its vit_small/16 is timm's vit_small_patch16_224
    config, where = layout_of("dino").recorded(file.payload)
    assert where == "the checkpoint's 'args'"
    assert (config["arch"], config["loss"], config["batch_size"]) == (
        "timm:vit_small_patch16_224",
        "dino",
        64,
    )

    data = _analyze(
        run_cli,
        path,
        tiny_imagefolder,
        tmp_path / "a",
        "--arch",
        "timm:test_vit",
        probes="retrieval",
    )
    _check_layers(data, {"projector": 16, "backbone": 64})
    src = data["source"]
    assert (src["format"], src["arch"]) == ("dino", "timm:test_vit")
    # the ViT's position embeddings fix its input: the images are cropped to 160
    assert src["image_size"] == {"value": 160, "from": "the fixed input size of timm:test_vit"}
    assert src["layout"]["projector_keys"] == "teacher.head.mlp.*"
    assert data["config"]["loss"] == "dino" and data["theory"]["theorem"] is None


def test_dino_without_the_chosen_encoder(tmp_path):
    student, _ = _dino_pair(_cifar_resnet18, 512)
    torch.save(
        {"student": {f"module.{k}": v for k, v in student.state_dict().items()}}, tmp_path / "s.pth"
    )
    file = read_checkpoint_file(tmp_path / "s.pth")
    assert file.kind == "dino"
    with pytest.raises(UserError, match=r"holds no teacher weights.*--encoder student"):
        load_foreign_encoder(file, arch="resnet18-cifar", dataset="cifar10")


# --------------------------------------------------------------------------- mapped


class _Net(nn.Module):
    """A model of some other codebase: its own names for the encoder and the head."""

    def __init__(self):
        super().__init__()
        self.encoder = _cifar_resnet18()
        self.encoder.fc = nn.Identity()
        self.head = nn.Sequential(nn.Linear(512, 64), nn.ReLU(), nn.Linear(64, 24))

    def forward(self, x):
        return self.head(self.encoder(x))


def test_unknown_layout_lists_prefixes_and_the_mapping_options(run_cli, tmp_path):
    torch.manual_seed(8)
    net = _randomise_bn(_Net()).eval()
    path = tmp_path / "other.pt"
    torch.save({"net": net.state_dict(), "step": 5}, path)
    result = run_cli("analyze", path, "--out", tmp_path / "out")
    n_encoder = len(net.encoder.state_dict())
    _assert_refused(
        result,
        "not a checkpoint layout cl-diag knows",
        "'net', 'step'",
        f"'net.encoder.' ({n_encoder} tensors), 'net.head.' (4 tensors)",
        "--backbone-prefix",
        "--projector-prefix",
        "--rename 'regex=replacement'",
        # the architecture its weights look like: the example runs as it is
        "e.g. --arch resnet18-cifar --backbone-prefix 'net.encoder.' --projector-prefix "
        "'net.head.'",
        "supported layouts",
    )
    assert not (tmp_path / "out").exists()

    mapping = KeyMapping.parse(backbone_prefix="net.encoder.", projector_prefix="net.head.")
    file = read_checkpoint_file(path, mapping=mapping)
    assert file.kind == "mapped"
    enc = load_foreign_encoder(file, arch="resnet18-cifar", dataset="cifar10", mapping=mapping)
    with torch.no_grad():
        assert _same(enc.projector(enc.backbone(X32)), net(X32))
    assert enc.layout == {
        "name": "mapped",
        "backbone_keys": "net.encoder.*",
        "projector_keys": "net.head.*",
        "backbone_prefix": "net.encoder.",
        "projector_prefix": "net.head.",
    }


def test_rename_maps_keys_onto_the_architecture_before_the_strict_check(tmp_path):
    torch.manual_seed(9)
    net = _randomise_bn(_Net()).eval()
    # another codebase's names: 'shortcut' for torchvision's 'downsample', 'stem.' for conv1
    state = {
        k.replace("downsample", "shortcut").replace("encoder.conv1.", "encoder.stem."): v
        for k, v in net.state_dict().items()
    }
    path = tmp_path / "renamed.pt"
    torch.save(state, path)
    prefixes = ("encoder.", "head.")
    bare = KeyMapping.parse(backbone_prefix=prefixes[0], projector_prefix=prefixes[1])
    with pytest.raises(
        UserError, match=r"Missing keys: conv1.weight.*Unexpected keys: stem.weight"
    ):
        load_foreign_encoder(
            read_checkpoint_file(path, mapping=bare),
            arch="resnet18-cifar",
            dataset="cifar10",
            mapping=bare,
        )
    renamed = KeyMapping.parse(
        backbone_prefix=prefixes[0],
        projector_prefix=prefixes[1],
        renames=[r"\.shortcut\.=.downsample.", r"^encoder\.stem\.=encoder.conv1."],
    )
    enc = load_foreign_encoder(
        read_checkpoint_file(path, mapping=renamed),
        arch="resnet18-cifar",
        dataset="cifar10",
        mapping=renamed,
    )
    with torch.no_grad():
        assert _same(enc.projector(enc.backbone(X32)), net(X32))
    assert enc.layout["renames"] == [
        r"\.shortcut\.=.downsample.",
        r"^encoder\.stem\.=encoder.conv1.",
    ]

    # --rename alone, onto a layout cl-diag knows: 'encoder.' -> 'backbone.' is a state dict
    only_backbone = {k: v for k, v in net.state_dict().items() if k.startswith("encoder.")}
    torch.save(only_backbone, tmp_path / "enc.pt")
    onto = KeyMapping.parse(renames=[r"^encoder\.=backbone."])
    assert read_checkpoint_file(tmp_path / "enc.pt", mapping=onto).kind == "state-dict"


def test_mapping_options_are_checked(tmp_path):
    with pytest.raises(UserError, match="not REGEX=REPLACEMENT"):
        KeyMapping.parse(renames=["no-equals-sign"])
    with pytest.raises(UserError, match="not a regular expression"):
        KeyMapping.parse(renames=["(unclosed=x"])
    with pytest.raises(UserError, match="--projector-prefix needs --backbone-prefix"):
        KeyMapping.parse(projector_prefix="head.")
    # a pattern with '=' in it: split at the last '='
    assert KeyMapping.parse(renames=["a(?=b)=c"]).renames == (("a(?=b)", "c"),)
    collide = KeyMapping.parse(renames=[r"^(a|b)\.=x."])
    with pytest.raises(UserError, match=r"maps both 'a.w' and 'b.w' to 'x.w'"):
        collide.rename({"a.w": torch.zeros(1), "b.w": torch.zeros(1)})
    torch.save({"net.w": torch.zeros(2)}, tmp_path / "w.pt")
    nothing = KeyMapping.parse(backbone_prefix="model.")
    with pytest.raises(
        UserError,
        match=r"--backbone-prefix 'model.' selects no keys; the file's keys are under: 'net.'",
    ):
        load_foreign_encoder(
            read_checkpoint_file(tmp_path / "w.pt", mapping=nothing),
            arch="resnet18",
            dataset="cifar10",
            mapping=nothing,
        )


def test_mapping_options_on_a_cl_diag_checkpoint_are_refused(run_cli, make_checkpoint, tmp_path):
    path = make_checkpoint(tmp_path / "last.pt", dataset="digits", batch_size=8)
    for option, value in (("--encoder", "key"), ("--rename", "a=b"), ("--backbone-prefix", "x.")):
        result = run_cli("analyze", path, option, value, "--out", tmp_path / "out")
        _assert_refused(result, f"{option} applies to foreign checkpoints only")
