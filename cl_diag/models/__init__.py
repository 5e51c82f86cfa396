"""Models: one architecture registry, one backbone/projector builder, and the rebuilding of a
trained model from a checkpoint, cl-diag's own or a foreign one (below :mod:`cl_diag.training`)::

    registry        ArchSpec per name: builder, feature dim, projector width, CIFAR stem
    timm_backbones  the family timm:NAME (any timm model, pretrained=False; timm optional)
    backbones       the ResNet / CIFAR-stem builder, the digits CNN, the toy's free vectors
    build           build_backbone, build_projector, build_model, ContrastiveModel
    keymap          a foreign file's tensors by key; --rename / --backbone-prefix / ...
    foreign         foreign layouts, one module each; projector rebuilt from keys
    checkpoints     which kind a user's file is; reading the cl-diag checkpoint format
    subject         a checkpoint (or any nn.Module) rebuilt for measuring, and its DataSpec
"""

from cl_diag.models.backbones import FreeEmbeddings, SmallCNN, build_resnet
from cl_diag.models.build import (
    ContrastiveModel,
    backbone_size_problem,
    build_backbone,
    build_model,
    build_projector,
    fresh_like,
    seeded,
)
from cl_diag.models.checkpoints import (
    CheckpointFile,
    check_training_config,
    read_checkpoint_file,
    weights_sha256,
)
from cl_diag.models.foreign import (
    FOREIGN_LAYOUTS,
    ForeignEncoder,
    load_foreign_encoder,
    rebuild_projector,
)
from cl_diag.models.keymap import KeyMapping
from cl_diag.models.registry import (
    ARCHS,
    FOREIGN_ARCHS,
    ArchSpec,
    BackboneOptions,
    arch_names,
    default_arch,
    default_projector_hidden,
    get_arch,
    is_convolutional,
    register_arch,
    register_arch_family,
)
from cl_diag.models.subject import DataSpec, Subject, module_subject, rebuild_subject
from cl_diag.models.timm_backbones import TIMM_FAMILY, resolve_timm

__all__ = [
    "ARCHS",
    "FOREIGN_ARCHS",
    "FOREIGN_LAYOUTS",
    "TIMM_FAMILY",
    "ArchSpec",
    "BackboneOptions",
    "CheckpointFile",
    "ContrastiveModel",
    "DataSpec",
    "ForeignEncoder",
    "FreeEmbeddings",
    "KeyMapping",
    "SmallCNN",
    "Subject",
    "arch_names",
    "backbone_size_problem",
    "build_backbone",
    "build_model",
    "build_projector",
    "build_resnet",
    "check_training_config",
    "default_arch",
    "default_projector_hidden",
    "fresh_like",
    "get_arch",
    "is_convolutional",
    "load_foreign_encoder",
    "module_subject",
    "read_checkpoint_file",
    "rebuild_projector",
    "rebuild_subject",
    "register_arch",
    "register_arch_family",
    "resolve_timm",
    "seeded",
    "weights_sha256",
]
