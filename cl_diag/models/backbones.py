"""The backbone modules: one torchvision ResNet builder (with or without the CIFAR stem), a
small CNN for 8x8 digits, and the toy experiment's free vectors.

A backbone maps an input batch to a ``(batch, feature_dim)`` representation, the one the
probes read; the projector (:mod:`cl_diag.models.build`) maps it on to the embedding the
loss sees.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["RESNET_FEATURES", "FreeEmbeddings", "SmallCNN", "build_resnet"]

#: Pooled feature width of each torchvision ResNet (BasicBlock: 512, Bottleneck: 2048).
RESNET_FEATURES = {"resnet18": 512, "resnet34": 512, "resnet50": 2048}


def build_resnet(
    base: str, *, cifar_stem: bool, cifar_stem_padding: int = 1, in_channels: int = 3
) -> nn.Module:
    """A torchvision ResNet (``base``: resnet18, resnet34 or resnet50) as a feature extractor.

    ``fc`` is the identity, so the output is the pooled feature (512-d for resnet18/34,
    2048-d for resnet50). With ``cifar_stem`` the first convolution is
    ``Conv2d(in_channels, 64, 3, stride=1, padding=cifar_stem_padding)`` and there is no
    max-pool: on 32x32 inputs a 7x7 stride-2 stem plus max-pool would leave 8x8 maps after
    one layer (He et al. 2016, Sec. 4.2; the paper's App. D; solo-learn's rule for CIFAR).
    The padding is not stored in the weights (a 3x3 kernel has the same shape with padding
    1 or 2): solo-learn upstream uses 2, the paper's fork and the usual CIFAR ResNet 1.
    Without the CIFAR stem, ``in_channels != 3`` replaces the 7x7 stem by one that takes
    that many channels.

    The random draws happen in a fixed order (torchvision's initialisation, then the new
    stem), so a seeded build is the same module on every call.
    """
    import torchvision  # slow to import; only the ResNet paths need it

    if base not in RESNET_FEATURES:
        raise ValueError(f"unknown ResNet {base!r}; choose one of: {', '.join(RESNET_FEATURES)}")
    net = getattr(torchvision.models, base)(weights=None)
    if cifar_stem:
        net.conv1 = nn.Conv2d(
            in_channels, 64, kernel_size=3, stride=1, padding=cifar_stem_padding, bias=False
        )
        net.maxpool = nn.Identity()
    elif in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    net.fc = nn.Identity()
    return net


class SmallCNN(nn.Module):
    """A 4-layer CNN for 8x8 images: 16-32 channels at 8x8, pool, 64-64 at 4x4, GAP.

    The global average pool keeps the features from being a mere copy of the pixels, so
    a random-init encoder is a weak baseline and learning shows.
    """

    def __init__(self, in_channels: int = 1, width: int = 16):
        super().__init__()

        def block(cin: int, cout: int) -> list[nn.Module]:
            return [
                nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
            ]

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
