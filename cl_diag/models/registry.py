"""The architecture registry: every backbone cl-diag builds, by name, with what the rest of
the tool needs to know about it.

One :class:`ArchSpec` per name: the builder, the feature dimension, the projector's default
hidden width, whether it is convolutional (channels_last on CUDA), whether it has the CIFAR
stem, and where the name is offered (``cl-diag train --arch`` and/or the ``--arch`` of a
foreign checkpoint in ``cl-diag analyze``)::

    small-cnn        64-d   digits (8x8, one channel)                      train
    resnet18-cifar  512-d   3x3 stride-1 stem, no max-pool (CIFAR)         train, foreign
    resnet18        512-d   torchvision's                                  train, foreign
    resnet34-cifar  512-d                                                  foreign
    resnet34        512-d                                                  foreign
    resnet50-cifar 2048-d                                                  foreign
    resnet50       2048-d   projector hidden 2048 (solo-learn's)           train, foreign
    embedding       --dim   the toy experiment's free vectors, no projector train

Families of names with a prefix (``timm:vit_small_patch16_224``) resolve through
:func:`register_arch_family`: a family is a function from the part after the colon to an
:class:`ArchSpec`. The timm backbones (:mod:`cl_diag.models.timm_backbones`) plug in that way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from cl_diag.models.backbones import RESNET_FEATURES, FreeEmbeddings, SmallCNN, build_resnet

__all__ = [
    "ARCHS",
    "FOREIGN_ARCHS",
    "ArchSpec",
    "BackboneOptions",
    "arch_names",
    "default_arch",
    "default_projector_hidden",
    "get_arch",
    "is_convolutional",
    "register_arch",
    "register_arch_family",
]


@dataclass(frozen=True)
class BackboneOptions:
    """What a builder may need besides the architecture's name."""

    in_channels: int = 3
    cifar_stem_padding: int = 1  # only archs with the CIFAR stem read it
    num_samples: int = 4  # embedding: instances (2 x num_samples free vectors)
    dim: int = 3  # embedding: their dimension


BackboneBuilder = Callable[[BackboneOptions], nn.Module]


@dataclass(frozen=True)
class ArchSpec:
    """One architecture: how to build its backbone and what the tool must know about it."""

    name: str
    build: BackboneBuilder
    #: width of the backbone's output; None: the built module's ``out_dim`` (embedding's --dim)
    feature_dim: int | None
    #: the projector's hidden width when --projector-hidden is not given; None: no projector
    projector_hidden: int | None
    convolutional: bool
    cifar_stem: bool
    trainable: bool  # offered by `cl-diag train --arch`
    foreign: bool  # a foreign checkpoint (solo-learn, plain state dict) can be rebuilt as it
    #: the image side the backbone requires (a ViT's position embeddings fix it); None: any
    input_size: int | None = None
    #: top-level modules of the classification head a feature extractor leaves out (their
    #: weights in a foreign file are set aside, not loaded): torchvision's ``fc``, timm's head
    heads: tuple[str, ...] = ()
    #: the backbone's parameter count, found without allocating its weights (a family of
    #: any size, such as timm's, declares it; None: a fixed, small architecture)
    parameters: Callable[[BackboneOptions], int] | None = None


_REGISTRY: dict[str, ArchSpec] = {}
_FAMILIES: dict[str, Callable[[str], ArchSpec]] = {}


def register_arch(spec: ArchSpec) -> ArchSpec:
    """Add ``spec`` under ``spec.name`` (a name may be registered once)."""
    if spec.name in _REGISTRY or ":" in spec.name:
        raise ValueError(
            f"cannot register arch {spec.name!r}: taken, or holds a ':' (family names do)"
        )
    _REGISTRY[spec.name] = spec
    return spec


def register_arch_family(prefix: str, resolve: Callable[[str], ArchSpec]) -> None:
    """Names ``PREFIX:REST`` resolve to ``resolve(REST)`` (which raises ValueError for an
    unknown REST). The extension point for backbones from other libraries (``timm:``)."""
    if not prefix or ":" in prefix or prefix in _FAMILIES:
        raise ValueError(f"cannot register arch family {prefix!r}")
    _FAMILIES[prefix] = resolve


def get_arch(name: str) -> ArchSpec:
    """The :class:`ArchSpec` of ``name``; ValueError naming the choices when there is none."""
    spec = _REGISTRY.get(name)
    if spec is not None:
        return spec
    family, colon, rest = str(name).partition(":")
    if colon and family in _FAMILIES:
        return _FAMILIES[family](rest)
    families = "".join(f", {prefix}:NAME" for prefix in _FAMILIES)
    raise ValueError(f"unknown arch {name!r}; choose one of: {', '.join(_REGISTRY)}{families}")


def arch_names(*, trainable: bool | None = None, foreign: bool | None = None) -> tuple[str, ...]:
    """Registered names in registration order, optionally only those offered for training
    (``trainable=True``) or for foreign checkpoints (``foreign=True``)."""
    return tuple(
        name
        for name, spec in _REGISTRY.items()
        if (trainable is None or spec.trainable == trainable)
        and (foreign is None or spec.foreign == foreign)
    )


#: The encoder ``--arch auto`` picks for each dataset.
_DEFAULT_FOR_DATASET = {
    "digits": "small-cnn",
    "cifar10": "resnet18-cifar",
    "cifar100": "resnet18-cifar",
    "imagefolder": "resnet18",
    "toy": "embedding",
}


def default_arch(dataset: str) -> str:
    """The encoder used when ``--arch`` is ``auto``."""
    return _DEFAULT_FOR_DATASET[dataset]


def default_projector_hidden(arch: str) -> int:
    """Projector hidden width when ``--projector-hidden`` is not given (solo-learn's: 2048
    for ResNet-50, else 512)."""
    return get_arch(arch).projector_hidden or 512


def is_convolutional(arch: str) -> bool:
    """Whether the backbone takes image batches (channels_last pays off on CUDA)."""
    return get_arch(arch).convolutional


# --------------------------------------------------------------------------- built-in archs


def _resnet(base: str, cifar: bool) -> BackboneBuilder:
    def build(options: BackboneOptions) -> nn.Module:
        return build_resnet(
            base,
            cifar_stem=cifar,
            cifar_stem_padding=options.cifar_stem_padding,
            in_channels=options.in_channels,
        )

    return build


def _register_builtins() -> None:
    register_arch(
        ArchSpec(
            "small-cnn",
            lambda o: SmallCNN(o.in_channels),
            64,
            512,
            convolutional=True,
            cifar_stem=False,
            trainable=True,
            foreign=False,
        )
    )
    for base in ("resnet18", "resnet34", "resnet50"):
        # training offers the ResNet-18 pair and the ImageNet-stem ResNet-50, as it always has
        for cifar in (True, False):
            register_arch(
                ArchSpec(
                    base + ("-cifar" if cifar else ""),
                    _resnet(base, cifar),
                    RESNET_FEATURES[base],
                    2048 if base == "resnet50" else 512,
                    convolutional=True,
                    cifar_stem=cifar,
                    trainable=base == "resnet18" or (base == "resnet50" and not cifar),
                    foreign=True,
                    heads=("fc",),
                )
            )
    register_arch(
        ArchSpec(
            "embedding",
            lambda o: FreeEmbeddings(o.num_samples, o.dim),
            None,
            None,
            convolutional=False,
            cifar_stem=False,
            trainable=True,
            foreign=False,
        )
    )


_register_builtins()

#: Names ``cl-diag train --arch`` accepts (besides ``auto``).
ARCHS = arch_names(trainable=True)
#: Names a foreign checkpoint can be rebuilt as (``cl-diag analyze --arch``).
FOREIGN_ARCHS = arch_names(foreign=True)
