"""timm backbones: ``--arch timm:NAME`` for any model name timm knows (issue 13, section 3).

``timm:NAME`` resolves (:func:`~cl_diag.models.registry.register_arch_family`) to an
:class:`~cl_diag.models.registry.ArchSpec` built by ``timm.create_model(NAME,
pretrained=False, num_classes=0, in_chans=C)``: the pooled feature extractor, never downloaded
weights. What the registry needs besides comes from timm's pretrained config without building
the model (a fixed ``input_size``, as a ViT's position embeddings have; the classifier head's
name, whose weights are set aside), and the parameter count from the model built on the meta
device, so that a model too large to build is refused first. timm is optional (the ``[timm]``
extra), imported only when a ``timm:`` name is used.
"""

from __future__ import annotations

import functools
from typing import Any

from torch import nn

from cl_diag.errors import UserError
from cl_diag.models.registry import ArchSpec, BackboneOptions, register_arch_family

__all__ = [
    "TIMM_FAMILY",
    "match_timm_model",
    "resolve_timm",
    "timm_feature_dim",
    "timm_input_side",
]

#: The prefix of timm's names: ``--arch timm:vit_small_patch16_224``.
TIMM_FAMILY = "timm"
#: Projector hidden width of a timm backbone when --projector-hidden is not given (the tool's
#: default for every backbone but ResNet-50).
TIMM_PROJECTOR_HIDDEN = 512


def _timm(name: str) -> Any:
    try:
        import timm
    except ImportError:
        raise UserError(
            f"--arch {TIMM_FAMILY}:{name} needs the timm package, which is not installed: "
            "pip install 'cl-diag[timm]' (or pip install timm)."
        ) from None
    return timm


def timm_feature_dim(model: nn.Module) -> int:
    """Width of a timm model's output with ``num_classes=0``: the pre-logits layer's
    (``head_hidden_size``, e.g. MobileNetV3's 1024) where it has one, else ``num_features``."""
    width = getattr(model, "head_hidden_size", None) or getattr(model, "num_features", None)
    if not isinstance(width, int):
        raise ValueError(f"{type(model).__name__} does not say its feature width")
    return width


@functools.cache
def resolve_timm(name: str) -> ArchSpec:
    """The :class:`ArchSpec` of ``timm:NAME``; ValueError naming close names when timm has
    no model ``NAME``; UserError when timm is not installed."""
    timm = _timm(name)
    if not name or not timm.is_model(name):
        stem = name.split(".", 1)[0]
        # names that start like the one given first (vit_tiny -> vit_tiny_patch16_224)
        found = timm.list_models(f"*{stem}*") if stem else []
        close = sorted(found, key=lambda n: (not n.startswith(stem), n))[:8]
        hint = f"; close names: {', '.join(close)}" if close else ""
        pattern = f"*{stem or 'vit'}*"
        raise ValueError(
            f"unknown arch '{TIMM_FAMILY}:{name}': timm {timm.__version__} has no model "
            f"{name!r}{hint}. python -c \"import timm; print(timm.list_models('{pattern}'))\" "
            "lists the names."
        )
    cfg = timm.get_pretrained_cfg(name)
    fixed = bool(getattr(cfg, "fixed_input_size", False))
    size = getattr(cfg, "input_size", None)
    classifier = getattr(cfg, "classifier", None)
    heads = (classifier,) if isinstance(classifier, str) else tuple(classifier or ())

    def parameters(options: BackboneOptions) -> int:
        return _parameter_count(name, options.in_channels)

    def build(options: BackboneOptions) -> nn.Module:
        # pretrained=False: nothing is downloaded; num_classes=0: the pooled features
        model = timm.create_model(
            name, pretrained=False, num_classes=0, in_chans=options.in_channels
        )
        model.out_dim = timm_feature_dim(model)  # what build_backbone reads (feature_dim None)
        return model

    return ArchSpec(
        f"{TIMM_FAMILY}:{name}",
        build,
        None,
        TIMM_PROJECTOR_HIDDEN,
        # every timm image model starts with a convolution (a stem or the patch embedding),
        # so channels_last on CUDA is a layout choice that never changes the result
        convolutional=True,
        cifar_stem=False,
        trainable=True,
        foreign=True,
        input_size=int(size[-1]) if fixed and size else None,
        heads=heads,
        parameters=parameters,
    )


@functools.cache
def _parameter_count(name: str, in_channels: int) -> int:
    """Parameters of ``timm.create_model(name)``'s feature extractor, counted on the meta
    device: its shapes are built from its config, its weights never allocated (a 1.8 B
    parameter ViT costs no memory to count)."""
    import torch

    timm = _timm(name)
    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False, num_classes=0, in_chans=in_channels)
    return sum(p.numel() for p in model.parameters())


def timm_input_side(name: str) -> int:
    """The image side timm's pretrained config gives ``name`` (224 when it says none)."""
    timm = _timm(name)
    size = timm.get_pretrained_cfg_value(name, "input_size") if timm.is_model(name) else None
    return int(size[-1]) if size else 224


#: a key only one family of timm models has -> the names to try (timm.list_models patterns)
_FAMILY_KEYS = (
    ("stages.0.blocks.0.conv_dw.weight", ("convnext*", "test_convnext*")),
    ("patch_embed.proj.weight", ("vit_*", "deit*", "test_vit*")),
    ("conv_stem.weight", ("efficientnet*", "mobilenet*", "tf_efficientnet*", "test_efficientnet*")),
    ("stem.conv.weight", ("regnet*",)),
    ("layer1.0.conv1.weight", ("resnet*", "test_resnet*")),
)
#: the most candidates built (on the meta device: no memory) to find the one that fits
_MAX_CANDIDATES = 300


def match_timm_model(weights: dict[str, Any]) -> str | None:
    """The timm model whose feature extractor's keys and shapes are those of ``weights``
    (classifier head aside), tried among the family a telltale key names, built on the meta
    device; None without timm or a match. What the unknown-layout message offers as
    ``--arch timm:NAME``."""
    try:
        import timm
        import torch
    except ImportError:
        return None
    patterns = next((p for key, p in _FAMILY_KEYS if key in weights), None)
    if patterns is None:
        return None
    names = sorted({n for p in patterns for n in timm.list_models(p)}, key=lambda n: (len(n), n))
    shapes = {k: tuple(v.shape) for k, v in weights.items() if hasattr(v, "shape")}
    for name in names[:_MAX_CANDIDATES]:
        try:
            with torch.device("meta"):
                model = timm.create_model(name, pretrained=False, num_classes=0)
        except Exception:  # a model timm lists but cannot build so (a missing extra)
            continue
        expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        heads = [k for k in shapes if k not in expected]
        if all(shapes.get(k) == s for k, s in expected.items()) and all(
            k.startswith("head") or k.startswith("fc.") for k in heads
        ):
            return name
    return None


register_arch_family(TIMM_FAMILY, resolve_timm)
