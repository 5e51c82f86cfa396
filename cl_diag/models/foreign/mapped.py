"""The **mapped** layout: a file whose keys the user names (``--backbone-prefix``,
``--projector-prefix``, after ``--rename``); never recognised on its own.
"""

from __future__ import annotations

from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.models.foreign.common import ForeignLayout, LayoutParts, as_sequential, drop_fc
from cl_diag.models.foreign.lightly import CHILDREN_MAP, children_to_resnet, is_children_list
from cl_diag.models.keymap import (
    KeyMapping,
    raw_weights,
)


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
    if is_children_list(backbone):
        # lightly's tutorials save nn.Sequential(*resnet.children()[:-1]) under a name of
        # their own ({"resnet18_parameters": backbone.state_dict()}): the same mapping applies
        backbone, key_map = children_to_resnet(backbone), CHILDREN_MAP
        ignored = ignored + drop_fc(backbone, mapping.backbone_prefix or "")
    return LayoutParts(
        backbone,
        as_sequential(projector),
        None,
        ignored,
        backbone_prefix=mapping.backbone_prefix or "",
        projector_prefix=mapping.projector_prefix if projector else None,
        key_map=key_map,
    )


#: The layout of a file whose keys the user names (--backbone-prefix); never recognised.
MAPPED = ForeignLayout("mapped", _mapped_recognise, _mapped_split, fingerprinted=raw_weights)
