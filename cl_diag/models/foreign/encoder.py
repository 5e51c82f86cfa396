"""A foreign checkpoint rebuilt as modules (:func:`load_foreign_encoder`): its architecture
(given, recorded or inferred from the keys), the backbone loaded strictly, its classification
head set aside, and the projector rebuilt from its own keys (:func:`rebuild_projector`); the
CIFAR stem's padding the weights do not store (:func:`resolve_cifar_stem_padding`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from cl_diag.errors import UserError
from cl_diag.models.build import build_backbone, fresh_like, seeded
from cl_diag.models.foreign.common import layout_weights, strip_prefix
from cl_diag.models.foreign.dino import DINO_ENCODERS
from cl_diag.models.foreign.layouts import layout_of
from cl_diag.models.foreign.lightly import children_to_resnet, is_children_list
from cl_diag.models.foreign.moco import MOCO_ENCODERS
from cl_diag.models.foreign.solo import dotted_get, read_solo_args, solo_training_config
from cl_diag.models.keymap import (
    KeyMapping,
    example_backbone_prefix,
)
from cl_diag.models.registry import FOREIGN_ARCHS, BackboneOptions, get_arch


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
    part = strip_prefix(weights, prefix)
    if is_children_list(part):
        part = children_to_resnet(part)
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
    :data:`FOREIGN_LAYOUTS` kind, or ``mapped``) as backbone (+ projector); UserError for every
    mismatch. ``arch`` and ``dataset`` win over what the file records; ``encoder`` picks a MoCo or
    DINO file's encoder; ``mapping`` is the user's ``--rename`` and prefixes.
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
    weights, ddp = layout_weights(file.payload, mapping)
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
    if args and dotted_get(args, "add_vrn_loss_term") is not None:
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
