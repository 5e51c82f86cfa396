"""Every fix a checkpoint-loading message offers works (issue 24, item 2).

Each case makes a file and a command line that ``cl-diag analyze`` refuses, reads the fixes
the message names (``e.g. --arch resnet18 --backbone-prefix 'p.'``, ``pass --arch X``, ``use
--encoder key``, ``drop --views``, ``Drop the option``, ``the file's keys are under: 'p.'``,
``drop --image-size or give 160``) with :func:`suggested`, which knows those phrasings and
nothing about the case, and runs each suggested command line: every one must succeed. A
message whose fix the reader does not find fails the test, so a new phrasing is noticed.

Left out: messages whose fix needs data this machine does not hold (an online classifier's
classes against CIFAR's; a training-set size against the data found) or names no single
command (``--rename`` patterns that collide).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

pytestmark = pytest.mark.slow  # two analyses a case: the full suite runs them

QUICK = ["--num-images", "8", "--probes", "none", "--quiet"]


# --------------------------------------------------------------------------- the reader


def _set(args: list[str], option: str, value: str) -> list[str]:
    out = list(args)
    if option in out:
        out[out.index(option) + 1] = value
    else:
        out += [option, value]
    return out


def _drop(args: list[str], option: str) -> list[str]:
    out = list(args)
    at = out.index(option)
    del out[at : at + 2]  # every option these cases drop takes a value
    return out


def _renamed(args: list[str], option: str) -> str:
    """The option of ``args`` that ``option`` replaces: the one it ends with
    (``--batch-size`` for ``--encode-batch-size``)."""
    return next(a for a in args if a.startswith("--") and a != option and option.endswith(a[2:]))


def suggested(args: list[str], message: str) -> list[list[str]]:
    """The command lines ``message`` suggests instead of ``args``: one per fix it offers (read
    from its ``error:`` paragraph: a warning before it advises on another matter)."""
    text = " ".join(message.split())
    text = text[text.find("error: ") :] if "error: " in text else text
    text = text.removeprefix("error: ")
    fixes: list[list[str]] = []
    example = re.search(r"; e\.g\. (--arch .+?)\. Supported layouts", text)
    if example:  # the unknown layout: a whole mapping to add
        flags = shlex.split(example.group(1))
        line = list(args)
        for option, value in zip(flags[::2], flags[1::2], strict=True):
            line = _set(line, option, value)
        fixes.append(line)
    for option, value in re.findall(r"\bgive (--[a-z-]+) (\S+) instead\b", text):
        fixes.append(_set(_drop(args, _renamed(args, option)), option, value))
    text = re.sub(r"\bgive --[a-z-]+ \S+ instead\b", "", text)
    for option, value in re.findall(
        r"\b(?:pass|use|give) (--[a-z-]+) ([^\s,;()]+?)[.;,]?(?= |$)", text
    ):
        fixes.append(_set(args, option, value))
    for option, value in re.findall(r"\be\.g\. (--dataset) (\w+)", text):
        fixes.append(_set(args, option, value))
    for option in re.findall(r"\b[Dd]rop (--[a-z-]+)", text):
        fixes.append(_drop(args, option))
    for option, value in re.findall(r"\bdrop (--[a-z-]+) or give (\d+)", text):
        fixes.append(_set(args, option, value))
    if re.search(r"Drop the option\.|drop (?:it|them)\.", text):
        named = re.match(r"((?:--[a-z-]+(?:, )?)+) (?:applies|describes?)", text)
        assert named, text
        line = list(args)
        for option in named.group(1).split(", "):
            line = _drop(line, option)
        fixes.append(line)
    under = re.search(
        r"selects no keys; the file's keys(?: \(after --rename\))? are under: '([^']*)'", text
    )
    if under:
        fixes.append(_set(args, "--backbone-prefix", under.group(1)))
    if "(--backbone-prefix '' takes every key outside the projector" in text:
        fixes.append(_set(args, "--backbone-prefix", ""))
    return fixes


def test_the_reader_reads_the_phrasings():
    args = ["analyze", "f.pt", "--arch", "x", "--views", "3"]
    assert suggested(args, "These weights look like resnet18: pass --arch resnet18.") == [
        ["analyze", "f.pt", "--arch", "resnet18", "--views", "3"]
    ]
    assert suggested(args, "--arch applies to foreign checkpoints only; ... Drop the option.") == [
        ["analyze", "f.pt", "--views", "3"]
    ]
    assert suggested(args, "no encoder to draw more views; drop --views.") == [
        ["analyze", "f.pt", "--arch", "x"]
    ]
    assert suggested(args, "nothing to fix here") == []


# --------------------------------------------------------------------------- the files


def _resnet18() -> nn.Module:
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10).eval()


def _children(net: nn.Module) -> dict[str, torch.Tensor]:
    """lightly's tutorial backbone: the ResNet's children without fc."""
    return nn.Sequential(*list(net.children())[:-1]).state_dict()


def _body(net: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in net.state_dict().items() if not k.startswith("fc.")}


def tutorial_save(tmp: Path, make_checkpoint=None) -> Path:
    path = tmp / "model.pth"
    torch.save({"resnet18_parameters": _children(_resnet18())}, path)
    return path


def torchvision_state_dict(tmp: Path, make_checkpoint=None) -> Path:
    path = tmp / "resnet18.pth"
    torch.save(_resnet18().state_dict(), path)
    return path


def moco_query_only(tmp: Path, make_checkpoint=None) -> Path:
    """MoCo v2's layout (fc replaced by the MLP) with the momentum encoder left out."""
    net = _resnet18()
    net.fc = nn.Sequential(nn.Linear(512, 32), nn.ReLU(), nn.Linear(32, 16))
    state = {f"module.encoder_q.{k}": v for k, v in net.state_dict().items()}
    path = tmp / "moco.pth.tar"
    torch.save({"state_dict": state, "arch": "resnet18", "epoch": 1}, path)
    return path


def dino_teacher_only(tmp: Path, make_checkpoint=None) -> Path:
    head = nn.Sequential(nn.Linear(512, 32), nn.GELU(), nn.Linear(32, 16))
    teacher = {f"backbone.{k}": v for k, v in _body(_resnet18()).items()}
    teacher.update({f"head.mlp.{k}": v for k, v in head.state_dict().items()})
    path = tmp / "dino.pth"
    torch.save({"teacher": teacher, "epoch": 1}, path)
    return path


def backbone_and_head(tmp: Path, make_checkpoint=None) -> Path:
    """A backbone's keys at the top level beside a projector under ``head.``."""
    state = dict(_body(_resnet18()))
    head = nn.Sequential(nn.Linear(512, 32), nn.ReLU(), nn.Linear(32, 16))
    state.update({f"head.{k}": v for k, v in head.state_dict().items()})
    path = tmp / "with-head.pth"
    torch.save(state, path)
    return path


def vit_state_dict(tmp: Path, make_checkpoint=None) -> Path:
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    path = tmp / "vit.pth"
    torch.save(timm.create_model("test_vit", pretrained=False).state_dict(), path)
    return path


def convnext_state_dict(tmp: Path, make_checkpoint=None) -> Path:
    """A timm ConvNeXt's own state dict: no layout cl-diag knows, but timm's keys and shapes."""
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    path = tmp / "convnext.pth"
    torch.save(timm.create_model("test_convnext", pretrained=False).state_dict(), path)
    return path


def pairs(tmp: Path, make_checkpoint=None) -> Path:
    rng = np.random.default_rng(0)
    z = rng.standard_normal((20, 8)).astype(np.float32)
    path = tmp / "pairs.npz"
    np.savez(path, z1=z, z2=z + 0.1)
    return path


# every maker takes the conftest's checkpoint writer; the cl-diag ones use it
def cl_diag_digits(tmp: Path, make_checkpoint) -> Path:
    return make_checkpoint(tmp / "last.pt", dataset="digits")


def cl_diag_toy(tmp: Path, make_checkpoint) -> Path:
    return make_checkpoint(tmp / "toy.pt", dataset="toy", num_samples=16, batch_size=8)


#: (name, file maker, the refused options, a fragment of the message)
CASES: list[tuple[str, Callable, list[str], str]] = [
    ("unknown layout", tutorial_save, ["--dataset", "digits"], "is not a checkpoint layout"),
    ("no arch", torchvision_state_dict, ["--dataset", "digits"], "does not record its arch"),
    (
        "wrong arch",
        torchvision_state_dict,
        ["--arch", "resnet34", "--dataset", "digits"],
        "look like resnet18",
    ),
    ("no dataset", torchvision_state_dict, ["--arch", "resnet18"], "does not record its dataset"),
    (
        "no key encoder",
        moco_query_only,
        ["--encoder", "key", "--dataset", "digits"],
        "no key encoder",
    ),
    (
        "no student",
        dino_teacher_only,
        ["--arch", "resnet18", "--encoder", "student", "--dataset", "digits"],
        "no student weights",
    ),
    (
        "one encoder",
        torchvision_state_dict,
        ["--arch", "resnet18", "--dataset", "digits", "--encoder", "key"],
        "holds one encoder",
    ),
    (
        "prefix selects nothing",
        tutorial_save,
        ["--arch", "resnet18", "--backbone-prefix", "model.", "--dataset", "digits"],
        "selects no keys",
    ),
    (
        "projector prefix alone",
        backbone_and_head,
        ["--arch", "resnet18", "--projector-prefix", "head.", "--dataset", "digits"],
        "needs --backbone-prefix",
    ),
    (
        "no projector",
        torchvision_state_dict,
        ["--arch", "resnet18", "--dataset", "digits", "--layers", "projector"],
        "holds no projector",
    ),
    (
        "a timm model's state dict",
        convnext_state_dict,
        ["--dataset", "digits"],
        "those of timm's test_convnext",
    ),
    (
        "too small for the network",
        convnext_state_dict,
        ["--arch", "timm:test_convnext", "--dataset", "digits"],
        "cannot encode 8-px images",
    ),
    (
        "fixed input",
        vit_state_dict,
        ["--arch", "timm:test_vit", "--dataset", "digits", "--image-size", "32"],
        "takes 160-px images only",
    ),
    (
        "cl-diag with --arch",
        cl_diag_digits,
        ["--arch", "resnet18"],
        "applies to foreign checkpoints only",
    ),
    ("cl-diag with --dataset", cl_diag_digits, ["--dataset", "cifar10"], "cannot change that"),
    ("toy with --image-size", cl_diag_toy, ["--image-size", "32"], "learned vectors"),
    ("toy with --views", cl_diag_toy, ["--views", "3"], "drop --views"),
    ("renamed --batch-size", cl_diag_digits, ["--batch-size", "64"], "--encode-batch-size 64"),
    (
        "embeddings with --arch",
        pairs,
        ["--arch", "resnet18", "--dataset", "digits"],
        "describe a checkpoint",
    ),
]


@pytest.mark.parametrize(("name", "make", "options", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_every_suggestion_runs(name, make, options, fragment, run_cli, tmp_path, make_checkpoint):
    path = make(tmp_path, make_checkpoint)
    args = ["analyze", str(path), *QUICK, *options, "--out", str(tmp_path / "refused")]
    refused = run_cli(*args)
    assert refused.code == 2, (refused.out, refused.err)
    assert "Traceback" not in refused.err and not (tmp_path / "refused").exists()
    assert fragment in " ".join(refused.err.split()), refused.err
    fixes = suggested(args, refused.err)
    assert fixes, f"no fix read from: {refused.err}"
    for index, fix in enumerate(fixes):
        out = str(tmp_path / f"fixed{index}")
        ran = run_cli(*_set(fix, "--out", out))
        assert ran.code == 0, (name, fix, ran.err)
        assert (Path(out) / "result.json").is_file()
