"""What every foreign layout shares: :class:`ForeignLayout` and :class:`LayoutParts`, the
weights of a payload (:func:`foreign_weights`: ``--rename`` applied, DDP's ``module.`` prefix
dropped), the helpers that split them, and the training crop side a foreign config states
(:func:`recorded_crop_side`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from cl_diag.models.keymap import (
    KeyMapping,
    raw_weights,
    state_dict_of,
)

CIFAR_DATASETS = ("cifar10", "cifar100")


def strip_prefix(keys_to_values: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v for k, v in keys_to_values.items() if k.startswith(prefix)}


def _unwrap_module(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop DistributedDataParallel's ``module.`` prefix when every key has it."""
    if weights and all(k.startswith("module.") for k in weights):
        return strip_prefix(weights, "module.")
    return dict(weights)


def foreign_weights(payload: Any, mapping: KeyMapping | None = None) -> dict[str, torch.Tensor]:
    """The tensors a layout splits ({} if none): :func:`~cl_diag.models.keymap.raw_weights`
    after ``--rename``, DDP's ``module.`` prefix removed when every key has it. With
    ``--backbone-prefix`` (a mapped layout) the keys stay as the user sees them."""
    return layout_weights(payload, mapping or KeyMapping())[0]


def layout_weights(payload: Any, mapping: KeyMapping) -> tuple[dict[str, torch.Tensor], bool]:
    """:func:`foreign_weights`, and whether DDP's ``module.`` prefix was removed."""
    weights = mapping.rename(raw_weights(payload))
    if mapping.selects:
        return weights, False
    unwrapped = _unwrap_module(weights)
    return unwrapped, unwrapped.keys() != weights.keys()


def as_sequential(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A lone Linear (``weight``, ``bias``: MoCo v1's fc, a one-layer DINO head) as entry 0
    of an ``nn.Sequential``, the form :func:`rebuild_projector` reads."""
    if state and all("." not in key for key in state):
        return {f"0.{key}": value for key, value in state.items()}
    return state


def top_modules(keys: Any, *, besides: tuple[str, ...] = ()) -> list[str]:
    return sorted({k.split(".", 1)[0] for k in keys} - set(besides))


@dataclass
class LayoutParts:
    """A foreign state dict split into what cl-diag rebuilds and what it leaves aside."""

    backbone: dict[str, torch.Tensor]
    projector: dict[str, torch.Tensor]  # {} when the file has none
    classifier: torch.Tensor | None  # the online classifier's weight, when present
    ignored: list[str]  # top-level modules not used (classifier, momentum_*, fc, ...)
    backbone_prefix: str = ""  # where the backbone's keys were (after DDP's module.)
    projector_prefix: str | None = None  # and the projector's
    key_map: str | None = None  # a renaming the layout itself applies, in words
    activation: str = "relu"  # the projector's parameter-free layers (DINO's head: GELU)


Split = Callable[[dict[str, torch.Tensor], "str | None", KeyMapping], LayoutParts]


def _records_nothing(payload: Any) -> tuple[dict, str]:
    return {}, ""


def _whole_payload(payload: Any) -> Any:
    return payload


@dataclass(frozen=True)
class ForeignLayout:
    """A checkpoint layout.

    ``recognise(payload, weights)`` and ``split(weights, encoder, mapping)``, where
    ``weights`` is :func:`foreign_weights` of the payload and ``encoder`` one of
    ``encoders`` (the first is the default; empty: the file holds one encoder).
    ``recorded(payload)`` is the training config the file itself records, in ``cl-diag
    train``'s vocabulary (``arch`` included), and where it was found; ``fingerprinted`` the
    part of the payload :func:`~cl_diag.models.checkpoints.weights_sha256` hashes (the
    weights, not the optimiser's or the trainer's run records).
    """

    name: str
    recognise: Callable[[Any, dict[str, torch.Tensor]], bool]
    split: Split
    encoders: tuple[str, ...] = ()
    recorded: Callable[[Any], tuple[dict, str]] = _records_nothing
    fingerprinted: Callable[[Any], Any] = _whole_payload


def drop_fc(backbone: dict[str, torch.Tensor], prefix: str) -> list[str]:
    # torchvision's classification head is not part of the feature extractor.
    dropped = sorted(k for k in backbone if k.startswith("fc."))
    for key in dropped:
        backbone.pop(key)
    return [f"{prefix}fc"] if dropped else []


#: Keys under which a training config states its crop side: a side or one side per crop
#: group (solo-learn's ``crop_size``, DINOv2's ``global_crops_size``: the first is the global
#: crop) or an image shape (a Lightning module's ``input_size``, timm's ``img_size``: an int,
#: ``(H, W)`` or ``(C, H, W)``, square).
_CROP_KEYS = ("crop_size", "global_crops_size")


_SHAPE_KEYS = ("image_size", "input_size", "img_size")


def _side(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _crop_side(value: Any) -> int | None:
    """A crop side, or the first of per-crop sides."""
    if isinstance(value, (list, tuple)):
        return _side(value[0]) if value else None
    return _side(value)


def _shape_side(value: Any) -> int | None:
    """The side of a square image shape: ``S``, ``(S, S)`` or ``(C, S, S)``."""
    if isinstance(value, (list, tuple)):
        sides = [_side(v) for v in value]
        if None in sides or len(sides) not in (2, 3):
            return None
        height, width = sides[-2:]
        return height if height == width else None
    return _side(value)


def recorded_crop_side(config: Any) -> int | None:
    """The training crop side a foreign config states (:data:`_CROP_KEYS`, :data:`_SHAPE_KEYS`;
    at the top level, under ``crops``/``data``, or in the first of solo-learn's
    ``augmentations``), or None."""
    if isinstance(config, argparse.Namespace):
        config = vars(config)
    if not isinstance(config, dict):
        return None
    places: list[Any] = [config, config.get("crops"), config.get("data")]
    augmentations = config.get("augmentations")
    if isinstance(augmentations, list) and augmentations:
        places.append(augmentations[0])
    for place in places:
        if isinstance(place, dict):
            for name in (*_CROP_KEYS, *_SHAPE_KEYS):
                read = _crop_side if name in _CROP_KEYS else _shape_side
                side = read(place.get(name))
                if side is not None:
                    return side
    return None


def lightning_recorded(payload: Any) -> tuple[dict, str]:
    """The crop side a Lightning checkpoint's ``hyper_parameters`` state (lightly's modules
    save theirs with ``self.save_hyperparameters()``)."""
    hparams = payload.get("hyper_parameters") if isinstance(payload, dict) else None
    side = recorded_crop_side(hparams)
    if side is None:
        return {}, ""
    return {"image_size": side}, "the Lightning checkpoint's hyper_parameters"


def state_dict_fingerprinted(payload: Any) -> Any:
    return state_dict_of(payload) or payload
