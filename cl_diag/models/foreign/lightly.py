"""The **lightly** layout: lightly's SimCLR pattern, ``backbone =
nn.Sequential(*list(resnet.children())[:-1])`` and ``projection_head =
SimCLRProjectionHead(512, 512, 128)``, saved as a plain state dict or inside a Lightning
``.ckpt`` (keys ``backbone.0.weight``, ``backbone.4.0.conv1.weight``, ...,
``projection_head.layers.0.weight``), or the backbone's own state dict (``0.weight``,
``4.0.conv1.weight``, ...). The children's positions map back onto torchvision's names (0
conv1, 1 bn1, 4-7 layer1-4); the head is rebuilt from its keys.
"""

from __future__ import annotations

from typing import Any

import torch

from cl_diag.models.foreign.common import (
    ForeignLayout,
    LayoutParts,
    drop_fc,
    lightning_recorded,
    state_dict_fingerprinted,
    strip_prefix,
    top_modules,
)
from cl_diag.models.keymap import (
    KeyMapping,
)

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


CHILDREN_MAP = "nn.Sequential of ResNet children: 0 -> conv1, 1 -> bn1, 4..7 -> layer1..layer4"


def _resnet_children(state: dict[str, torch.Tensor]) -> bool:
    first = state.get("0.weight")
    return (
        isinstance(first, torch.Tensor)
        and first.dim() == 4
        and any(k.startswith("4.0.") for k in state)
    )


def _lightly_prefix(weights: dict[str, torch.Tensor]) -> str | None:
    if _resnet_children(strip_prefix(weights, "backbone.")):
        return "backbone."
    if is_children_list(weights):
        return ""  # backbone.state_dict() alone
    return None


def is_children_list(state: dict[str, torch.Tensor]) -> bool:
    """Keys of an ``nn.Sequential`` of a ResNet's children alone (``0.weight``, ``4.0.*``)."""
    return all(k.split(".", 1)[0].isdigit() for k in state) and _resnet_children(state)


def children_to_resnet(children: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
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
    children = strip_prefix(weights, prefix) if prefix else dict(weights)
    backbone = children_to_resnet(children)
    ignored = drop_fc(backbone, prefix)
    # lightly's heads keep their nn.Sequential in `.layers` (SimCLR, MoCo, BYOL, ...)
    projector = strip_prefix(weights, "projection_head.layers.")
    if prefix:
        ignored = top_modules(weights, besides=("backbone", "projection_head")) + ignored
    return LayoutParts(
        backbone,
        projector,
        None,
        ignored,
        backbone_prefix=prefix,
        projector_prefix="projection_head.layers." if projector else None,
        key_map=CHILDREN_MAP,
    )


#: the layout (cl_diag.models.foreign.FOREIGN_LAYOUTS tries it in its order)
LAYOUT = ForeignLayout(
    "lightly",
    _lightly_recognise,
    _lightly_split,
    recorded=lightning_recorded,
    fingerprinted=state_dict_fingerprinted,
)
