"""The **state-dict** layout: a plain torchvision ResNet state dict (``conv1.weight``,
``layer1.0.conv1.weight``, ...), optionally under a ``module.`` or ``backbone.`` prefix and
optionally wrapped as ``{"state_dict": ...}`` or ``{"model": ...}``; with ``--arch``, any state
dict (a timm model's, say) is read as this layout..
"""

from __future__ import annotations

from typing import Any

import torch

from cl_diag.models.foreign.common import ForeignLayout, LayoutParts, drop_fc, strip_prefix
from cl_diag.models.keymap import (
    KeyMapping,
)


def _state_dict_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    plain = strip_prefix(weights, "backbone.") or weights
    return "conv1.weight" in plain and any(k.startswith("layer1.0.") for k in plain)


def _state_dict_split(
    weights: dict[str, torch.Tensor], encoder: str | None, mapping: KeyMapping
) -> LayoutParts:
    prefix = "backbone." if any(k.startswith("backbone.") for k in weights) else ""
    backbone = strip_prefix(weights, prefix) if prefix else dict(weights)
    tops = sorted({k.split(".", 1)[0] for k in weights if prefix and not k.startswith(prefix)})
    return LayoutParts(backbone, {}, None, tops + drop_fc(backbone, prefix), backbone_prefix=prefix)


#: the layout (cl_diag.models.foreign.FOREIGN_LAYOUTS tries it in its order)
LAYOUT = ForeignLayout("state-dict", _state_dict_recognise, _state_dict_split)
