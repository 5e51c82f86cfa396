"""Encoders, the projector, and :func:`build_model` (which rebuilds a model from a
checkpoint's stored config).

A :class:`ContrastiveModel` has two submodules, ``backbone`` (image -> features, the
representation that is probed) and ``projector`` (features -> the embedding the loss
sees). Checkpoints store their state dicts separately.

* ``resnet18-cifar``: torchvision ResNet-18 with a 3x3 stride-1 first convolution and no
  max-pool (paper App. D). ``conv1_padding`` defaults to 1 (size-preserving);
  solo-learn's checkpoints use 2, so the analyze command can pass it.
* ``resnet18``, ``resnet50``: torchvision's, ``fc`` removed.
* ``small-cnn``: four 3x3 conv-BN-ReLU layers and a global average pool, for the 8x8
  digits (64 features).
* ``embedding``: the toy experiment's free vectors (no encoder, identity projector).
* projector: Linear-BN-ReLU-Linear, hidden 512 (2048 for ResNet-50), output 128, laid out
  like solo-learn's ``nn.Sequential`` so its keys are ``0.*``, ``1.*``, ``3.*``.
"""

from __future__ import annotations

from dataclasses import asdict, is_dataclass
from typing import Any, Mapping

import torch
from torch import nn

__all__ = [
    "ARCHS",
    "ContrastiveModel",
    "FreeEmbeddings",
    "SmallCNN",
    "build_backbone",
    "build_projector",
    "build_model",
    "default_arch",
    "default_projector_hidden",
    "is_convolutional",
]

ARCHS = ("small-cnn", "resnet18-cifar", "resnet18", "resnet50", "embedding")

_FEATURES = {"small-cnn": 64, "resnet18-cifar": 512, "resnet18": 512, "resnet50": 2048}


def default_arch(dataset: str) -> str:
    """The encoder used when ``--arch`` is ``auto``."""
    return {
        "digits": "small-cnn",
        "cifar10": "resnet18-cifar",
        "cifar100": "resnet18-cifar",
        "imagefolder": "resnet18",
        "toy": "embedding",
    }[dataset]


def default_projector_hidden(arch: str) -> int:
    """Projector hidden width when ``--projector-hidden`` is not given (solo-learn's)."""
    return 2048 if arch == "resnet50" else 512


def is_convolutional(arch: str) -> bool:
    return arch != "embedding"


class SmallCNN(nn.Module):
    """A 4-layer CNN for 8x8 images: 16-32 channels at 8x8, pool, 64-64 at 4x4, GAP.

    The global average pool keeps the features from being a mere copy of the pixels, so
    a random-init encoder is a weak baseline and learning shows.
    """

    def __init__(self, in_channels: int = 1, width: int = 16):
        super().__init__()

        def block(cin: int, cout: int) -> list[nn.Module]:
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

        w = width
        self.features = nn.Sequential(
            *block(in_channels, w),
            *block(w, 2 * w),
            nn.MaxPool2d(2),
            *block(2 * w, 4 * w),
            *block(4 * w, 4 * w),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.out_dim = 4 * w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)


class FreeEmbeddings(nn.Module):
    """``2n`` learnable vectors in R^d: rows ``0..n-1`` are view 1, ``n..2n-1`` view 2.

    The input is a tensor of row ids (see :class:`cl_diag.training.data.ToyViews`).
    """

    def __init__(self, n: int, dim: int):
        super().__init__()
        self.n, self.out_dim = n, dim
        self.weight = nn.Parameter(torch.randn(2 * n, dim))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return self.weight[rows]

    def views(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The current embeddings ``(z1, z2)``, each ``(n, d)``, detached on CPU."""
        w = self.weight.detach().cpu().clone()
        return w[: self.n], w[self.n :]


def build_backbone(arch: str, *, in_channels: int = 3, conv1_padding: int = 1) -> tuple[nn.Module, int]:
    """An image encoder and its feature dimension."""
    if arch == "small-cnn":
        m = SmallCNN(in_channels)
        return m, m.out_dim
    import torchvision

    if arch in ("resnet18-cifar", "resnet18"):
        m = torchvision.models.resnet18(weights=None)
    elif arch == "resnet50":
        m = torchvision.models.resnet50(weights=None)
    else:
        raise ValueError(f"unknown arch {arch!r}; choose one of: {', '.join(ARCHS)}")
    if arch == "resnet18-cifar":
        # 32x32 inputs: a 7x7 stride-2 stem plus max-pool would leave 8x8 maps after one layer.
        m.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=conv1_padding, bias=False)
        m.maxpool = nn.Identity()
    elif in_channels != 3:
        m.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    m.fc = nn.Identity()
    return m, _FEATURES[arch]


def build_projector(in_dim: int, hidden: int, out: int) -> nn.Sequential:
    """Linear-BN-ReLU-Linear (SimCLR's; solo-learn's module layout)."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True), nn.Linear(hidden, out))


class ContrastiveModel(nn.Module):
    """``projector(backbone(x))``; ``features(x)`` is the backbone's representation."""

    def __init__(self, backbone: nn.Module, projector: nn.Module, arch: str, feature_dim: int):
        super().__init__()
        self.backbone, self.projector = backbone, projector
        self.arch, self.feature_dim = arch, feature_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projector(self.backbone(x))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)


def _get(config: Any, name: str, default: Any = None) -> Any:
    if isinstance(config, Mapping):
        return config.get(name, default)
    return getattr(config, name, default)


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


def build_model(config: Any, *, seed: int | None = None) -> ContrastiveModel:
    """A fresh model for a training config (a ``TrainConfig``, or the ``config`` dict stored
    in a checkpoint; a plain dict with the keys below works too).

    Keys read: ``dataset``, ``arch`` (``auto`` resolves per dataset), ``projector_hidden``
    (None: 512, 2048 for ResNet-50), ``projector_dim`` (128), ``num_samples`` and ``dim``
    (toy), ``conv1_padding`` (optional, default 1). With ``seed`` the initial weights are
    drawn under ``torch.manual_seed(seed)`` without touching the caller's RNG state.
    """
    if is_dataclass(config) and not isinstance(config, type):
        config = asdict(config)
    dataset = _get(config, "dataset", "digits")
    arch = _get(config, "arch", "auto") or "auto"
    if arch == "auto":
        arch = default_arch(dataset)
    if (arch == "embedding") != (dataset == "toy"):
        raise ValueError("arch 'embedding' goes with dataset 'toy', and only with it")
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; choose one of: {', '.join(ARCHS)}")

    def make() -> ContrastiveModel:
        if arch == "embedding":
            n = _pick(_get(config, "num_samples"), 4)
            emb = FreeEmbeddings(int(n), int(_pick(_get(config, "dim"), 3)))
            return ContrastiveModel(emb, nn.Identity(), arch, emb.out_dim)
        backbone, feat = build_backbone(
            arch,
            in_channels=1 if dataset == "digits" else 3,
            conv1_padding=int(_pick(_get(config, "conv1_padding"), 1)),
        )
        hidden = _pick(_get(config, "projector_hidden"), default_projector_hidden(arch))
        projector = build_projector(feat, int(hidden), int(_pick(_get(config, "projector_dim"), 128)))
        return ContrastiveModel(backbone, projector, arch, feat)

    if seed is None:
        return make()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()
