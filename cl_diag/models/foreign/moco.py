"""The **moco** layout: MoCo v2/v3's official checkpoints, ``{"state_dict": {"module.encoder_q.*",
"module.encoder_k.*", "module.queue", ...}, "arch": "resnet50"}`` (v3: ``base_encoder``,
``momentum_encoder``, ``predictor``). The query encoder by default, ``--encoder key`` for the
momentum encoder; the MLP that replaced its ``fc`` (a ViT's ``head``) is the projector.
"""

from __future__ import annotations

from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.models.foreign.common import (
    ForeignLayout,
    LayoutParts,
    as_sequential,
    state_dict_fingerprinted,
    strip_prefix,
    top_modules,
)
from cl_diag.models.keymap import (
    KeyMapping,
)

#: The unused-encoder choices: the first is the default.
MOCO_ENCODERS = ("query", "key")


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
    encoder_weights = strip_prefix(weights, prefix)
    # MoCo v2 replaces a ResNet's fc by its MLP (v1: fc is one Linear); v3 a ViT's head
    head = next(
        (h for h in ("fc.", "head.") if any(k.startswith(h) for k in encoder_weights)), None
    )
    projector = as_sequential(strip_prefix(encoder_weights, head)) if head else {}
    backbone = {k: v for k, v in encoder_weights.items() if not (head and k.startswith(head))}
    ignored = top_modules(k for k in weights if not k.startswith(prefix))
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


#: the layout (cl_diag.models.foreign.FOREIGN_LAYOUTS tries it in its order)
LAYOUT = ForeignLayout(
    "moco",
    _moco_recognise,
    _moco_split,
    encoders=MOCO_ENCODERS,
    recorded=_moco_recorded,
    fingerprinted=state_dict_fingerprinted,
)
