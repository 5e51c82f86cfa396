"""The **dino** layout: DINO's ``{"student": ..., "teacher": ..., "args": Namespace(...)}`` with
``[module.]backbone.*`` (a ViT, read as ``timm:vit_*``, or a ResNet) and ``[module.]head.*``
(DINOHead). The teacher by default, ``--encoder student`` for the student; the head's MLP up to
its bottleneck is the projector (the weight-normalised last layer scores prototypes, it is not
an embedding); ``args`` names the architecture.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.models.foreign.common import (
    ForeignLayout,
    LayoutParts,
    as_sequential,
    recorded_crop_side,
    strip_prefix,
    top_modules,
)
from cl_diag.models.keymap import (
    KeyMapping,
)

DINO_ENCODERS = ("teacher", "student")


#: DINO's own ViT names; with its patch size they are timm's ViTs (same keys, same heads).
_DINO_VITS = ("vit_tiny", "vit_small", "vit_base")


def _dino_encoder(
    weights: dict[str, torch.Tensor], encoder: str
) -> tuple[str, dict[str, torch.Tensor]] | None:
    # the student is wrapped in DDP (module.); the teacher only when it has BatchNorms
    for prefix in (f"{encoder}.module.", f"{encoder}."):
        part = strip_prefix(weights, prefix)
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
    backbone = strip_prefix(part, "backbone.")
    # DINOHead's MLP (mlp.*; lightly's DINOProjectionHead: layers.*) ends in the bottleneck
    mlp = next(
        (h for h in ("head.mlp.", "head.layers.") if any(k.startswith(h) for k in part)), None
    )
    projector = as_sequential(strip_prefix(part, mlp)) if mlp else {}
    ignored = top_modules(k for k in weights if not k.startswith(f"{choice}."))
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


#: the layout (cl_diag.models.foreign.FOREIGN_LAYOUTS tries it in its order)
LAYOUT = ForeignLayout(
    "dino",
    _dino_recognise,
    _dino_split,
    encoders=DINO_ENCODERS,
    recorded=_dino_recorded,
    fingerprinted=_dino_fingerprinted,
)
