"""The foreign layouts in the order they are tried (:data:`FOREIGN_LAYOUTS`), and finding the
one a payload has (:func:`recognise_layout`) or the one of a name (:func:`layout_of`).
"""

from __future__ import annotations

from typing import Any

from cl_diag.models.foreign import dino, lightly, moco, solo, state_dict
from cl_diag.models.foreign.common import ForeignLayout, foreign_weights
from cl_diag.models.foreign.mapped import MAPPED
from cl_diag.models.keymap import (
    KeyMapping,
    raw_weights,
    state_dict_of,
)

#: The foreign layouts, in the order they are tried: lightly's Lightning .ckpt also has
#: 'backbone.*' under 'state_dict', so it goes before solo-learn. Adding a layout is a module of
#: this package declaring its ``LAYOUT``, and its place in this tuple.
FOREIGN_LAYOUTS: tuple[ForeignLayout, ...] = (
    lightly.LAYOUT,
    moco.LAYOUT,
    dino.LAYOUT,
    solo.LAYOUT,
    state_dict.LAYOUT,
)


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
