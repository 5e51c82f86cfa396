"""The **solo-learn** layout: a PyTorch Lightning ``.ckpt`` whose ``state_dict`` holds
``backbone.*`` (older releases: ``encoder.*``), ``projector.*`` and ``classifier.*``;
``args.json`` beside the file, when present, names the method, backbone and dataset.

The ``args.json`` it is read with (:func:`read_solo_args`) translated into ``cl-diag
train``'s vocabulary (:func:`solo_training_config`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.io.jsonfile import parse_json
from cl_diag.models.foreign.common import (
    CIFAR_DATASETS,
    ForeignLayout,
    LayoutParts,
    drop_fc,
    recorded_crop_side,
    strip_prefix,
)
from cl_diag.models.keymap import (
    KeyMapping,
)


def _solo_recognise(payload: Any, weights: dict[str, torch.Tensor]) -> bool:
    return any(k.startswith(("backbone.", "encoder.")) for k in weights) and (
        (isinstance(payload, dict) and "state_dict" in payload)
        or any(k.startswith(("projector.", "classifier.")) for k in weights)
    )


def _solo_split(
    weights: dict[str, torch.Tensor], encoder: str | None, mapping: KeyMapping
) -> LayoutParts:
    prefix = "backbone." if any(k.startswith("backbone.") for k in weights) else "encoder."
    backbone = strip_prefix(weights, prefix)
    tops = sorted({k.split(".", 1)[0] for k in weights} - {prefix.rstrip("."), "projector"})
    ignored = tops + drop_fc(backbone, prefix)
    projector = strip_prefix(weights, "projector.")
    return LayoutParts(
        backbone,
        projector,
        weights.get("classifier.weight"),
        ignored,
        backbone_prefix=prefix,
        projector_prefix="projector." if projector else None,
    )


def _solo_fingerprinted(payload: Any) -> Any:
    return payload.get("state_dict", payload)


def dotted_get(mapping: dict, dotted: str) -> Any:
    value: Any = mapping
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _first(mapping: dict, *dotted: str) -> Any:
    for key in dotted:
        value = dotted_get(mapping, key)
        if value is not None and value != "<not serializable>":
            return value
    return None


def read_solo_args(ckpt_path: Path) -> tuple[dict | None, Path | None]:
    """The ``args.json`` solo-learn writes beside its checkpoints, or (None, None)."""
    args_path = ckpt_path.parent / "args.json"
    if not args_path.is_file():
        return None, None
    try:
        args = parse_json(
            args_path.read_text(encoding="utf-8"),
            where=args_path,
            fix="Fix or remove it and give --arch and --dataset instead.",
            finite=False,  # solo-learn writes it with Python's json: inf and NaN are possible
        )
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
            if isinstance(backbone, str) and dataset in CIFAR_DATASETS
            else backbone
        ),
        "proj_hidden_dim": _first(args, "method_kwargs.proj_hidden_dim", "proj_hidden_dim"),
        "proj_output_dim": _first(args, "method_kwargs.proj_output_dim", "proj_output_dim"),
        "image_size": recorded_crop_side(args),
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


#: the layout (cl_diag.models.foreign.FOREIGN_LAYOUTS tries it in its order)
LAYOUT = ForeignLayout(
    "solo-learn", _solo_recognise, _solo_split, fingerprinted=_solo_fingerprinted
)
