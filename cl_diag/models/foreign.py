"""Checkpoints cl-diag did not write: recognising their layout and rebuilding them as modules.

Two layouts are recognised from their keys (:data:`FOREIGN_LAYOUTS`, tried in order):

* **solo-learn**: a PyTorch Lightning ``.ckpt`` whose ``state_dict`` holds ``backbone.*``
  (older releases: ``encoder.*``), ``projector.*`` and ``classifier.*``; ``args.json``
  beside the file, when present, names the method, backbone and dataset;
* **state-dict**: a plain torchvision ResNet state dict (``conv1.weight``,
  ``layer1.0.conv1.weight``, ...), optionally under a ``module.`` or ``backbone.`` prefix
  and optionally wrapped as ``{"state_dict": ...}`` or ``{"model": ...}``.

A layout is a :class:`ForeignLayout`: a recogniser and a function that splits the weights
into backbone, projector and the parts left unused. More layouts (lightly, MoCo, DINO) and
user-given key mappings (issue 15) are added as more entries of that table.

Loading is strict: a backbone key that is missing, unexpected or of the wrong shape is an
error that lists them, so a wrong ``--arch`` cannot pass silently. The backbone comes from
the architecture registry (:mod:`cl_diag.models.registry`), the projector is rebuilt from
its own keys (:func:`rebuild_projector`).

The CIFAR stem's padding is not stored in the weights (a 3x3 kernel has the same shape
with padding 1 or 2): solo-learn upstream builds ``Conv2d(3, 64, 3, stride 1, padding 2)``,
the paper's fork (leechungpa/embedding-similarity-cl) and the usual CIFAR ResNet use
padding 1. See :func:`resolve_cifar_stem_padding` for the default.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_diag.errors import UserError
from cl_diag.models.build import build_backbone, fresh_like, seeded
from cl_diag.models.registry import FOREIGN_ARCHS, BackboneOptions, get_arch

__all__ = [
    "FOREIGN_LAYOUTS",
    "PADDING_DEFAULT_TEXT",
    "SUPPORTED_LAYOUTS",
    "ForeignEncoder",
    "ForeignLayout",
    "LayoutParts",
    "foreign_weights",
    "infer_resnet_arch",
    "lightning_metadata",
    "load_foreign_encoder",
    "load_strict",
    "read_solo_args",
    "rebuild_projector",
    "recognise_layout",
    "resolve_cifar_stem_padding",
    "solo_training_config",
]

_CIFAR_DATASETS = ("cifar10", "cifar100")

SUPPORTED_LAYOUTS = (
    "Supported layouts: (1) an embeddings file (.npz, or a torch file with 'z1' and 'z2'); "
    "(2) a cl-diag checkpoint written by 'cl-diag train'; "
    "(3) a solo-learn Lightning .ckpt with 'state_dict' keys 'backbone.*' (older: 'encoder.*'), "
    "'projector.*', 'classifier.*'; "
    "(4) a plain torchvision ResNet state dict (keys 'conv1.weight', 'layer1.0.conv1.weight', ...; "
    "optional 'module.' or 'backbone.' prefix; optionally under 'state_dict' or 'model'), "
    "analysed with --arch."
)


# --------------------------------------------------------------------------- weights and keys


def _is_tensor_dict(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())
    )


def _weights_of(payload: Any) -> dict[str, torch.Tensor] | None:
    """The state dict inside a foreign payload, or None."""
    if _is_tensor_dict(payload):
        return payload
    if isinstance(payload, dict):
        for key in ("state_dict", "model"):
            if _is_tensor_dict(payload.get(key)):
                return payload[key]
    return None


def _strip(keys_to_values: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v for k, v in keys_to_values.items() if k.startswith(prefix)}


def _unwrap_module(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop DistributedDataParallel's ``module.`` prefix when every key has it."""
    if weights and all(k.startswith("module.") for k in weights):
        return _strip(weights, "module.")
    return dict(weights)


def foreign_weights(payload: Any) -> dict[str, torch.Tensor]:
    """The state dict of a foreign payload, DDP's ``module.`` prefix removed ({} if none)."""
    return _unwrap_module(_weights_of(payload) or {})


# --------------------------------------------------------------------------- layouts


@dataclass
class LayoutParts:
    """A foreign state dict split into what cl-diag rebuilds and what it leaves aside."""

    backbone: dict[str, torch.Tensor]
    projector: dict[str, torch.Tensor]  # {} when the file has none
    classifier: torch.Tensor | None  # the online classifier's weight, when present
    ignored: list[str]  # top-level modules not used (classifier, momentum_*, fc, ...)


@dataclass(frozen=True)
class ForeignLayout:
    """A checkpoint layout: ``recognise(payload, weights)`` and ``split(weights)``; ``weights``
    is :func:`foreign_weights` of the payload."""

    name: str
    recognise: Callable[[Any, dict[str, torch.Tensor]], bool]
    split: Callable[[dict[str, torch.Tensor]], LayoutParts]


def _drop_fc(backbone: dict[str, torch.Tensor], prefix: str) -> list[str]:
    # torchvision's classification head is not part of the feature extractor.
    dropped = sorted(k for k in backbone if k.startswith("fc."))
    for key in dropped:
        backbone.pop(key)
    return [f"{prefix}fc"] if dropped else []


def _solo_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    return any(k.startswith(("backbone.", "encoder.")) for k in weights) and (
        (isinstance(payload, dict) and "state_dict" in payload)
        or any(k.startswith(("projector.", "classifier.")) for k in weights)
    )


def _solo_split(weights: dict[str, torch.Tensor]) -> LayoutParts:
    prefix = "backbone." if any(k.startswith("backbone.") for k in weights) else "encoder."
    backbone = _strip(weights, prefix)
    tops = sorted({k.split(".", 1)[0] for k in weights} - {prefix.rstrip("."), "projector"})
    ignored = tops + _drop_fc(backbone, prefix)
    projector = _strip(weights, "projector.")
    return LayoutParts(backbone, projector, weights.get("classifier.weight"), ignored)


def _state_dict_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    plain = _strip(weights, "backbone.") or weights
    return "conv1.weight" in plain and any(k.startswith("layer1.0.") for k in plain)


def _state_dict_split(weights: dict[str, torch.Tensor]) -> LayoutParts:
    prefix = "backbone." if any(k.startswith("backbone.") for k in weights) else ""
    backbone = _strip(weights, prefix) if prefix else dict(weights)
    tops = sorted({k.split(".", 1)[0] for k in weights if prefix and not k.startswith(prefix)})
    return LayoutParts(backbone, {}, None, tops + _drop_fc(backbone, prefix))


#: The foreign layouts, in the order they are tried.
FOREIGN_LAYOUTS: tuple[ForeignLayout, ...] = (
    ForeignLayout("solo-learn", _solo_recognise, _solo_split),
    ForeignLayout("state-dict", _state_dict_recognise, _state_dict_split),
)


def recognise_layout(payload: Any) -> str | None:
    """The name of the first :data:`FOREIGN_LAYOUTS` entry that recognises ``payload``."""
    weights = _weights_of(payload)
    if weights is None:
        return None
    weights = _unwrap_module(weights)
    found = (layout.name for layout in FOREIGN_LAYOUTS if layout.recognise(payload, weights))
    return next(found, None)


def _layout(name: str) -> ForeignLayout:
    for layout in FOREIGN_LAYOUTS:
        if layout.name == name:
            return layout
    raise ValueError(f"not a foreign checkpoint layout: {name}")


# --------------------------------------------------------------------------- architecture


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


# --------------------------------------------------------------------------- projector


def rebuild_projector(state: dict[str, torch.Tensor]) -> tuple[nn.Sequential, str]:
    """Rebuild an ``nn.Sequential`` projector from its state-dict keys and shapes.

    A position with a 2-D ``weight`` is a Linear, one with ``running_mean`` a BatchNorm1d,
    and a position with no parameters (a gap in the indices) is a ReLU, as in every
    solo-learn projector: upstream SimCLR's Linear-ReLU-Linear (indices 0, 2) and the
    paper's fork's Linear-BN-ReLU-Linear (0, 1, 3) both come out right. Returns the module
    (weights loaded, strictly) and a description such as
    ``Linear(512,2048)-BN-ReLU-Linear(2048,128)``.
    """
    by_index: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        head, _, rest = key.partition(".")
        if not head.isdigit() or not rest:
            raise UserError(
                f"The projector key 'projector.{key}' is not an nn.Sequential entry; cl-diag "
                "rebuilds projectors made of Linear, BatchNorm1d and ReLU layers only."
            )
        by_index.setdefault(int(head), {})[rest] = value
    if not by_index:
        raise UserError("The checkpoint's projector has no weights.")
    layers: list[nn.Module] = []
    parts: list[str] = []
    for index in range(max(by_index) + 1):
        params = by_index.get(index)
        if params is None:
            layers.append(nn.ReLU())
            parts.append("ReLU")
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
    if not isinstance(layers[-1], nn.Linear):
        raise UserError(
            "The checkpoint's projector does not end with a Linear layer; cannot rebuild it."
        )
    projector = nn.Sequential(*layers)
    hint = "The projector layout could not be inferred from its keys."
    load_strict(projector, state, "projector", hint)
    return projector, "-".join(parts)


def _projector_in_dim(projector: nn.Sequential) -> int:
    return next(m for m in projector if isinstance(m, nn.Linear)).in_features


# --------------------------------------------------------------------------- solo-learn args


def _get(mapping: dict, dotted: str) -> Any:
    value: Any = mapping
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _first(mapping: dict, *dotted: str) -> Any:
    for key in dotted:
        value = _get(mapping, key)
        if value is not None and value != "<not serializable>":
            return value
    return None


def read_solo_args(ckpt_path: Path) -> tuple[dict | None, Path | None]:
    """The ``args.json`` solo-learn writes beside its checkpoints, or (None, None)."""
    args_path = ckpt_path.parent / "args.json"
    if not args_path.is_file():
        return None, None
    try:
        args = json.loads(args_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(
            f"{args_path} (solo-learn's run arguments, beside the checkpoint) could not be read: "
            f"{exc}. Fix or remove it and give --arch and --dataset instead."
        ) from None
    if not isinstance(args, dict):
        raise UserError(f"{args_path} does not hold a JSON object; fix or remove it.")
    return args, args_path


def solo_training_config(args: dict) -> dict:
    """solo-learn's run arguments (new nested Hydra layout or old flat argparse layout) in
    ``cl-diag train``'s vocabulary, for ``theory`` and for ``compare``'s run labels."""
    backbone = _first(args, "backbone.name", "backbone", "encoder")
    dataset = _first(args, "data.dataset", "dataset")
    per_device = _first(args, "optimizer.batch_size", "batch_size")
    devices = _first(args, "devices", "gpus")
    n_devices = len(devices) if isinstance(devices, list) and devices else 1
    nodes = _first(args, "num_nodes") or 1
    vrn_enabled = _first(args, "add_vrn_loss_term.enabled")
    vrn_weight = _first(args, "add_vrn_loss_term.weight")
    # solo-learn's batch_size is per device; the loss saw the global batch (DDP gathers)
    batch_size = int(per_device) * n_devices * int(nodes) if isinstance(per_device, int) else None
    config = {
        "loss": _first(args, "method"),
        "batch_size": batch_size,
        "batch_size_per_device": per_device,
        "temperature": _first(args, "method_kwargs.temperature", "temperature"),
        "bias": _first(args, "method_kwargs.bias", "bias"),
        "vrn": float(vrn_weight) if vrn_enabled and vrn_weight is not None else 0.0,
        "vrn_k": _first(args, "add_vrn_loss_term.k") if vrn_enabled else None,
        "vrn_delta": _first(args, "add_vrn_loss_term.delta") if vrn_enabled else None,
        "vrn_p": _first(args, "add_vrn_loss_term.p") if vrn_enabled else None,
        "epochs": _first(args, "max_epochs"),
        "lr": _first(args, "optimizer.lr", "lr"),
        "weight_decay": _first(args, "optimizer.weight_decay", "weight_decay"),
        "optimizer": _first(args, "optimizer.name", "optimizer"),
        "seed": _first(args, "seed"),
        "dataset": dataset,
        "arch": (
            f"{backbone}-cifar"
            if isinstance(backbone, str) and dataset in _CIFAR_DATASETS
            else backbone
        ),
        "proj_hidden_dim": _first(args, "method_kwargs.proj_hidden_dim", "proj_hidden_dim"),
        "proj_output_dim": _first(args, "method_kwargs.proj_output_dim", "proj_output_dim"),
        "precision": _first(args, "precision"),
        "name": _first(args, "name"),
    }
    return {k: v for k, v in config.items() if v is not None}


def lightning_metadata(payload: Any) -> dict:
    """Epoch, step and Lightning version of a .ckpt, when recorded (plain numbers only)."""
    if not isinstance(payload, dict):
        return {}
    out: dict[str, int | str | float] = {}
    for key in ("epoch", "global_step", "pytorch-lightning_version"):
        value = payload.get(key)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            out[key.replace("pytorch-lightning_version", "lightning_version")] = value
        elif isinstance(value, float) and math.isfinite(value):
            out[key] = value
    return out


# --------------------------------------------------------------------------- the encoder


@dataclass
class ForeignEncoder:
    """A foreign checkpoint rebuilt as torch modules (eval mode)."""

    kind: str  # the layout: "solo-learn" | "state-dict"
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
    provenance: dict  # where arch and dataset came from

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
    return {"value": 1, "from": "default for plain state dicts (the usual CIFAR ResNet stem)"}


def load_foreign_encoder(
    file: Any,
    *,
    arch: str | None = None,
    dataset: str | None = None,
    cifar_stem_padding: int | None = None,
) -> ForeignEncoder:
    """Rebuild a foreign checkpoint (a :class:`~cl_diag.models.checkpoints.CheckpointFile` of a
    :data:`FOREIGN_LAYOUTS` kind) as backbone (+ projector).

    ``arch`` and ``dataset`` from the command line win over ``args.json``; one of the two
    must name the architecture. Raises UserError for every mismatch.
    """
    layout = _layout(file.kind)
    parts = layout.split(foreign_weights(file.payload))
    args, args_path = read_solo_args(file.path) if file.kind == "solo-learn" else (None, None)
    config = solo_training_config(args) if args else {}

    guess = infer_resnet_arch(parts.backbone)
    looks = f" These weights look like {guess}." if guess else ""
    provenance: dict[str, str] = {}
    if arch is not None:
        provenance["arch"] = "--arch"
    elif config.get("arch"):
        arch = str(config["arch"])
        provenance["arch"] = f"{args_path.name} beside the checkpoint" if args_path else "args.json"
    else:
        raise UserError(
            f"{file.path} does not record its architecture (no args.json beside it): give --arch, "
            f"one of {', '.join(FOREIGN_ARCHS)}.{looks}"
        )
    if arch not in FOREIGN_ARCHS:
        raise UserError(
            f"--arch {arch!r} is not supported for foreign checkpoints; choose one of "
            f"{', '.join(FOREIGN_ARCHS)}.{looks}"
        )

    if dataset is not None:
        provenance["dataset"] = "--dataset"
    elif config.get("dataset"):
        dataset = str(config["dataset"])
        provenance["dataset"] = "args.json"

    fork_signs = []
    projector = description = None
    if parts.projector:
        projector, description = rebuild_projector(parts.projector)
        if any(isinstance(m, nn.BatchNorm1d) for m in projector):
            fork_signs.append("a BatchNorm in the projector")
    if args and _get(args, "add_vrn_loss_term") is not None:
        fork_signs.append("'add_vrn_loss_term' in args.json")
    spec = get_arch(arch)
    padding = (
        resolve_cifar_stem_padding(cifar_stem_padding, kind=file.kind, fork_signs=fork_signs)
        if spec.cifar_stem
        else None
    )
    with seeded(0):  # the weights are replaced below; seeding keeps the caller's RNG as it was
        backbone, feature_dim = build_backbone(
            arch, BackboneOptions(cifar_stem_padding=padding["value"] if padding else 1)
        )
    hint = (
        f"These weights look like {guess}; pass --arch {guess}."
        if guess and guess != arch
        else f"Check --arch (given or recorded: {arch}); supported: {', '.join(FOREIGN_ARCHS)}."
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
        ignored=parts.ignored,
        provenance=provenance,
    )
