"""``cl-diag analyze`` on trained encoders: cl-diag checkpoints, solo-learn .ckpt files and plain
state dicts; the probes, baselines and theory panel; and every way a checkpoint can be wrong."""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

from cl_diag.errors import UserError
from cl_diag.measurement import theory as th
from cl_diag.models.checkpoints import read_checkpoint_file
from cl_diag.models.foreign import (
    infer_resnet_arch,
    load_foreign_encoder,
    resolve_cifar_stem_padding,
    solo_training_config,
)
from cl_diag.models.foreign import rebuild_projector as build_projector
from cl_diag.runconfig import parse_run_config

PROBES_DIR = Path(__file__).resolve().parents[1] / "probes"


def theory_panel(config: dict, n_ref: int, layers: dict) -> dict:
    """The theory panel of a recorded training config (parsed once, as analyze does), as the
    ``theory`` block of result.json holds it."""
    return th.theory_panel(parse_run_config(config), n_ref, layers).to_dict()


# --------------------------------------------------------------------------- helpers


def _assert_refused(result, out, *fragments):
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.err + result.out
    message = " ".join(result.err.split()).lower()
    for fragment in fragments:
        assert fragment.lower() in message, (fragment, result.err)
    if out is not None:
        assert not out.exists(), "no output may be left behind"


def _cifar_resnet18(padding: int, seed: int) -> nn.Module:
    """solo-learn's CIFAR ResNet-18, built here from torchvision independently of cl-diag."""
    torch.manual_seed(seed)
    net = torchvision.models.resnet18(weights=None)
    net.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=padding, bias=False)
    net.maxpool = nn.Identity()
    net.fc = nn.Identity()
    # Non-trivial BatchNorm statistics, so that eval mode (running stats) is what is tested.
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return net.eval()


def _projector(with_bn: bool, seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    if with_bn:  # the paper's fork
        proj = nn.Sequential(nn.Linear(512, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 32))
        proj[1].running_mean.uniform_(-0.1, 0.1)
        proj[1].running_var.uniform_(0.5, 1.5)
    else:  # upstream solo-learn SimCLR
        proj = nn.Sequential(nn.Linear(512, 64), nn.ReLU(), nn.Linear(64, 32))
    return proj.eval()


def _solo_ckpt(
    path: Path, backbone: nn.Module, projector: nn.Module, *, num_classes=10, prefix="backbone."
) -> Path:
    state = {f"{prefix}{k}": v for k, v in backbone.state_dict().items()}
    state.update({f"projector.{k}": v for k, v in projector.state_dict().items()})
    state["classifier.weight"] = torch.zeros(num_classes, 512)
    state["classifier.bias"] = torch.zeros(num_classes)
    torch.save(
        {
            "epoch": 199,
            "global_step": 1000,
            "pytorch-lightning_version": "2.0.0",
            "state_dict": state,
        },
        path,
    )
    return path


def _write_cifar10(root: Path, per_batch: int, test: int, seed: int = 0) -> Path:
    """A tiny CIFAR-10 in torchvision's on-disk format (pickled batches under
    cifar-10-batches-py)."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)

    def batch(name: str, n: int) -> None:
        labels = [int(i % 10) for i in range(n)]
        # class-dependent mean colour plus noise: learnable but not trivial
        data = np.clip(
            rng.normal(25 * np.repeat(np.array(labels)[:, None], 3072, axis=1), 40.0), 0, 255
        ).astype(np.uint8)
        with open(folder / name, "wb") as f:
            pickle.dump(
                {
                    "batch_label": name,
                    "labels": labels,
                    "data": data,
                    "filenames": [f"{i}.png" for i in range(n)],
                },
                f,
            )

    for i in range(1, 6):
        batch(f"data_batch_{i}", per_batch)
    batch("test_batch", test)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump(
            {"label_names": [f"class{i}" for i in range(10)], "num_cases_per_batch": per_batch}, f
        )
    return root


@pytest.fixture
def cifar_checksums(monkeypatch):
    """Point torchvision's CIFAR-10 integrity check at the md5s of the files a test wrote (tests
    only)."""

    def patch(root: Path) -> None:
        folder = root / "cifar-10-batches-py"

        def md5(name):
            return hashlib.md5((folder / name).read_bytes()).hexdigest()

        cls = torchvision.datasets.CIFAR10
        monkeypatch.setattr(
            cls, "train_list", [[f"data_batch_{i}", md5(f"data_batch_{i}")] for i in range(1, 6)]
        )
        monkeypatch.setattr(cls, "test_list", [["test_batch", md5("test_batch")]])
        monkeypatch.setattr(
            cls,
            "meta",
            {"filename": "batches.meta", "key": "label_names", "md5": md5("batches.meta")},
        )

    return patch


# -------------------------------------------------------------------------- foreign formats (units)


@pytest.mark.parametrize(
    "with_bn, layout",
    [(False, "Linear(512,64)-ReLU-Linear(64,32)"), (True, "Linear(512,64)-BN-ReLU-Linear(64,32)")],
)
def test_projector_rebuilt_from_keys_computes_the_same_function(with_bn, layout):
    original = _projector(with_bn, seed=1)
    rebuilt, described = build_projector(original.state_dict())
    assert described == layout
    x = torch.randn(7, 512, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(rebuilt.eval()(x), original(x))


def test_projector_with_an_unknown_layer_is_refused():
    state = {"0.weight": torch.zeros(4, 4, 3), "0.bias": torch.zeros(4)}
    with pytest.raises(UserError, match="neither a Linear nor a BatchNorm1d"):
        build_projector(state)


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: torchvision.models.resnet18(weights=None), "resnet18"),
        (lambda: torchvision.models.resnet34(weights=None), "resnet34"),
        (lambda: torchvision.models.resnet50(weights=None), "resnet50"),
        (lambda: _cifar_resnet18(1, 0), "resnet18-cifar"),
    ],
)
def test_arch_is_recognised_from_keys_and_shapes(make, expected):
    assert infer_resnet_arch(make().state_dict()) == expected


@pytest.mark.parametrize("prefix", ["backbone.", "encoder."])
def test_solo_learn_checkpoint_loads_the_exact_weights(tmp_path, prefix):
    backbone, projector = _cifar_resnet18(padding=2, seed=5), _projector(False, seed=6)
    path = _solo_ckpt(tmp_path / "simclr-ep=199.ckpt", backbone, projector, prefix=prefix)
    file = read_checkpoint_file(path)
    assert file.kind == "solo-learn"
    enc = load_foreign_encoder(file, arch="resnet18-cifar", dataset="cifar10")
    # upstream solo-learn (no BN in the projector, no args.json): the CIFAR stem pads by 2
    assert enc.cifar_stem_padding["value"] == 2
    assert enc.projector_layout == "Linear(512,64)-ReLU-Linear(64,32)"
    assert enc.num_classes == 10 and enc.ignored == ["classifier"]
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(enc.projector(enc.backbone(x)), projector(backbone(x)), atol=1e-6)
        # the padding is not in the weights: the wrong one gives another function
        other = load_foreign_encoder(
            file, arch="resnet18-cifar", dataset="cifar10", cifar_stem_padding=1
        )
        assert not torch.allclose(other.backbone(x), backbone(x), atol=1e-3)


def test_plain_torchvision_state_dict_with_module_prefix(tmp_path):
    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None).eval()
    path = tmp_path / "resnet18.pth"
    torch.save({"state_dict": {f"module.{k}": v for k, v in net.state_dict().items()}}, path)
    file = read_checkpoint_file(path)
    assert file.kind == "state-dict"
    enc = load_foreign_encoder(file, arch="resnet18", dataset="imagefolder")
    assert enc.projector is None and enc.cifar_stem_padding is None and enc.ignored == ["fc"]
    net.fc = nn.Identity()
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(enc.backbone(x), net(x), atol=1e-6)


def test_cifar_stem_padding_defaults_and_reasons():
    assert resolve_cifar_stem_padding(None, kind="solo-learn", fork_signs=[])["value"] == 2
    fork = resolve_cifar_stem_padding(
        None, kind="solo-learn", fork_signs=["a BatchNorm in the projector"]
    )
    assert fork["value"] == 1 and "fork" in fork["from"]
    assert resolve_cifar_stem_padding(None, kind="state-dict", fork_signs=[])["value"] == 1
    assert resolve_cifar_stem_padding(2, kind="state-dict", fork_signs=[]) == {
        "value": 2,
        "from": "--cifar-stem-padding",
    }
    with pytest.raises(UserError, match="--cifar-stem-padding"):
        resolve_cifar_stem_padding(7, kind="solo-learn", fork_signs=[])


def test_args_json_nested_and_flat_layouts():
    nested = {  # solo-learn >= 1.0 (Hydra), the paper's fork
        "method": "simclr",
        "backbone": {"name": "resnet18"},
        "data": {"dataset": "cifar100"},
        "optimizer": {"batch_size": 64, "lr": 0.3, "weight_decay": 1e-4, "name": "sgd"},
        "method_kwargs": {"temperature": 0.2, "proj_hidden_dim": 512, "proj_output_dim": 128},
        "add_vrn_loss_term": {"enabled": True, "weight": 30, "k": 50000},
        "devices": [0, 1],
        "max_epochs": 200,
        "seed": 5,
    }
    cfg = solo_training_config(nested)
    assert (
        cfg["loss"] == "simclr" and cfg["arch"] == "resnet18-cifar" and cfg["dataset"] == "cifar100"
    )
    assert cfg["batch_size"] == 128 and cfg["batch_size_per_device"] == 64  # two devices, gathered
    assert (
        cfg["temperature"] == 0.2
        and cfg["vrn"] == 30.0
        and cfg["vrn_k"] == 50000
        and cfg["epochs"] == 200
    )
    flat = {
        "method": "dcl",
        "encoder": "resnet50",
        "dataset": "imagenet100",
        "batch_size": 256,
        "temperature": 0.1,
    }
    cfg = solo_training_config(flat)
    assert (
        cfg["arch"] == "resnet50"
        and cfg["batch_size"] == 256
        and cfg["vrn"] == 0.0
        and cfg["loss"] == "dcl"
    )


def test_args_json_beside_the_checkpoint_names_arch_and_dataset(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    path = _solo_ckpt(
        run / "x-ep=9.ckpt", _cifar_resnet18(1, 0), _projector(True, 0), num_classes=100
    )
    (run / "args.json").write_text(
        json.dumps(
            {
                "method": "simclr",
                "backbone": {"name": "resnet18"},
                "data": {"dataset": "cifar100"},
                "optimizer": {"batch_size": 128},
                "add_vrn_loss_term": {"enabled": False, "weight": 30, "k": 50000},
            }
        )
    )
    enc = load_foreign_encoder(read_checkpoint_file(path))
    assert (enc.arch, enc.dataset) == ("resnet18-cifar", "cifar100")
    assert (
        enc.provenance["arch"].startswith("args.json") and enc.provenance["dataset"] == "args.json"
    )
    assert (
        enc.cifar_stem_padding["value"] == 1
    )  # the fork: BN in the projector, add_vrn_loss_term present
    assert enc.training_config["vrn"] == 0.0  # present but disabled


# --------------------------------------------------------------------------- bad inputs (CLI)


class _Marker:
    """Unpickling this object would create a marker file: it must never happen."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_pickled_payload_in_a_checkpoint_is_refused_without_running_it(run_cli, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.ckpt"
    state = {f"backbone.{k}": v for k, v in _cifar_resnet18(1, 0).state_dict().items()}
    torch.save({"state_dict": state, "hyper_parameters": _Marker(str(marker))}, path)
    out = tmp_path / "out"
    result = run_cli(
        "analyze", path, "--arch", "resnet18-cifar", "--dataset", "cifar10", "--out", out
    )
    _assert_refused(result, out, "refused", "pickled", "never pickled objects")
    assert not marker.exists()


def test_truncated_checkpoint(run_cli, tmp_path):
    path = _solo_ckpt(tmp_path / "x.ckpt", _cifar_resnet18(1, 0), _projector(False, 0))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", path, "--arch", "resnet18-cifar", "--out", out),
        out,
        "truncated",
        "weights_only=true",
    )


def test_wrong_arch_lists_keys_and_suggests_the_right_one(run_cli, tmp_path):
    path = _solo_ckpt(tmp_path / "x.ckpt", _cifar_resnet18(1, 0), _projector(False, 0))
    out = tmp_path / "out"
    result = run_cli("analyze", path, "--arch", "resnet50", "--dataset", "cifar10", "--out", out)
    _assert_refused(
        result,
        out,
        "missing keys",
        "layer1.0.conv3.weight",
        "wrong shapes",
        "conv1.weight",
        "--arch resnet18-cifar",
    )
    result = run_cli("analyze", path, "--arch", "vgg16", "--out", out)
    _assert_refused(result, out, "not supported", "resnet18-cifar")


def test_architecture_unknown_without_args_json(run_cli, tmp_path):
    path = _solo_ckpt(tmp_path / "x.ckpt", _cifar_resnet18(1, 0), _projector(False, 0))
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", path, "--out", out), out, "give --arch", "look like resnet18-cifar"
    )


def test_missing_dataset(run_cli, tmp_path):
    path = _solo_ckpt(tmp_path / "x.ckpt", _cifar_resnet18(1, 0), _projector(False, 0))
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", path, "--arch", "resnet18-cifar", "--out", out), out, "give --dataset"
    )
    result = run_cli(
        "analyze", path, "--arch", "resnet18-cifar", "--dataset", "cifar10", "--out", out
    )
    _assert_refused(result, out, "--data-root")
    empty = tmp_path / "data"
    empty.mkdir()
    result = run_cli(
        "analyze",
        path,
        "--arch",
        "resnet18-cifar",
        "--dataset",
        "cifar10",
        "--data-root",
        empty,
        "--out",
        out,
    )
    _assert_refused(result, out, "not found", "cifar-10-batches-py")


def test_corrupt_cifar_folder_is_a_clear_error(run_cli, tmp_path):
    # Without the test's checksum patch, torchvision's integrity check rejects the files.
    root = _write_cifar10(tmp_path / "data", per_batch=4, test=4)
    path = _solo_ckpt(tmp_path / "x.ckpt", _cifar_resnet18(1, 0), _projector(False, 0))
    out = tmp_path / "out"
    result = run_cli(
        "analyze",
        path,
        "--arch",
        "resnet18-cifar",
        "--dataset",
        "cifar10",
        "--data-root",
        root,
        "--out",
        out,
    )
    _assert_refused(result, out, "could not read cifar-10")


def test_classifier_width_contradicting_the_dataset(run_cli, tmp_path):
    path = _solo_ckpt(
        tmp_path / "x.ckpt", _cifar_resnet18(1, 0), _projector(False, 0), num_classes=100
    )
    out = tmp_path / "out"
    result = run_cli(
        "analyze",
        path,
        "--arch",
        "resnet18-cifar",
        "--dataset",
        "cifar10",
        "--data-root",
        tmp_path,
        "--out",
        out,
    )
    _assert_refused(result, out, "100 classes", "cifar10 has 10")


def test_unknown_layout_lists_keys_and_supported_layouts(run_cli, tmp_path):
    path = tmp_path / "thing.pt"
    torch.save({"weights": {"a": torch.zeros(2)}, "step": 3}, path)
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", path, "--out", out),
        out,
        "'weights', 'step'",
        "supported layouts",
        "solo-learn",
        "state dict",
    )


def test_foreign_options_on_a_cl_diag_checkpoint(run_cli, make_checkpoint, tmp_path):
    path = make_checkpoint(tmp_path / "last.pt", temperature=0.2)
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", path, "--arch", "resnet18", "--out", out),
        out,
        "--arch applies to foreign checkpoints",
    )
    _assert_refused(
        run_cli("analyze", path, "--dataset", "cifar10", "--out", out), out, "trained on digits"
    )


def test_bad_probe_suite_key(run_cli, make_checkpoint, tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text("num-images = 10\nlearning-rate = 3\n")
    out = tmp_path / "out"
    result = run_cli(
        "analyze",
        make_checkpoint(tmp_path / "last.pt", temperature=0.2),
        "--probe",
        suite,
        "--out",
        out,
    )
    _assert_refused(result, out, "'learning-rate' is not an option", "num-images")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("--layers", "head"), "--layers"),
        (("--probes", "linear,svm"), "--probes"),
        (("--num-images", "1"), "--num-images"),
        (("--device", "tpu"), "--device"),
    ],
)
def test_bad_checkpoint_options(run_cli, make_checkpoint, tmp_path, args, fragment):
    out = tmp_path / "out"
    _assert_refused(
        run_cli(
            "analyze", make_checkpoint(tmp_path / "last.pt", temperature=0.2), *args, "--out", out
        ),
        out,
        fragment,
    )


# --------------------------------------------------------------------------- theory panel


def test_theory_info_nce_mini_batch_band_and_fixed_points():
    panel = theory_panel({"loss": "simclr", "batch_size": 2, "temperature": 0.2}, 4, {})
    assert panel["theorem"] == "5.1(i)"
    assert panel["loss"] == {"name": "simclr", "family": "info_nce", "c1": 1.0, "c2": 1.0}
    assert panel["predicted"] == {"positive_mean": 1.0, "negative_mean": -1 / 3}
    # Fig. 2 of the paper: n = 4, m = 2 gives [2/9, 8/9]
    band = panel["variance_band"]
    assert (band["n"], band["m"]) == (4, 2)
    assert band["lo"] == pytest.approx(2 / 9, abs=1e-15) and band["hi"] == pytest.approx(
        8 / 9, abs=1e-15
    )
    assert panel["within_batch_optimum"] == -1.0
    assert panel["sigmoid"] is None


def test_theory_family_and_coefficients_pick_the_theorem():
    assert theory_panel({"loss": "dhel", "batch_size": 32}, 1000, {})["loss"]["c1"] == 0.0
    assert theory_panel({"loss": "dhel", "batch_size": 32}, 1000, {})["theorem"] == "5.1(i)"
    assert (
        theory_panel({"loss": "sigmoid", "batch_size": 32, "within_view": True}, 1000, {})[
            "theorem"
        ]
        == "5.1(ii)"
    )
    spectral = theory_panel({"loss": "spectral", "batch_size": 32}, 1000, {})
    # psi = x^2 is decreasing on [-1, 0): outside Thm 5.1/5.3, whose (8)-vs-(iii) test would
    # wrongly say "ETF" (psi'(-1/(N-1)) < 0); the true optimum (d >= n) has orthogonal negatives,
    # s_neg = 0.
    assert spectral["theorem"] is None
    assert "condition" not in spectral
    outside = theory_panel({"loss": "triplet", "batch_size": 32}, 1000, {})
    assert (
        outside["theorem"] is None
        and outside["loss"]["family"] is None
        and "not cast" in outside["statement"]
    )
    assert theory_panel({}, 1000, {})["statement"].startswith("No optimum is predicted")


@pytest.mark.parametrize(
    "t, b, m", [(1.0, -1.0, 128), (10.0, 10.0, 32), (5.0, 0.0, 1024), (1.0, 1.0, 8), (2.0, 3.0, 64)]
)
def test_theory_sigmoid_autograd_condition_agrees_with_eq10(t, b, m):
    """Thm 5.3's condition (8) from autograd derivatives of the loss's phi and psi must agree
    with Example 5.4's closed form, Eq. 10, evaluated at N = m."""
    panel = theory_panel(
        {"loss": "sigmoid", "batch_size": m, "temperature": t, "bias": b}, 50000, {}
    )
    holds = th.sigmoid_eq10(t, b, m)
    assert panel["theorem"] == ("5.3" if holds else "5.1(iii)")
    sig = panel["sigmoid"]
    assert sig["eq10"]["holds"] is holds and sig["eq10"]["rhs"] == (m - 2) / 2
    assert sig["eq10"]["lhs"] == pytest.approx(
        (1 + math.exp(t / (m - 1) + b)) / (1 + math.exp(t - b)), rel=1e-12
    )
    # phi'(1) = t / (1 + e^{t - b}) by hand
    assert panel["condition"]["dphi_at_1"] == pytest.approx(t / (1 + math.exp(t - b)), rel=1e-12)
    opt = th.sigmoid_optimum(t, b, m)
    assert sig["ccem"] == {
        "N": m,
        "x_star": opt.x,
        "s_pos": opt.s_pos,
        "s_neg": opt.s_neg,
        "regime": opt.regime,
    }
    if holds:
        assert panel["predicted"] == {"positive_mean": opt.s_pos, "negative_mean": opt.s_neg}
        assert panel["variance_band"] is None
    else:
        assert panel["predicted"]["negative_mean"] == -1 / 49999


def test_theory_n_dependent_predictions_for_a_mini_batch_and_the_full_batch():
    # issue 12: for t = b = 10 the verdict flips between one fixed mini-batch of 128 pairs
    # (Eq. 10 fails: the simplex ETF, Thm 5.1 (iii)) and the full batch of 50,000 (Thm 5.3)
    panel = theory_panel(
        {"loss": "sigmoid", "batch_size": 128, "temperature": 10.0, "bias": 10.0}, 50000, {}
    )
    assert panel["theorem"] == "5.1(iii)" and panel["condition"]["N"] == 128
    assert panel["sigmoid"]["eq10"]["holds"] is False and panel["sigmoid"]["ccem"]["N"] == 128
    full = panel["full_batch"]
    assert full["N"] == 50000 and full["theorem"] == "5.3"
    assert full["condition"]["N"] == 50000 and full["condition"]["verdict"] == "excessive"
    assert full["sigmoid"]["eq10"] == {
        "N": 50000,
        "lhs": th.sigmoid_eq10_lhs(10.0, 10.0, 50000),
        "rhs": 24999.0,
        "holds": True,
    }
    opt = th.sigmoid_optimum(10.0, 10.0, 50000)
    assert full["sigmoid"]["ccem"]["regime"] == opt.regime == "interior"
    assert full["predicted"] == {"positive_mean": opt.s_pos, "negative_mean": opt.s_neg}
    assert "one fixed mini-batch, N = m = 128" in panel["statement"]
    assert "full batch, N = n_ref = 50000" in panel["statement"]
    # it round-trips through the typed result, and the report labels both columns
    from cl_diag.result import Theory

    typed = Theory.from_dict(panel)
    assert typed.N == 128 and typed.full_batch is not None and typed.full_batch.N == 50000
    assert typed.to_dict() == panel
    config = {"loss": "sigmoid", "batch_size": 128, "temperature": 10.0, "bias": 10.0}
    # the block measurement returns is the block read back
    assert typed == th.theory_panel(parse_run_config(config), 50000, {})
    assert typed.full_batch.eq10 == typed.full_batch.sigmoid.eq10 and typed.full_batch.eq10.holds
    # N-independent theorems (Def. 3.1, or c2 = 1) have no full-batch block
    assert "full_batch" not in theory_panel({"loss": "simclr", "batch_size": 32}, 50000, {})
    # the band is the prediction without VRN: the statement says so for a VRN run
    vrn = theory_panel({"loss": "simclr", "batch_size": 32, "vrn": 30.0}, 50000, {})
    assert "VRN (lambda = 30) penalises" in vrn["statement"]
    assert "changes the fixed-batch optimum" in vrn["statement"]
    # one meaning of a config's vrn (cl_diag.runconfig): nested with a weight, on without one
    nested = {"loss": "simclr", "batch_size": 32, "vrn": {"enabled": True, "lambda": 3.0}}
    assert "VRN (lambda = 3) penalises" in theory_panel(nested, 50000, {})["statement"]
    bare = {"loss": "simclr", "batch_size": 32, "vrn": {"enabled": True}}
    assert "VRN (lambda not recorded) penalises" in theory_panel(bare, 50000, {})["statement"]
    off = {"loss": "simclr", "batch_size": 32, "vrn": {"enabled": False, "lambda": 3.0}}
    assert "penalises" not in theory_panel(off, 50000, {})["statement"]


def test_theory_coefficients_outside_the_papers_cases_get_no_theorem():
    from cl_diag.losses.families import InfoNCEFamily
    from cl_diag.measurement.theory import _optimum

    loss = InfoNCEFamily(c1=1, c2=0.5, psi="log")
    out = _optimum(loss, "custom", "info", {}, (1.0, 0.5), 32, 1000, 32)
    assert out.theorem is None and out.predicted is None
    assert "(c1, c2) = (1, 0.5) is outside the paper's cases" in " ".join(out.statement)
    inside = _optimum(
        InfoNCEFamily(c1=1, c2=1, psi="log"), "c", "info", {}, (1.0, 1.0), 32, 1000, 32
    )
    assert inside.theorem == "5.1(i)"


def test_theory_layer_checks():
    layers = {
        "projector": {
            "d": 128,
            "pairs": {"positive": {"mean": 0.9}},
            "geometry": {"alignment_ceiling": {"value": 0.95}},
        },
        "backbone": {
            "d": 100000,
            "pairs": {"positive": {"mean": 0.99}},
            "geometry": {"alignment_ceiling": {"value": 0.95}},
        },
    }
    checks = theory_panel({"loss": "simclr", "batch_size": 256}, 50000, layers)["layers"]
    assert (
        checks["projector"]["caveat"] is True and checks["projector"]["d_below_m_minus_1"] is True
    )
    assert checks["backbone"]["caveat"] is False
    # The ceiling uses n_ref, the measured mean a sample: shown side by side, with no pass/fail
    # flag.
    assert (checks["projector"]["alignment_ceiling"], checks["projector"]["positive_mean"]) == (
        0.95,
        0.9,
    )
    assert (checks["backbone"]["alignment_ceiling"], checks["backbone"]["positive_mean"]) == (
        0.95,
        0.99,
    )
    assert "ceiling_respected" not in checks["projector"]


def test_theory_panel_predicts_nothing_for_a_psi_that_is_not_increasing():
    """Spectral's psi = x^2 breaks Thm 5.1/5.3's assumption: no simplex ETF, no Thm 5.5 band."""
    panel = theory_panel({"loss": "spectral", "batch_size": 128}, 50000, {})
    assert panel["theorem"] is None
    assert (
        panel["predicted"] == {"positive_mean": None, "negative_mean": None}
        and panel["variance_band"] is None
    )
    assert "not increasing" in panel["statement"]
    sigmoid = theory_panel({"loss": "sigmoid", "batch_size": 128, "within_view": True}, 50000, {})
    assert sigmoid["theorem"] == "5.1(ii)"


# --------------------------------------------------------------------------- end to end

TOP_LEVEL = [
    "schema",
    "tool",
    "source",
    "n_ref",
    "threshold",
    "mode",
    "num_pairs",
    "seed",
    "conventions",
    "config",
    "layers",
]
PAIR_TYPES = ["positive", "cross_view_negative", "within_view_negative"]
THEORY_KEYS = [
    "n_ref",
    "batch_size",
    "loss",
    "theorem",
    "statement",
    "predicted",
    "variance_band",
    "within_batch_optimum",
    "sigmoid",
    "loss_layer",
    "layers",
]


def _fraction(value, lo=0.0):
    assert isinstance(value, float) and lo <= value <= 1.0, value
    return value


def _check_classification(block: dict) -> None:
    assert set(block) == {"linear", "knn", "clustering", "retrieval"} or set(block) >= {
        "linear",
        "knn",
        "clustering",
    }
    _fraction(block["linear"]["top1"])
    _fraction(block["linear"]["top5"])
    assert block["linear"]["top5"] >= block["linear"]["top1"]
    assert block["linear"]["weight_decay"] > 0 and "settings" in block["linear"]
    _fraction(block["knn"]["k20"]["top1"])
    _fraction(block["knn"]["k200"]["top1"])
    assert block["knn"]["settings"]["temperature"] == 0.07
    _fraction(block["clustering"]["nmi"])
    _fraction(block["clustering"]["ari"], lo=-1.0)  # ARI of a chance clustering can dip below 0


def _check_retrieval(block: dict, layers) -> None:
    assert sorted(block) == sorted(layers)
    for layer in layers:
        r = block[layer]
        assert [_fraction(r[f"recall_at_{k}"]) for k in (1, 5, 10)] == sorted(
            r[f"recall_at_{k}"] for k in (1, 5, 10)
        )


def _dims(path: Path) -> dict:
    """Layer widths of a cl-diag checkpoint's model, from its own config."""
    from cl_diag.models import build_model

    model = build_model(torch.load(path, weights_only=True)["config"])
    return {"projector": model.projector[-1].out_features, "backbone": model.feature_dim}


def _check_checkpoint_result(
    result: dict, path: Path, layers: list[str], n_views: int, d: dict
) -> None:
    assert list(result)[: len(TOP_LEVEL)] == TOP_LEVEL and list(result)[len(TOP_LEVEL) :] == [
        "probes",
        "theory",
        "commands",
        "environment",
    ]
    assert result["schema"] == "cl-diag/result/1"
    assert result["source"]["kind"] == "checkpoint"
    assert re.fullmatch(r"[0-9a-f]{64}", result["source"]["weights_sha256"])
    assert "sha256" not in result["source"]  # the file's bytes include run records (timings)
    assert result["source"]["views"]["num_images"] == n_views
    assert result["threshold"] == -1.0 / (result["n_ref"] - 1)
    assert list(result["layers"]) == layers
    for layer in layers:
        entry = result["layers"][layer]
        assert (entry["n"], entry["d"]) == (n_views, d[layer])
        assert list(entry["pairs"]) == PAIR_TYPES
        assert entry["pairs"]["positive"]["count"] == n_views
        assert entry["pairs"]["cross_view_negative"]["count"] == n_views * (n_views - 1)
        assert (
            "by_class" in entry["pairs"]["cross_view_negative"]
        )  # the sampled images' labels were passed
        assert {"alignment", "uniformity", "effective_rank", "alignment_ceiling"} <= set(
            entry["geometry"]
        )
    probes = result["probes"]
    assert probes["layer"] == "backbone"
    _check_classification(probes)
    _check_retrieval(probes["retrieval"], layers)
    assert sorted(probes["baselines"]) == ["random_init", "raw_pixels"]
    for name in ("raw_pixels", "random_init"):
        _check_classification(probes["baselines"][name])
    _check_retrieval(probes["baselines"]["raw_pixels"]["retrieval"], ["pixels"])
    _check_retrieval(probes["baselines"]["random_init"]["retrieval"], layers)
    theory = result["theory"]
    assert list(theory)[: len(THEORY_KEYS)] == THEORY_KEYS
    assert theory["n_ref"] == result["n_ref"] and theory["loss_layer"] == "projector"
    assert sorted(theory["layers"]) == sorted(layers)
    for layer in layers:
        check = theory["layers"][layer]
        assert check["d"] == d[layer] and check["caveat"] == (d[layer] < result["n_ref"] - 1)
        assert (
            check["alignment_ceiling"]
            == result["layers"][layer]["geometry"]["alignment_ceiling"]["value"]
        )


@pytest.mark.slow  # end to end: the full suite runs it
def test_cl_diag_checkpoint_end_to_end_quick_suite(run_cli, make_checkpoint, tmp_path):
    path = make_checkpoint(tmp_path / "last.pt", temperature=0.2, batch_size=64, vrn=30.0)
    out = tmp_path / "analysis"
    result = run_cli(
        "analyze",
        path,
        "--probe",
        PROBES_DIR / "quick.toml",
        "--num-images",
        "120",
        "--probe-train-images",
        "200",
        "--probe-test-images",
        "100",
        "--out",
        out,
    )
    assert result.code == 0, result.err
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    data = json.loads((out / "result.json").read_text())
    # the command line's --num-images wins over the suite's 256; the suite's exact mode stays
    _check_checkpoint_result(data, path, ["projector", "backbone"], 120, _dims(path))
    assert (
        data["mode"] == "exact" and data["n_ref"] == 1347
    )  # the digits training split recorded in the checkpoint
    assert data["source"]["format"] == "cl-diag" and data["source"]["arch"] == "small-cnn"
    assert (
        data["config"]["loss"] == "simclr"
        and data["config"]["vrn"] == 30.0
        and data["config"]["batch_size"] == 64
    )
    assert "out" not in data["config"] and "device" not in data["config"]
    assert data["probes"]["splits"] == {
        "train": {"images": 200, "of": 1347},
        "test": {"images": 100, "of": 450},
    }
    assert data["probes"]["clustering"]["settings"]["split"] == "test"
    theory = data["theory"]
    assert theory["theorem"] == "5.1(i)" and theory["batch_size"] == 64
    lo, hi = th.variance_band(1347, 64)
    assert theory["variance_band"] == {"n": 1347, "m": 64, "lo": lo, "hi": hi}
    assert "VRN" in theory["statement"]
    assert "probes on backbone features" in result.out  # the printed summary


@pytest.mark.slow  # end to end, in processes of its own: the full suite runs it
def test_paper_suite_measures_the_projector_with_sampled_pairs(run_cli, make_checkpoint, tmp_path):
    path = make_checkpoint(tmp_path / "last.pt", temperature=0.2)
    args = (
        "--probe",
        PROBES_DIR / "paper.toml",
        "--num-images",
        "60",
        "--num-pairs",
        "500",
        "--probe-train-images",
        "200",
        "--probe-test-images",
        "100",
        "-q",
    )
    out = tmp_path / "analysis"
    result = run_cli("analyze", path, *args, "--out", out)
    assert result.code == 0, result.err
    data = json.loads((out / "result.json").read_text())
    assert (
        list(data["layers"]) == ["projector"]
        and data["mode"] == "sampled"
        and data["num_pairs"] == 500
    )
    assert data["layers"]["projector"]["pairs"]["cross_view_negative"]["estimate"] is True
    assert sorted(data["probes"]) == [
        "layer",
        "linear",
        "splits",
    ]  # the paper's linear probe only, no baselines
    # same seed, same bytes
    again = tmp_path / "again"
    assert run_cli("analyze", path, *args, "--out", again).code == 0
    assert (again / "result.json").read_bytes() == (out / "result.json").read_bytes()


def test_toy_checkpoint_analyses_its_learned_vectors(run_cli, make_checkpoint, tmp_path):
    path = make_checkpoint(tmp_path / "last.pt", temperature=0.2, dataset="toy", batch_size=2)
    out = tmp_path / "analysis"
    assert run_cli("analyze", path, "--out", out, "-q").code == 0
    data = json.loads((out / "result.json").read_text())
    ck = torch.load(path, weights_only=True)
    z1, z2 = ck["embeddings"]["z1"], ck["embeddings"]["z2"]
    layer = data["layers"]["embedding"]
    assert (
        list(data["layers"]) == ["embedding"]
        and (layer["n"], layer["d"]) == (4, 3)
        and data["n_ref"] == 4
    )
    u, v = nn.functional.normalize(z1.double(), dim=1), nn.functional.normalize(z2.double(), dim=1)
    assert layer["pairs"]["positive"]["mean"] == pytest.approx(
        float((u * v).sum(1).mean()), abs=1e-6
    )
    assert data["theory"]["variance_band"]["lo"] == pytest.approx(2 / 9) and data["theory"][
        "variance_band"
    ]["hi"] == pytest.approx(8 / 9)
    assert data["theory"]["layers"]["embedding"]["caveat"] is False  # d = 3 = n - 1: a simplex fits
    assert data["theory"]["loss_layer"] == "embedding"
    assert list(data["probes"]) == ["layer", "retrieval"]


@pytest.mark.slow
def test_solo_learn_checkpoint_on_cifar_format_end_to_end(run_cli, tmp_path, cifar_checksums):
    from cl_diag.measurement.views import sample_indices
    from cl_diag.training.augment import train_transform
    from cl_diag.training.data import TwoViews, load_dataset

    root = _write_cifar10(tmp_path / "data", per_batch=12, test=10)
    cifar_checksums(root)
    run = tmp_path / "solo-run"
    run.mkdir()
    backbone, projector = _cifar_resnet18(padding=2, seed=11), _projector(False, seed=12)
    path = _solo_ckpt(run / "simclr-abc-ep=199.ckpt", backbone, projector)
    (run / "args.json").write_text(
        json.dumps(
            {
                "method": "simclr",
                "backbone": {"name": "resnet18"},
                "data": {"dataset": "cifar10"},
                "optimizer": {"batch_size": 32, "lr": 0.3},
                "method_kwargs": {"temperature": 0.2},
                "max_epochs": 200,
            }
        )
    )
    out = tmp_path / "analysis"
    result = run_cli(
        "analyze",
        path,
        "--data-root",
        root,
        "--probe",
        PROBES_DIR / "quick.toml",
        "--num-images",
        "12",
        "--out",
        out,
    )
    assert result.code == 0, result.err
    data = json.loads((out / "result.json").read_text())
    _check_checkpoint_result(
        data, path, ["projector", "backbone"], 12, {"projector": 32, "backbone": 512}
    )
    src = data["source"]
    assert (src["format"], src["arch"], src["dataset"], src["n_train"]) == (
        "solo-learn",
        "resnet18-cifar",
        "cifar10",
        60,
    )
    assert (
        src["cifar_stem_padding"]["value"] == 2
        and src["projector_layout"] == "Linear(512,64)-ReLU-Linear(64,32)"
    )
    assert src["epoch"] == 199 and src["ignored_modules"] == ["classifier"]
    assert (
        data["n_ref"] == 60
        and data["config"]["loss"] == "simclr"
        and data["config"]["batch_size"] == 32
    )
    assert data["theory"]["variance_band"]["m"] == 32
    # The measured positive mean is that of the original modules on the same two views.
    base = load_dataset("cifar10", "train", data_root=str(root))
    views = TwoViews(base, train_transform("cifar10"), seed=0)
    idx = sample_indices(60, 12, 0)
    x1 = torch.stack([views[int(i)][1] for i in idx])
    x2 = torch.stack([views[int(i)][2] for i in idx])
    with torch.no_grad():
        z1, z2 = projector(backbone(x1)), projector(backbone(x2))
    expected = nn.functional.cosine_similarity(z1.double(), z2.double()).mean()
    assert data["layers"]["projector"]["pairs"]["positive"]["mean"] == pytest.approx(
        float(expected), abs=1e-5
    )


@pytest.mark.slow
def test_trained_digits_encoder_beats_its_random_init_on_every_probe(
    run_cli, tmp_path, trained_digits
):
    """The shared trained digits run (conftest.trained_digits), analysed: training added
    something on every probe."""
    checkpoint = trained_digits / "last.pt"
    out = tmp_path / "analysis"
    result = run_cli(
        "analyze",
        checkpoint,
        "--probe",
        PROBES_DIR / "quick.toml",
        "--probe-train-images",
        "1347",
        "--probe-test-images",
        "450",
        "--out",
        out,
        "-q",
    )
    assert result.code == 0, result.err
    data = json.loads((out / "result.json").read_text())
    _check_checkpoint_result(data, checkpoint, ["projector", "backbone"], 256, _dims(checkpoint))
    probes, base = data["probes"], data["probes"]["baselines"]["random_init"]
    for path in (
        ("linear", "top1"),
        ("knn", "k20", "top1"),
        ("knn", "k200", "top1"),
        ("clustering", "nmi"),
        ("clustering", "ari"),
        ("retrieval", "projector", "recall_at_1"),
        ("retrieval", "backbone", "recall_at_1"),
    ):
        trained, random_init = probes, base
        for key in path:
            trained, random_init = trained[key], random_init[key]
        assert trained > random_init, (path, trained, random_init)
    assert data["config"]["epochs"] == 40 and data["source"]["complete"] is True


def test_views_do_not_depend_on_batching_and_match_direct_encoding():
    from cl_diag.measurement.views import (
        Pixels,
        Taps,
        encode_images,
        encode_two_views,
        sample_indices,
    )
    from cl_diag.models import build_model
    from cl_diag.training.augment import eval_transform, train_transform
    from cl_diag.training.data import Transformed, TwoViews, load_dataset

    model = build_model({"dataset": "digits"}, seed=0).eval()
    base = load_dataset("digits", "train")
    views = TwoViews(base, train_transform("digits"), seed=4)
    idx = sample_indices(len(base), 37, seed=4)
    assert idx.tolist() == sorted(set(idx.tolist())) and len(idx) == 37
    taps = {"m": Taps(model.backbone, model.projector), "px": Pixels()}
    a, ya = encode_two_views(taps, views, idx, batch_size=5, device="cpu")
    b, yb = encode_two_views(taps, views, idx, batch_size=64, device="cpu")
    for name, layer in (("m", "projector"), ("m", "backbone"), ("px", "pixels")):
        assert torch.allclose(a[name][layer][0], b[name][layer][0], atol=1e-6)
        assert torch.allclose(a[name][layer][1], b[name][layer][1], atol=1e-6)
    assert torch.equal(ya, yb) and torch.equal(ya, torch.as_tensor(base.targets)[idx])
    # row k is instance idx[k]: its second view through the model, computed directly
    _, _, v2, _ = views[int(idx[7])]
    with torch.no_grad():
        direct = model.projector(model.backbone(v2[None]))[0]
    assert torch.allclose(a["m"]["projector"][1][7], direct, atol=1e-5)
    assert torch.equal(a["px"]["pixels"][1][7], v2.flatten())
    # the un-augmented split, in dataset order
    test = Transformed(load_dataset("digits", "test"), eval_transform("digits"))
    feats, labels = encode_images({"m": Taps(model.backbone)}, test, batch_size=100, device="cpu")
    assert list(feats["m"]) == ["backbone"] and feats["m"]["backbone"].shape == (
        450,
        model.feature_dim,
    )
    with torch.no_grad():
        assert torch.allclose(
            feats["m"]["backbone"][449], model.backbone(test[449][0][None])[0], atol=1e-5
        )
    assert labels[449] == test[449][1]


def test_weights_fingerprint_ignores_run_records_but_not_weights(tmp_path):
    """Two checkpoints with the same weights and different timings/RNG states get one
    fingerprint."""
    from cl_diag.models.checkpoints import read_checkpoint_file, weights_sha256
    from cl_diag.training.checkpoint import load_checkpoint

    source = tmp_path / "run"
    from cl_diag.cli import main

    try:
        main(
            [
                "train",
                "--dataset",
                "toy",
                "--num-samples",
                "4",
                "--dim",
                "3",
                "--batch-size",
                "2",
                "--steps",
                "3",
                "--out",
                str(source),
                "--quiet",
            ]
        )
    except SystemExit as exc:
        assert exc.code in (0, None)
    payload = load_checkpoint(source / "last.pt")
    base = weights_sha256(read_checkpoint_file(source / "last.pt"))

    records = dict(payload, metrics=[{"seconds": 123.0}], rng={"python": [1, 2, 3]})
    torch.save(records, tmp_path / "records.pt")
    assert weights_sha256(read_checkpoint_file(tmp_path / "records.pt")) == base

    z1 = payload["embeddings"]["z1"].clone()
    z1[0, 0] += 1e-6
    changed = dict(payload, embeddings={"z1": z1, "z2": payload["embeddings"]["z2"]})
    torch.save(changed, tmp_path / "changed.pt")
    assert weights_sha256(read_checkpoint_file(tmp_path / "changed.pt")) != base
