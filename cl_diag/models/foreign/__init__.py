"""Checkpoints cl-diag did not write: recognising their layout and rebuilding them as modules.

Each layout is a module of this package declaring its ``LAYOUT`` (a :class:`ForeignLayout`:
a recogniser, a split of the weights into backbone, projector and unused parts, the
``--encoder`` choices of a two-encoder file and what the file records of its training):
``lightly``, ``moco``, ``dino``, ``solo``, ``state_dict`` and ``mapped`` (any other file,
mapped without code by ``--rename`` and ``--backbone-prefix``/``--projector-prefix``,
:mod:`cl_diag.models.keymap`). :mod:`~cl_diag.models.foreign.layouts` tries them in order
(:data:`FOREIGN_LAYOUTS`); :mod:`~cl_diag.models.foreign.encoder` rebuilds the one found.

Loading is strict: a backbone key missing, unexpected or of the wrong shape is an error that
lists them, so a wrong ``--arch`` cannot pass silently. The backbone comes from the
architecture registry (``timm:NAME`` included), the projector is rebuilt from its own keys
(:func:`rebuild_projector`), and a classification head (torchvision's ``fc``, timm's
``head``) is set aside. The CIFAR stem's padding is not in the weights (a 3x3 kernel has the
same shape with padding 1 or 2): :func:`resolve_cifar_stem_padding` picks it.
"""

from cl_diag.models.foreign.common import (
    ForeignLayout,
    LayoutParts,
    foreign_weights,
    recorded_crop_side,
)
from cl_diag.models.foreign.encoder import (
    PADDING_DEFAULT_TEXT,
    ForeignEncoder,
    guess_arch,
    infer_resnet_arch,
    load_foreign_encoder,
    load_strict,
    rebuild_projector,
    resolve_cifar_stem_padding,
)
from cl_diag.models.foreign.layouts import (
    FOREIGN_LAYOUTS,
    SUPPORTED_LAYOUTS,
    layout_of,
    recognise_layout,
)
from cl_diag.models.foreign.solo import lightning_metadata, read_solo_args, solo_training_config

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
