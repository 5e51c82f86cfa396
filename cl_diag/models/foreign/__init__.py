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

A layout is a :class:`ForeignLayout` (:mod:`~cl_diag.models.foreign.common`): a recogniser, a
function that splits the weights into backbone, projector and the parts left unused, the
``--encoder`` choices of a file holding two encoders, and what the file records about its
training. Each layout is a module of this package declaring its ``LAYOUT`` (``lightly``,
``moco``, ``dino``, ``solo``, ``state_dict``, ``mapped``); :mod:`~cl_diag.models.foreign.layouts`
tries them in order, and :mod:`~cl_diag.models.foreign.encoder` rebuilds the one found.

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
