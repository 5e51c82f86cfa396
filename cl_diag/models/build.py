"""Building models: a backbone from the registry, the projector, and :func:`build_model` (a
fresh model for a training config, or for the config a checkpoint stores). A
:class:`ContrastiveModel` has a ``backbone`` (image -> the features probed) and a ``projector``
(features -> the embedding the loss sees): Linear-BN-ReLU-Linear (SimCLR's), hidden 512 (2048
for ResNet-50), output 128, keyed like solo-learn's ``nn.Sequential`` (``0.*``, ``1.*``,
``3.*``). Foreign projectors are rebuilt from their keys instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from typing import Any, cast

import torch
from torch import nn

from cl_diag.errors import UserError
from cl_diag.models.registry import BackboneOptions, default_arch, get_arch
from cl_diag.options import MAX_PARAMETERS

__all__ = [
    "ContrastiveModel",
    "backbone_size_problem",
    "build_backbone",
    "build_model",
    "build_projector",
    "fresh_like",
    "seeded",
]


@contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """Draw under ``torch.manual_seed(seed)`` without touching the caller's RNG state
    (``None``: draw from the current state, as usual)."""
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def backbone_size_problem(arch: str, options: BackboneOptions | None = None) -> str | None:
    """Why the backbone ``arch`` is too large to build (more parameters than
    :data:`cl_diag.options.MAX_PARAMETERS`), or None. The count comes from the architecture
    without allocating a weight (:attr:`ArchSpec.parameters`); architectures of a fixed,
    small size declare none and are never counted."""
    spec = get_arch(arch)
    if spec.parameters is None:
        return None
    count = spec.parameters(options or BackboneOptions())
    if count <= MAX_PARAMETERS:
        return None
    return (
        f"{spec.name} has {count:,} parameters ({4 * count / 2**30:.1f} GiB of float32 "
        f"weights), more than the {MAX_PARAMETERS:,} cl-diag builds; choose a smaller model"
    )


def build_backbone(arch: str, options: BackboneOptions | None = None) -> tuple[nn.Module, int]:
    """The backbone registered as ``arch`` and its feature dimension (ValueError if unknown;
    UserError when it has more parameters than cl-diag builds: :func:`backbone_size_problem`,
    checked before a weight is allocated)."""
    spec = get_arch(arch)
    problem = backbone_size_problem(arch, options)
    if problem is not None:
        raise UserError(f"The backbone {problem}.")
    module = spec.build(options or BackboneOptions())
    # a family without a fixed width (embedding: --dim) states it as the module's int out_dim
    dim = spec.feature_dim if spec.feature_dim is not None else cast(int, module.out_dim)
    return module, dim


def build_projector(in_dim: int, hidden: int, out: int) -> nn.Sequential:
    """Linear-BN-ReLU-Linear (SimCLR's; solo-learn's module layout)."""
    return nn.Sequential(
        nn.Linear(in_dim, hidden),
        nn.BatchNorm1d(hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, out),
    )


def fresh_like(projector: nn.Module) -> nn.Sequential:
    """A projector of the same layers and widths as ``projector``, freshly initialised
    (Linear, BatchNorm1d and parameter-free ReLU/GELU layers, as
    :func:`cl_diag.models.foreign.rebuild_projector` makes them)."""
    layers: list[nn.Module] = []
    for layer in projector.children():
        if isinstance(layer, nn.Linear):
            bias = layer.bias is not None
            layers.append(nn.Linear(layer.in_features, layer.out_features, bias=bias))
        elif isinstance(layer, nn.BatchNorm1d):
            layers.append(nn.BatchNorm1d(layer.num_features, affine=layer.affine))
        else:  # an activation: the same kind (DINO's head uses GELU)
            layers.append(nn.GELU() if isinstance(layer, nn.GELU) else nn.ReLU())
    return nn.Sequential(*layers)


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
    (None: the arch's default, 512 or 2048 for ResNet-50), ``projector_dim`` (128),
    ``num_samples`` and ``dim`` (toy), ``conv1_padding`` (the CIFAR stem's, default 1).
    With ``seed`` the initial weights are drawn under ``torch.manual_seed(seed)`` without
    touching the caller's RNG state. Raises ValueError for an arch that is unknown or does
    not fit the dataset.
    """
    if is_dataclass(config) and not isinstance(config, type):
        config = asdict(config)
    dataset = _get(config, "dataset", "digits")
    arch = _get(config, "arch", "auto") or "auto"
    if arch == "auto":
        arch = default_arch(dataset)
    if (arch == "embedding") != (dataset == "toy"):
        raise ValueError("arch 'embedding' goes with dataset 'toy', and only with it")
    spec = get_arch(arch)
    if spec.projector_hidden is None:  # the free vectors: only their count and width matter
        options = BackboneOptions(
            num_samples=int(_pick(_get(config, "num_samples"), 4)),
            dim=int(_pick(_get(config, "dim"), 3)),
        )
    else:
        options = BackboneOptions(
            in_channels=1 if dataset == "digits" else 3,
            cifar_stem_padding=int(_pick(_get(config, "conv1_padding"), 1)),
        )
    with seeded(seed):
        # backbone first, then projector: the order of the random draws is part of the model
        backbone, feat = build_backbone(arch, options)
        if spec.projector_hidden is None:
            return ContrastiveModel(backbone, nn.Identity(), arch, feat)
        hidden = _pick(_get(config, "projector_hidden"), spec.projector_hidden)
        out = int(_pick(_get(config, "projector_dim"), 128))
        projector = build_projector(feat, int(hidden), out)
        return ContrastiveModel(backbone, projector, arch, feat)
