"""Checkpoints cl-diag did not write: recognising their layout and rebuilding them as modules.

The layouts recognised from their keys (:data:`FOREIGN_LAYOUTS`, tried in order):

* **lightly**: lightly's SimCLR pattern, ``backbone = nn.Sequential(*list(resnet.children())[:-1])``
  and ``projection_head = SimCLRProjectionHead(512, 512, 128)``, saved as a plain state dict or
  inside a Lightning ``.ckpt`` (keys ``backbone.0.weight``, ``backbone.4.0.conv1.weight``, ...,
  ``projection_head.layers.0.weight``), or the backbone's own state dict (``0.weight``,
  ``4.0.conv1.weight``, ...). The children's positions map back onto torchvision's names
  (0 conv1, 1 bn1, 4-7 layer1-4); the head is rebuilt from its keys;
* **moco**: MoCo v2/v3's official checkpoints, ``{"state_dict": {"module.encoder_q.*",
  "module.encoder_k.*", "module.queue", ...}, "arch": "resnet50"}`` (v3: ``base_encoder``,
  ``momentum_encoder``, ``predictor``). The query encoder by default, ``--encoder key`` for the
  momentum encoder; the MLP that replaced its ``fc`` (a ViT's ``head``) is the projector;
* **dino**: DINO's ``{"student": ..., "teacher": ..., "args": Namespace(...)}`` with
  ``[module.]backbone.*`` (a ViT, read as ``timm:vit_*``, or a ResNet) and ``[module.]head.*``
  (DINOHead). The teacher by default, ``--encoder student`` for the student; the head's MLP up
  to its bottleneck is the projector (the weight-normalised last layer scores prototypes, it
  is not an embedding); ``args`` names the architecture;
* **solo-learn**: a PyTorch Lightning ``.ckpt`` whose ``state_dict`` holds ``backbone.*``
  (older releases: ``encoder.*``), ``projector.*`` and ``classifier.*``; ``args.json``
  beside the file, when present, names the method, backbone and dataset;
* **state-dict**: a plain torchvision ResNet state dict (``conv1.weight``,
  ``layer1.0.conv1.weight``, ...), optionally under a ``module.`` or ``backbone.`` prefix
  and optionally wrapped as ``{"state_dict": ...}`` or ``{"model": ...}``; with ``--arch``,
  any state dict (a timm model's, say) is read as this layout.

A user maps any other file without code (:mod:`cl_diag.models.keymap`): ``--rename
'REGEX=REPLACEMENT'`` renames keys before anything else, and ``--backbone-prefix`` /
``--projector-prefix`` name the keys of the two parts (the layout is then **mapped**).

A layout is a :class:`ForeignLayout`: a recogniser, a function that splits the weights into
backbone, projector and the parts left unused, the ``--encoder`` choices of a file holding
two encoders, and what the file records about its training.

Loading is strict: a backbone key that is missing, unexpected or of the wrong shape is an
error that lists them, so a wrong ``--arch`` cannot pass silently. The backbone comes from
the architecture registry (:mod:`cl_diag.models.registry`; ``timm:NAME`` included), the
projector is rebuilt from its own keys (:func:`rebuild_projector`). The weights of the
architecture's classification head (torchvision's ``fc``, a timm model's ``head``) are set
aside, not loaded: the backbone is the feature extractor.

The CIFAR stem's padding is not stored in the weights (a 3x3 kernel has the same shape
with padding 1 or 2): solo-learn upstream builds ``Conv2d(3, 64, 3, stride 1, padding 2)``,
the paper's fork (leechungpa/embedding-similarity-cl) and the usual CIFAR ResNet use
padding 1. See :func:`resolve_cifar_stem_padding` for the default.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_diag.errors import UserError
from cl_diag.io.jsonfile import parse_json
from cl_diag.models.build import build_backbone, fresh_like, seeded
from cl_diag.models.keymap import (
    KeyMapping,
    example_backbone_prefix,
    raw_weights,
    state_dict_of,
)
from cl_diag.models.registry import FOREIGN_ARCHS, BackboneOptions, get_arch

__all__ = [
    "FOREIGN_LAYOUTS",
    "PADDING_DEFAULT_TEXT",
    "SUPPORTED_LAYOUTS",
    "ForeignEncoder",
    "ForeignLayout",
    "LayoutParts",
    "foreign_weights",
    "guess_arch",
    "infer_resnet_arch",
    "layout_of",
    "lightning_metadata",
    "load_foreign_encoder",
    "load_strict",
    "read_solo_args",
    "rebuild_projector",
    "recognise_layout",
    "recorded_crop_side",
    "resolve_cifar_stem_padding",
    "solo_training_config",
]

_CIFAR_DATASETS = ("cifar10", "cifar100")

SUPPORTED_LAYOUTS = (
    "Supported layouts: (1) an embeddings file (.npz, or a torch file with 'z1' and 'z2'); "
    "(2) a cl-diag checkpoint written by 'cl-diag train'; "
    "(3) a solo-learn Lightning .ckpt with 'state_dict' keys 'backbone.*' (older: 'encoder.*'), "
    "'projector.*', 'classifier.*'; "
    "(4) a plain torchvision ResNet state dict (keys 'conv1.weight', 'layer1.0.conv1.weight', ...; "
    "optional 'module.' or 'backbone.' prefix; optionally under 'state_dict' or 'model'), "
    "analysed with --arch; with --arch timm:NAME, a timm model's state dict; "
    "(5) lightly's nn.Sequential of ResNet children ('backbone.0.weight', "
    "'backbone.4.0.conv1.weight', 'projection_head.layers.*'), plain or in a Lightning .ckpt; "
    "(6) a MoCo v2/v3 checkpoint ('module.encoder_q.*' / 'module.encoder_k.*', or "
    "'module.base_encoder.*'; --encoder query|key); "
    "(7) a DINO checkpoint ('student' / 'teacher' with 'backbone.*' and 'head.*'; "
    "--encoder teacher|student)."
)

#: The unused-encoder choices: the first is the default.
MOCO_ENCODERS = ("query", "key")
DINO_ENCODERS = ("teacher", "student")


# --------------------------------------------------------------------------- weights and keys


def _strip(keys_to_values: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v for k, v in keys_to_values.items() if k.startswith(prefix)}


def _unwrap_module(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop DistributedDataParallel's ``module.`` prefix when every key has it."""
    if weights and all(k.startswith("module.") for k in weights):
        return _strip(weights, "module.")
    return dict(weights)


def foreign_weights(payload: Any, mapping: KeyMapping | None = None) -> dict[str, torch.Tensor]:
    """The tensors a layout splits ({} if none): :func:`~cl_diag.models.keymap.raw_weights`
    after ``--rename``, DDP's ``module.`` prefix removed when every key has it. With
    ``--backbone-prefix`` (a mapped layout) the keys stay as the user sees them."""
    return _layout_weights(payload, mapping or KeyMapping())[0]


def _layout_weights(payload: Any, mapping: KeyMapping) -> tuple[dict[str, torch.Tensor], bool]:
    """:func:`foreign_weights`, and whether DDP's ``module.`` prefix was removed."""
    weights = mapping.rename(raw_weights(payload))
    if mapping.selects:
        return weights, False
    unwrapped = _unwrap_module(weights)
    return unwrapped, unwrapped.keys() != weights.keys()


def _indexed(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A lone Linear (``weight``, ``bias``: MoCo v1's fc, a one-layer DINO head) as entry 0
    of an ``nn.Sequential``, the form :func:`rebuild_projector` reads."""
    if state and all("." not in key for key in state):
        return {f"0.{key}": value for key, value in state.items()}
    return state


def _tops(keys: Any, *, besides: tuple[str, ...] = ()) -> list[str]:
    return sorted({k.split(".", 1)[0] for k in keys} - set(besides))


# --------------------------------------------------------------------------- layouts


@dataclass
class LayoutParts:
    """A foreign state dict split into what cl-diag rebuilds and what it leaves aside."""

    backbone: dict[str, torch.Tensor]
    projector: dict[str, torch.Tensor]  # {} when the file has none
    classifier: torch.Tensor | None  # the online classifier's weight, when present
    ignored: list[str]  # top-level modules not used (classifier, momentum_*, fc, ...)
    backbone_prefix: str = ""  # where the backbone's keys were (after DDP's module.)
    projector_prefix: str | None = None  # and the projector's
    key_map: str | None = None  # a renaming the layout itself applies, in words
    activation: str = "relu"  # the projector's parameter-free layers (DINO's head: GELU)


Split = Callable[[dict[str, torch.Tensor], "str | None", KeyMapping], LayoutParts]


def _records_nothing(payload: Any) -> tuple[dict, str]:
    return {}, ""


def _whole_payload(payload: Any) -> Any:
    return payload


@dataclass(frozen=True)
class ForeignLayout:
    """A checkpoint layout.

    ``recognise(payload, weights)`` and ``split(weights, encoder, mapping)``, where
    ``weights`` is :func:`foreign_weights` of the payload and ``encoder`` one of
    ``encoders`` (the first is the default; empty: the file holds one encoder).
    ``recorded(payload)`` is the training config the file itself records, in ``cl-diag
    train``'s vocabulary (``arch`` included), and where it was found; ``fingerprinted`` the
    part of the payload :func:`~cl_diag.models.checkpoints.weights_sha256` hashes (the
    weights, not the optimiser's or the trainer's run records).
    """

    name: str
    recognise: Callable[[Any, dict[str, torch.Tensor]], bool]
    split: Split
    encoders: tuple[str, ...] = ()
    recorded: Callable[[Any], tuple[dict, str]] = _records_nothing
    fingerprinted: Callable[[Any], Any] = _whole_payload


def _drop_fc(backbone: dict[str, torch.Tensor], prefix: str) -> list[str]:
    # torchvision's classification head is not part of the feature extractor.
    dropped = sorted(k for k in backbone if k.startswith("fc."))
    for key in dropped:
        backbone.pop(key)
    return [f"{prefix}fc"] if dropped else []


def _solo_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    return any(k.startswith(("backbone.", "encoder.")) for k in weights) and (
        (isinstance(payload, dict) and "state_dict" in payload)
        or any(k.startswith(("projector.", "classifier.")) for k in weights)
    )


def _solo_split(
    weights: dict[str, torch.Tensor], encoder: str | None, mapping: KeyMapping
) -> LayoutParts:
    prefix = "backbone." if any(k.startswith("backbone.") for k in weights) else "encoder."
    backbone = _strip(weights, prefix)
    tops = sorted({k.split(".", 1)[0] for k in weights} - {prefix.rstrip("."), "projector"})
    ignored = tops + _drop_fc(backbone, prefix)
    projector = _strip(weights, "projector.")
    return LayoutParts(
        backbone,
        projector,
        weights.get("classifier.weight"),
        ignored,
        backbone_prefix=prefix,
        projector_prefix="projector." if projector else None,
    )


def _state_dict_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    plain = _strip(weights, "backbone.") or weights
    return "conv1.weight" in plain and any(k.startswith("layer1.0.") for k in plain)


def _state_dict_split(
    weights: dict[str, torch.Tensor], encoder: str | None, mapping: KeyMapping
) -> LayoutParts:
    prefix = "backbone." if any(k.startswith("backbone.") for k in weights) else ""
    backbone = _strip(weights, prefix) if prefix else dict(weights)
    tops = sorted({k.split(".", 1)[0] for k in weights if prefix and not k.startswith(prefix)})
    return LayoutParts(
        backbone, {}, None, tops + _drop_fc(backbone, prefix), backbone_prefix=prefix
    )


#: Keys under which a training config states its crop side: a side or one side per crop
#: group (solo-learn's ``crop_size``, DINOv2's ``global_crops_size``: the first is the global
#: crop) or an image shape (a Lightning module's ``input_size``, timm's ``img_size``: an int,
#: ``(H, W)`` or ``(C, H, W)``, square).
_CROP_KEYS = ("crop_size", "global_crops_size")
_SHAPE_KEYS = ("image_size", "input_size", "img_size")


def _side(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _crop_side(value: Any) -> int | None:
    """A crop side, or the first of per-crop sides."""
    if isinstance(value, (list, tuple)):
        return _side(value[0]) if value else None
    return _side(value)


def _shape_side(value: Any) -> int | None:
    """The side of a square image shape: ``S``, ``(S, S)`` or ``(C, S, S)``."""
    if isinstance(value, (list, tuple)):
        sides = [_side(v) for v in value]
        if None in sides or len(sides) not in (2, 3):
            return None
        height, width = sides[-2:]
        return height if height == width else None
    return _side(value)


def recorded_crop_side(config: Any) -> int | None:
    """The training crop side a foreign config states (:data:`_CROP_KEYS`, :data:`_SHAPE_KEYS`;
    at the top level, under ``crops``/``data``, or in the first of solo-learn's
    ``augmentations``), or None."""
    if isinstance(config, argparse.Namespace):
        config = vars(config)
    if not isinstance(config, dict):
        return None
    places: list[Any] = [config, config.get("crops"), config.get("data")]
    augmentations = config.get("augmentations")
    if isinstance(augmentations, list) and augmentations:
        places.append(augmentations[0])
    for place in places:
        if isinstance(place, dict):
            for name in (*_CROP_KEYS, *_SHAPE_KEYS):
                read = _crop_side if name in _CROP_KEYS else _shape_side
                side = read(place.get(name))
                if side is not None:
                    return side
    return None


def _lightning_recorded(payload: Any) -> tuple[dict, str]:
    """The crop side a Lightning checkpoint's ``hyper_parameters`` state (lightly's modules
    save theirs with ``self.save_hyperparameters()``)."""
    hparams = payload.get("hyper_parameters") if isinstance(payload, dict) else None
    side = recorded_crop_side(hparams)
    if side is None:
        return {}, ""
    return {"image_size": side}, "the Lightning checkpoint's hyper_parameters"


def _solo_fingerprinted(payload: Any) -> Any:
    return payload.get("state_dict", payload)


# ---- lightly: an nn.Sequential of a torchvision ResNet's children

#: Positions of torchvision ResNet's children that hold weights (2 relu, 3 maxpool and
#: 8 avgpool have none; 9, fc, is there when the list was not cut at [:-1]).
_RESNET_CHILDREN = {
    "0": "conv1",
    "1": "bn1",
    "4": "layer1",
    "5": "layer2",
    "6": "layer3",
    "7": "layer4",
    "9": "fc",
}
_CHILDREN_MAP = "nn.Sequential of ResNet children: 0 -> conv1, 1 -> bn1, 4..7 -> layer1..layer4"


def _resnet_children(state: dict[str, torch.Tensor]) -> bool:
    first = state.get("0.weight")
    return (
        isinstance(first, torch.Tensor)
        and first.dim() == 4
        and any(k.startswith("4.0.") for k in state)
    )


def _lightly_prefix(weights: dict[str, torch.Tensor]) -> str | None:
    if _resnet_children(_strip(weights, "backbone.")):
        return "backbone."
    if _is_children_list(weights):
        return ""  # backbone.state_dict() alone
    return None


def _is_children_list(state: dict[str, torch.Tensor]) -> bool:
    """Keys of an ``nn.Sequential`` of a ResNet's children alone (``0.weight``, ``4.0.*``)."""
    return all(k.split(".", 1)[0].isdigit() for k in state) and _resnet_children(state)


def _children_to_resnet(children: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The children's positions mapped back onto torchvision's names (0 -> conv1, ...)."""
    backbone = {}
    for key, value in children.items():
        position, _, rest = key.partition(".")
        # a position that holds no weights in a ResNet stays as it is: the strict check lists it
        backbone[f"{_RESNET_CHILDREN.get(position, position)}.{rest}"] = value
    return backbone


def _lightly_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    return _lightly_prefix(weights) is not None


def _lightly_split(
    weights: dict[str, torch.Tensor], encoder: str | None, mapping: KeyMapping
) -> LayoutParts:
    prefix = _lightly_prefix(weights) or ""
    children = _strip(weights, prefix) if prefix else dict(weights)
    backbone = _children_to_resnet(children)
    ignored = _drop_fc(backbone, prefix)
    # lightly's heads keep their nn.Sequential in `.layers` (SimCLR, MoCo, BYOL, ...)
    projector = _strip(weights, "projection_head.layers.")
    if prefix:
        ignored = _tops(weights, besides=("backbone", "projection_head")) + ignored
    return LayoutParts(
        backbone,
        projector,
        None,
        ignored,
        backbone_prefix=prefix,
        projector_prefix="projection_head.layers." if projector else None,
        key_map=_CHILDREN_MAP,
    )


# ---- MoCo v2 / v3 (facebookresearch/moco, moco-v3)

#: Key prefixes of each encoder: v2's names, then v3's.
_MOCO_PREFIXES = {
    "query": ("encoder_q.", "base_encoder."),
    "key": ("encoder_k.", "momentum_encoder."),
}


def _moco_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    return any(k.startswith(_MOCO_PREFIXES["query"]) for k in weights)


def _moco_split(
    weights: dict[str, torch.Tensor], encoder: str | None, mapping: KeyMapping
) -> LayoutParts:
    choice = encoder or MOCO_ENCODERS[0]
    prefix = next(
        (p for p in _MOCO_PREFIXES[choice] if any(k.startswith(p) for k in weights)), None
    )
    if prefix is None:
        other = MOCO_ENCODERS[1 - MOCO_ENCODERS.index(choice)]
        raise UserError(
            f"This MoCo checkpoint holds no {choice} encoder (keys "
            f"{' or '.join(repr(p + '*') for p in _MOCO_PREFIXES[choice])}); use --encoder {other}."
        )
    encoder_weights = _strip(weights, prefix)
    # MoCo v2 replaces a ResNet's fc by its MLP (v1: fc is one Linear); v3 a ViT's head
    head = next(
        (h for h in ("fc.", "head.") if any(k.startswith(h) for k in encoder_weights)), None
    )
    projector = _indexed(_strip(encoder_weights, head)) if head else {}
    backbone = {k: v for k, v in encoder_weights.items() if not (head and k.startswith(head))}
    ignored = _tops(k for k in weights if not k.startswith(prefix))
    return LayoutParts(
        backbone,
        projector,
        None,
        ignored,
        backbone_prefix=prefix,
        projector_prefix=prefix + head if head else None,
    )


def _moco_recorded(payload: Any) -> tuple[dict, str]:
    arch = payload.get("arch") if isinstance(payload, dict) else None
    if isinstance(arch, str) and arch:
        return {"arch": arch}, "the checkpoint's 'arch' entry"
    return {}, ""


# ---- DINO (facebookresearch/dino)

#: DINO's own ViT names; with its patch size they are timm's ViTs (same keys, same heads).
_DINO_VITS = ("vit_tiny", "vit_small", "vit_base")


def _dino_encoder(
    weights: dict[str, torch.Tensor], encoder: str
) -> tuple[str, dict[str, torch.Tensor]] | None:
    # the student is wrapped in DDP (module.); the teacher only when it has BatchNorms
    for prefix in (f"{encoder}.module.", f"{encoder}."):
        part = _strip(weights, prefix)
        if any(k.startswith("backbone.") for k in part):
            return prefix, part
    return None


def _dino_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    return any(_dino_encoder(weights, encoder) for encoder in DINO_ENCODERS)


def _dino_split(
    weights: dict[str, torch.Tensor], encoder: str | None, mapping: KeyMapping
) -> LayoutParts:
    choice = encoder or DINO_ENCODERS[0]
    found = _dino_encoder(weights, choice)
    if found is None:
        other = DINO_ENCODERS[1 - DINO_ENCODERS.index(choice)]
        raise UserError(
            f"This DINO checkpoint holds no {choice} weights ('{choice}' with 'backbone.*'); "
            f"use --encoder {other}."
        )
    prefix, part = found
    backbone = _strip(part, "backbone.")
    # DINOHead's MLP (mlp.*; lightly's DINOProjectionHead: layers.*) ends in the bottleneck
    mlp = next(
        (h for h in ("head.mlp.", "head.layers.") if any(k.startswith(h) for k in part)), None
    )
    projector = _indexed(_strip(part, mlp)) if mlp else {}
    ignored = _tops(k for k in weights if not k.startswith(f"{choice}."))
    if any(k.startswith("head.last_layer.") for k in part):
        ignored.append(f"{prefix}head.last_layer")
    return LayoutParts(
        backbone,
        projector,
        None,
        ignored,
        backbone_prefix=prefix + "backbone.",
        projector_prefix=prefix + mlp if mlp else None,
        activation="gelu",
    )


def _dino_arch(args: dict) -> Any:
    arch, patch = args.get("arch"), args.get("patch_size")
    if arch in _DINO_VITS and isinstance(patch, int):
        return f"timm:{arch}_patch{patch}_224"
    return arch  # a torchvision name (resnet50), or one cl-diag cannot build (--arch then)


def _dino_recorded(payload: Any) -> tuple[dict, str]:
    args = payload.get("args") if isinstance(payload, dict) else None
    if isinstance(args, argparse.Namespace):
        args = vars(args)
    if not isinstance(args, dict):
        return {}, ""
    per_device, world = args.get("batch_size_per_gpu"), args.get("world_size")
    config = {
        "loss": "dino",
        "arch": _dino_arch(args),
        "batch_size": per_device * world
        if isinstance(per_device, int) and isinstance(world, int)
        else None,
        "batch_size_per_device": per_device,
        "epochs": args.get("epochs"),
        "lr": args.get("lr"),
        "weight_decay": args.get("weight_decay"),
        "optimizer": args.get("optimizer"),
        "seed": args.get("seed"),
        "patch_size": args.get("patch_size"),
        "out_dim": args.get("out_dim"),
        "teacher_temp": args.get("teacher_temp"),
        "momentum_teacher": args.get("momentum_teacher"),
        "image_size": recorded_crop_side(args),
    }
    plain = (str, int, float, bool)
    return {k: v for k, v in config.items() if isinstance(v, plain)}, "the checkpoint's 'args'"


def _dino_fingerprinted(payload: Any) -> Any:
    return {k: payload[k] for k in DINO_ENCODERS if k in payload}


# ---- mapped: the user names the keys


def _mapped_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    return False  # chosen by --backbone-prefix, never recognised


def _mapped_split(
    weights: dict[str, torch.Tensor], encoder: str | None, mapping: KeyMapping
) -> LayoutParts:
    backbone, projector, ignored = mapping.select(weights)
    if not backbone:
        from cl_diag.models.keymap import key_prefixes

        shown = ", ".join(repr(p) for p, _ in key_prefixes(weights))
        after = " (after --rename)" if mapping.renames else ""
        raise UserError(
            f"--backbone-prefix {mapping.backbone_prefix!r} selects no keys; the file's "
            f"keys{after} are under: {shown}."
        )
    key_map = None
    if _is_children_list(backbone):
        # lightly's tutorials save nn.Sequential(*resnet.children()[:-1]) under a name of
        # their own ({"resnet18_parameters": backbone.state_dict()}): the same mapping applies
        backbone, key_map = _children_to_resnet(backbone), _CHILDREN_MAP
        ignored = ignored + _drop_fc(backbone, mapping.backbone_prefix or "")
    return LayoutParts(
        backbone,
        _indexed(projector),
        None,
        ignored,
        backbone_prefix=mapping.backbone_prefix or "",
        projector_prefix=mapping.projector_prefix if projector else None,
        key_map=key_map,
    )


def _state_dict_fingerprinted(payload: Any) -> Any:
    return state_dict_of(payload) or payload


#: The foreign layouts, in the order they are tried: lightly's Lightning .ckpt also has
#: 'backbone.*' under 'state_dict', so it goes before solo-learn.
FOREIGN_LAYOUTS: tuple[ForeignLayout, ...] = (
    ForeignLayout(
        "lightly",
        _lightly_recognise,
        _lightly_split,
        recorded=_lightning_recorded,
        fingerprinted=_state_dict_fingerprinted,
    ),
    ForeignLayout(
        "moco",
        _moco_recognise,
        _moco_split,
        encoders=MOCO_ENCODERS,
        recorded=_moco_recorded,
        fingerprinted=_state_dict_fingerprinted,
    ),
    ForeignLayout(
        "dino",
        _dino_recognise,
        _dino_split,
        encoders=DINO_ENCODERS,
        recorded=_dino_recorded,
        fingerprinted=_dino_fingerprinted,
    ),
    ForeignLayout("solo-learn", _solo_recognise, _solo_split, fingerprinted=_solo_fingerprinted),
    ForeignLayout("state-dict", _state_dict_recognise, _state_dict_split),
)
#: The layout of a file whose keys the user names (--backbone-prefix); never recognised.
MAPPED = ForeignLayout("mapped", _mapped_recognise, _mapped_split, fingerprinted=raw_weights)


def recognise_layout(
    payload: Any, *, arch: str | None = None, mapping: KeyMapping | None = None
) -> str | None:
    """The name of the first :data:`FOREIGN_LAYOUTS` entry that recognises ``payload`` (its
    keys after ``--rename``), ``mapped`` when the user names the backbone's keys, and
    ``state-dict`` for any state dict when the user names the architecture (``--arch``)."""
    if mapping is not None and mapping.selects:
        return MAPPED.name if raw_weights(payload) else None
    weights = foreign_weights(payload, mapping)
    if not weights:
        return None
    found = (layout.name for layout in FOREIGN_LAYOUTS if layout.recognise(payload, weights))
    name = next(found, None)
    if name is None and arch is not None and state_dict_of(payload) is not None:
        name = "state-dict"
    return name


def layout_of(name: str) -> ForeignLayout:
    """The :class:`ForeignLayout` called ``name`` (ValueError if none)."""
    for layout in (*FOREIGN_LAYOUTS, MAPPED):
        if layout.name == name:
            return layout
    raise ValueError(f"not a foreign checkpoint layout: {name}")


# --------------------------------------------------------------------------- architecture


def infer_resnet_arch(backbone: dict[str, torch.Tensor]) -> str | None:
    """The ResNet of :data:`~cl_diag.models.registry.FOREIGN_ARCHS` whose keys and shapes these
    weights have, or None."""
    conv1 = backbone.get("conv1.weight")
    if conv1 is None or conv1.dim() != 4:
        return None
    blocks = []
    for layer in (1, 2, 3, 4):
        pattern = re.compile(rf"layer{layer}\.(\d+)\.")
        indices = {int(m.group(1)) for k in backbone if (m := pattern.match(k))}
        blocks.append(len(indices))
    bottleneck = any(k.endswith(".conv3.weight") for k in backbone)
    by_blocks: dict[tuple[tuple[int, ...], bool], str] = {
        ((2, 2, 2, 2), False): "resnet18",
        ((3, 4, 6, 3), False): "resnet34",
        ((3, 4, 6, 3), True): "resnet50",
    }
    base = by_blocks.get((tuple(blocks), bottleneck))
    if base is None:
        return None
    return base + ("-cifar" if conv1.shape[-1] == 3 else "")


def guess_arch(weights: dict[str, torch.Tensor], prefixes: list[tuple[str, int]]) -> str | None:
    """The ResNet the keys under the example backbone prefix of ``prefixes`` look like
    (:func:`~cl_diag.models.keymap.example_backbone_prefix`; a list of ResNet children, as
    lightly's tutorials save it, read through the same mapping ``--backbone-prefix`` applies),
    or None: what the unknown-layout message offers as ``--arch``."""
    prefix = example_backbone_prefix(prefixes)
    part = _strip(weights, prefix)
    if _is_children_list(part):
        part = _children_to_resnet(part)
    return infer_resnet_arch(part)


def load_strict(module: nn.Module, state: dict[str, torch.Tensor], what: str, hint: str) -> None:
    """load_state_dict, after checking keys and shapes so that every mismatch is listed."""
    expected = module.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    wrong = [
        f"{k} {tuple(state[k].shape)} vs {tuple(expected[k].shape)}"
        for k in expected
        if k in state and tuple(state[k].shape) != tuple(expected[k].shape)
    ]
    if missing or unexpected or wrong:

        def listing(name: str, items: list[str]) -> str:
            if not items:
                return ""
            more = f", ... ({len(items)} in all)" if len(items) > 8 else ""
            return f" {name}: {', '.join(items[:8])}{more}."

        raise UserError(
            f"The {what} weights do not fit the model they were loaded into."
            + listing("Missing keys", missing)
            + listing("Unexpected keys", unexpected)
            + listing("Wrong shapes (file vs model)", wrong)
            + f" {hint}"
        )
    module.load_state_dict(state, strict=True)


# --------------------------------------------------------------------------- projector


#: The parameter-free layer a gap in a projector's indices stands for, and its name.
_ACTIVATIONS: dict[str, tuple[Callable[[], nn.Module], str]] = {
    "relu": (nn.ReLU, "ReLU"),
    "gelu": (nn.GELU, "GELU"),
}


def rebuild_projector(
    state: dict[str, torch.Tensor], *, activation: str = "relu", where: str = "projector."
) -> tuple[nn.Sequential, str]:
    """Rebuild an ``nn.Sequential`` projector from its state-dict keys and shapes.

    A position with a 2-D ``weight`` is a Linear, one with ``running_mean`` a BatchNorm1d,
    and a position with no parameters (a gap in the indices) is the ``activation`` (ReLU,
    or GELU for DINO's head), as in every solo-learn projector: upstream SimCLR's
    Linear-ReLU-Linear (indices 0, 2) and the paper's fork's Linear-BN-ReLU-Linear (0, 1, 3)
    both come out right, and so do lightly's SimCLRProjectionHead and MoCo v3's MLP, which
    end in a BatchNorm1d. Returns the module (weights loaded, strictly) and a description
    such as ``Linear(512,2048)-BN-ReLU-Linear(2048,128)``. ``where`` is the keys' prefix in
    the file, for the messages.
    """
    by_index: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        head, _, rest = key.partition(".")
        if not head.isdigit() or not rest:
            raise UserError(
                f"The projector key '{where}{key}' is not an nn.Sequential entry; cl-diag "
                "rebuilds projectors made of Linear, BatchNorm1d and ReLU/GELU layers only."
            )
        by_index.setdefault(int(head), {})[rest] = value
    if not by_index:
        raise UserError("The checkpoint's projector has no weights.")
    layers: list[nn.Module] = []
    parts: list[str] = []
    for index in range(max(by_index) + 1):
        params = by_index.get(index)
        if params is None:
            make, name = _ACTIVATIONS[activation]
            layers.append(make())
            parts.append(name)
        elif "running_mean" in params:
            width = params["running_mean"].shape[0]
            layers.append(nn.BatchNorm1d(width, affine="weight" in params))
            parts.append("BN")
        elif "weight" in params and params["weight"].dim() == 2:
            out_dim, in_dim = params["weight"].shape
            layers.append(nn.Linear(in_dim, out_dim, bias="bias" in params))
            parts.append(f"Linear({in_dim},{out_dim})")
        else:
            raise UserError(
                f"The projector layer {index} has parameters {sorted(params)} that are neither a "
                "Linear nor a BatchNorm1d; cl-diag cannot rebuild this projector."
            )
    # the last Linear may be followed by a BatchNorm1d (lightly's SimCLR head, MoCo v3)
    last = layers[-2] if isinstance(layers[-1], nn.BatchNorm1d) and len(layers) > 1 else layers[-1]
    if not isinstance(last, nn.Linear):
        raise UserError(
            "The checkpoint's projector does not end with a Linear layer (and at most a "
            "BatchNorm1d after it); cannot rebuild it."
        )
    projector = nn.Sequential(*layers)
    hint = "The projector layout could not be inferred from its keys."
    load_strict(projector, state, "projector", hint)
    return projector, "-".join(parts)


def _projector_in_dim(projector: nn.Sequential) -> int:
    return next(m for m in projector if isinstance(m, nn.Linear)).in_features


# --------------------------------------------------------------------------- solo-learn args


def _get(mapping: dict, dotted: str) -> Any:
    value: Any = mapping
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _first(mapping: dict, *dotted: str) -> Any:
    for key in dotted:
        value = _get(mapping, key)
        if value is not None and value != "<not serializable>":
            return value
    return None


def read_solo_args(ckpt_path: Path) -> tuple[dict | None, Path | None]:
    """The ``args.json`` solo-learn writes beside its checkpoints, or (None, None)."""
    args_path = ckpt_path.parent / "args.json"
    if not args_path.is_file():
        return None, None
    try:
        args = parse_json(
            args_path.read_text(encoding="utf-8"),
            where=args_path,
            fix="Fix or remove it and give --arch and --dataset instead.",
        )
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(
            f"{args_path} (solo-learn's run arguments, beside the checkpoint) could not be read: "
            f"{exc}. Fix or remove it and give --arch and --dataset instead."
        ) from None
    if not isinstance(args, dict):
        raise UserError(f"{args_path} does not hold a JSON object; fix or remove it.")
    return args, args_path


def solo_training_config(args: dict) -> dict:
    """solo-learn's run arguments (new nested Hydra layout or old flat argparse layout) in
    ``cl-diag train``'s vocabulary, for ``theory`` and for ``compare``'s run labels."""
    backbone = _first(args, "backbone.name", "backbone", "encoder")
    dataset = _first(args, "data.dataset", "dataset")
    per_device = _first(args, "optimizer.batch_size", "batch_size")
    devices = _first(args, "devices", "gpus")
    n_devices = len(devices) if isinstance(devices, list) and devices else 1
    nodes = _first(args, "num_nodes") or 1
    vrn_enabled = _first(args, "add_vrn_loss_term.enabled")
    vrn_weight = _first(args, "add_vrn_loss_term.weight")
    # solo-learn's batch_size is per device; the loss saw the global batch (DDP gathers)
    batch_size = int(per_device) * n_devices * int(nodes) if isinstance(per_device, int) else None
    config = {
        "loss": _first(args, "method"),
        "batch_size": batch_size,
        "batch_size_per_device": per_device,
        "temperature": _first(args, "method_kwargs.temperature", "temperature"),
        "bias": _first(args, "method_kwargs.bias", "bias"),
        "vrn": float(vrn_weight) if vrn_enabled and vrn_weight is not None else 0.0,
        "vrn_k": _first(args, "add_vrn_loss_term.k") if vrn_enabled else None,
        "vrn_delta": _first(args, "add_vrn_loss_term.delta") if vrn_enabled else None,
        "vrn_p": _first(args, "add_vrn_loss_term.p") if vrn_enabled else None,
        "epochs": _first(args, "max_epochs"),
        "lr": _first(args, "optimizer.lr", "lr"),
        "weight_decay": _first(args, "optimizer.weight_decay", "weight_decay"),
        "optimizer": _first(args, "optimizer.name", "optimizer"),
        "seed": _first(args, "seed"),
        "dataset": dataset,
        "arch": (
            f"{backbone}-cifar"
            if isinstance(backbone, str) and dataset in _CIFAR_DATASETS
            else backbone
        ),
        "proj_hidden_dim": _first(args, "method_kwargs.proj_hidden_dim", "proj_hidden_dim"),
        "proj_output_dim": _first(args, "method_kwargs.proj_output_dim", "proj_output_dim"),
        "image_size": recorded_crop_side(args),
        "precision": _first(args, "precision"),
        "name": _first(args, "name"),
    }
    return {k: v for k, v in config.items() if v is not None}


def lightning_metadata(payload: Any) -> dict:
    """Epoch, step and Lightning version of a .ckpt, when recorded (plain numbers only)."""
    if not isinstance(payload, dict):
        return {}
    out: dict[str, int | str | float] = {}
    for key in ("epoch", "global_step", "pytorch-lightning_version"):
        value = payload.get(key)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            out[key.replace("pytorch-lightning_version", "lightning_version")] = value
        elif isinstance(value, float) and math.isfinite(value):
            out[key] = value
    return out


# --------------------------------------------------------------------------- the encoder


@dataclass
class ForeignEncoder:
    """A foreign checkpoint rebuilt as torch modules (eval mode)."""

    kind: str  # the layout: lightly, moco, dino, solo-learn, state-dict or mapped
    arch: str
    backbone: nn.Module
    projector: nn.Module | None
    projector_layout: str | None
    feature_dim: int
    dataset: str | None
    num_classes: int | None  # from the online classifier's weights, when present
    training_config: dict
    args_path: str | None
    cifar_stem_padding: dict | None  # {"value": p, "from": why}; None without a CIFAR stem
    ignored: list[str]  # top-level modules of the checkpoint not used (classifier, momentum_*, ...)
    provenance: dict  # where arch and dataset (and the encoder) came from
    layout: dict = field(default_factory=dict)  # which keys went where, and every choice made

    def random_init(self, seed: int) -> tuple[nn.Module, nn.Module | None]:
        """The same architecture at random initialisation (seeded), for the probes' baseline."""
        padding = self.cifar_stem_padding["value"] if self.cifar_stem_padding else 1
        with seeded(seed):
            backbone, _ = build_backbone(self.arch, BackboneOptions(cifar_stem_padding=padding))
        projector = None
        if self.projector is not None:
            with seeded(seed + 1):
                projector = fresh_like(self.projector).eval()
        return backbone.eval(), projector


#: Which CIFAR-stem padding a rebuilt backbone uses when --cifar-stem-padding is not given.
PADDING_DEFAULT_TEXT = (
    "auto: 2 for a solo-learn checkpoint from upstream solo-learn, 1 for one from the paper's fork "
    "(recognised by a BatchNorm in the projector or 'add_vrn_loss_term' in args.json) and for "
    "plain state dicts"
)


def resolve_cifar_stem_padding(given: int | None, *, kind: str, fork_signs: list[str]) -> dict:
    """The CIFAR stem's padding and the reason for it (it is not in the weights)."""
    if given is not None:
        if given not in (0, 1, 2, 3):
            raise UserError(
                f"--cifar-stem-padding must be 0, 1, 2 or 3 (got {given}); solo-learn uses 2, "
                "the paper's fork 1."
            )
        return {"value": int(given), "from": "--cifar-stem-padding"}
    if kind == "solo-learn" and not fork_signs:
        why = "default for upstream solo-learn checkpoints (Conv2d(3, 64, 3, padding=2))"
        return {"value": 2, "from": why}
    if kind == "solo-learn":
        why = "default for the paper's fork, recognised by " + " and ".join(fork_signs)
        return {"value": 1, "from": why}
    if kind == "state-dict":
        return {"value": 1, "from": "default for plain state dicts (the usual CIFAR ResNet stem)"}
    return {"value": 1, "from": f"default for {kind} checkpoints (the usual CIFAR ResNet stem)"}


def _arch_error(arch: str, origin: str, exc: ValueError | None, looks: str) -> UserError:
    choices = f"one of {', '.join(FOREIGN_ARCHS)}, or timm:NAME (any timm model)"
    if origin != "--arch":
        return UserError(
            f"{origin} names the architecture {arch!r}, which cl-diag cannot build: give "
            f"--arch, {choices}.{looks}"
        )
    if exc is not None and ":" in arch:  # a family's own message (timm's close names)
        return UserError(f"--arch {arch}: {exc}")
    return UserError(
        f"--arch {arch!r} is not supported for foreign checkpoints; choose {choices}.{looks}"
    )


def _drop_heads(backbone: nn.Module, state: dict[str, torch.Tensor], heads: tuple[str, ...]):
    """Set aside the classification head's weights (``fc``, a timm model's ``head``) that
    the feature extractor does not have; return the heads found."""
    expected = backbone.state_dict()
    found = set()
    for key in [k for k in state if k not in expected]:
        head = next((h for h in heads if key.startswith(h + ".")), None)
        if head is not None:
            state.pop(key)
            found.add(head)
    return sorted(found)


def load_foreign_encoder(
    file: Any,
    *,
    arch: str | None = None,
    dataset: str | None = None,
    cifar_stem_padding: int | None = None,
    encoder: str | None = None,
    mapping: KeyMapping | None = None,
) -> ForeignEncoder:
    """Rebuild a foreign checkpoint (a :class:`~cl_diag.models.checkpoints.CheckpointFile` of a
    :data:`FOREIGN_LAYOUTS` kind, or ``mapped``) as backbone (+ projector).

    ``arch`` and ``dataset`` from the command line win over ``args.json`` and over what the
    file records (MoCo's ``arch``, DINO's ``args``); one of them must name the architecture.
    ``encoder`` picks one of a MoCo (query, key) or DINO (teacher, student) file's encoders;
    ``mapping`` is the user's ``--rename`` / ``--backbone-prefix`` / ``--projector-prefix``.
    Raises UserError for every mismatch.
    """
    layout = layout_of(file.kind)
    mapping = mapping or KeyMapping()
    provenance: dict[str, str] = {}
    if encoder is not None and not layout.encoders:
        raise UserError(
            f"--encoder applies to MoCo ({', '.join(MOCO_ENCODERS)}) and DINO "
            f"({', '.join(DINO_ENCODERS)}) checkpoints; {file.path} is a {file.kind} "
            "checkpoint, which holds one encoder. Drop --encoder."
        )
    if encoder is not None and encoder not in layout.encoders:
        raise UserError(
            f"--encoder {encoder!r}: a {file.kind} checkpoint holds the encoders "
            f"{', '.join(layout.encoders)} (default {layout.encoders[0]})."
        )
    choice = encoder or (layout.encoders[0] if layout.encoders else None)
    if choice is not None:
        provenance["encoder"] = "--encoder" if encoder is not None else "default"
    weights, ddp = _layout_weights(file.payload, mapping)
    parts = layout.split(weights, choice, mapping)
    args, args_path = read_solo_args(file.path) if file.kind == "solo-learn" else (None, None)
    if args:
        config, recorded_in = (
            solo_training_config(args),
            (f"{args_path.name} beside the checkpoint" if args_path else "args.json"),
        )
    else:
        config, recorded_in = layout.recorded(file.payload)

    guess = infer_resnet_arch(parts.backbone)
    looks = f" These weights look like {guess}: pass --arch {guess}." if guess else ""
    if arch is not None:
        provenance["arch"] = "--arch"
    elif config.get("arch"):
        arch = str(config["arch"])
        provenance["arch"] = recorded_in
    else:
        raise UserError(
            f"{file.path} does not record its architecture (no args.json beside it): give --arch, "
            f"one of {', '.join(FOREIGN_ARCHS)}, or timm:NAME.{looks}"
        )
    try:
        spec = get_arch(arch)
    except ValueError as exc:
        raise _arch_error(arch, provenance["arch"], exc, looks) from None
    if not spec.foreign:
        raise _arch_error(arch, provenance["arch"], None, looks)

    if config.get("image_size") is not None:
        provenance["image_size"] = recorded_in
    if dataset is not None:
        provenance["dataset"] = "--dataset"
    elif config.get("dataset"):
        dataset = str(config["dataset"])
        provenance["dataset"] = "args.json"

    fork_signs = []
    projector = description = None
    if parts.projector:
        projector, description = rebuild_projector(
            parts.projector, activation=parts.activation, where=parts.projector_prefix or ""
        )
        if any(isinstance(m, nn.BatchNorm1d) for m in projector):
            fork_signs.append("a BatchNorm in the projector")
    if args and _get(args, "add_vrn_loss_term") is not None:
        fork_signs.append("'add_vrn_loss_term' in args.json")
    padding = (
        resolve_cifar_stem_padding(cifar_stem_padding, kind=file.kind, fork_signs=fork_signs)
        if spec.cifar_stem
        else None
    )
    with seeded(0):  # the weights are replaced below; seeding keeps the caller's RNG as it was
        backbone, feature_dim = build_backbone(
            arch, BackboneOptions(cifar_stem_padding=padding["value"] if padding else 1)
        )
    ignored = parts.ignored + [
        parts.backbone_prefix + head for head in _drop_heads(backbone, parts.backbone, spec.heads)
    ]
    if guess and guess != arch:
        hint = f"These weights look like {guess}; pass --arch {guess}."
    else:
        hint = (
            f"Check --arch (given or recorded: {arch}); supported: {', '.join(FOREIGN_ARCHS)}, "
            "timm:NAME. Keys can be renamed with --rename 'REGEX=REPLACEMENT'."
        )
    load_strict(backbone, parts.backbone, f"backbone ({arch})", hint)
    if projector is not None and _projector_in_dim(projector) != feature_dim:
        raise UserError(
            f"The projector takes {_projector_in_dim(projector)}-d inputs but the {arch} backbone "
            f"gives {feature_dim}-d features; the checkpoint is inconsistent."
        )
    classifier = parts.classifier
    num_classes = None
    if isinstance(classifier, torch.Tensor) and classifier.dim() == 2:
        num_classes = int(classifier.shape[0])
    record: dict[str, Any] = {
        "name": file.kind,
        "backbone_keys": parts.backbone_prefix + "*",
        "projector_keys": None if parts.projector_prefix is None else parts.projector_prefix + "*",
    }
    if ddp:
        record["ddp_prefix_removed"] = "module."
    if choice is not None:
        record["encoder"] = choice
    if parts.key_map:
        record["key_map"] = parts.key_map
    record.update(mapping.record())
    return ForeignEncoder(
        kind=file.kind,
        arch=arch,
        backbone=backbone.eval(),
        projector=projector.eval() if projector is not None else None,
        projector_layout=description,
        feature_dim=feature_dim,
        dataset=dataset,
        num_classes=num_classes,
        training_config=config,
        args_path=str(args_path) if args_path else None,
        cifar_stem_padding=padding,
        ignored=ignored,
        provenance=provenance,
        layout=record,
    )
