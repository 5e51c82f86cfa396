"""A trained encoder made ready for measuring, whatever checkpoint it came from.

:func:`rebuild_subject` turns a :class:`~cl_diag.models.checkpoints.CheckpointFile` of a
model (a cl-diag checkpoint or a foreign layout) into a :class:`Subject`: the trained
backbone and projector in eval mode, the same architecture at a seeded random
initialisation (the probes' baseline), the training config in ``cl-diag train``'s
vocabulary, a ``source`` record for result.json, and a :class:`DataSpec` naming the data the
model was trained on.

A cl-diag checkpoint is rebuilt from the config it stores (:func:`build_model`) and must
fit it exactly; its ``toy`` runs carry their learned vectors instead of an encoder. A
foreign checkpoint is rebuilt by :func:`~cl_diag.models.foreign.load_foreign_encoder`.

Opening that data (datasets, augmentation) is training's business, which sits above
models: :func:`cl_diag.orchestration.subject.open_subject` rebuilds the subject here and
then attaches the data :class:`DataSpec` names (``two_views``, ``eval_split``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_diag.errors import UserError
from cl_diag.models.build import build_model
from cl_diag.models.checkpoints import CheckpointFile, check_checkpoint
from cl_diag.models.foreign import lightning_metadata, load_foreign_encoder
from cl_diag.models.registry import get_arch

__all__ = ["FOREIGN_DATASETS", "DataSpec", "Subject", "rebuild_subject"]

#: Datasets a foreign checkpoint can be measured on.
FOREIGN_DATASETS = ("cifar10", "cifar100", "imagefolder")


@dataclass(frozen=True)
class DataSpec:
    """The data a subject was trained on, as its checkpoint and the user's options name it."""

    dataset: str  # digits, cifar10, cifar100 or imagefolder
    data_root: str | None
    val_root: str | None
    image_size: int | None  # None: the dataset's own size
    num_samples: int | None  # the run trained on the first N images only
    split: dict[str, Any] | None = None  # the train/test split the checkpoint recorded


@dataclass
class Subject:
    """A trained encoder made ready for measuring, whatever file it came from."""

    source: dict  # result.json's "source" (kind, format, path, arch, ..., weights_sha256)
    training_config: dict
    n_train: int | None
    dataset: str | None
    backbone: nn.Module | None = None
    projector: nn.Module | None = None
    random_backbone: nn.Module | None = None
    random_projector: nn.Module | None = None
    two_views: Any = None  # TwoViews over the training set
    eval_split: Callable[[str], Any] | None = None  # "train"/"test" -> (image, label) dataset
    splits: dict[str, Any] = field(default_factory=dict)  # the opened evaluation splits
    embeddings: tuple[torch.Tensor, torch.Tensor] | None = None  # toy: the learned vectors
    data_spec: DataSpec | None = None  # the data to attach (None for toy runs)


def rebuild_subject(
    file: CheckpointFile,
    *,
    arch: str | None = None,
    dataset: str | None = None,
    cifar_stem_padding: int | None = None,
    data_root: Path | None = None,
    val_root: Path | None = None,
    seed: int = 0,
    run_record_fields: Collection[str] = (),
) -> Subject:
    """Rebuild the model in ``file`` and name the data it was trained on (``data_spec``);
    UserError for every mismatch between the file and the options.

    ``arch``, ``dataset`` and ``cifar_stem_padding`` are the user's options for a foreign
    checkpoint (a cl-diag checkpoint records them); ``data_root``/``val_root`` override the
    roots a cl-diag checkpoint recorded; ``seed`` draws the random-init twin.
    ``run_record_fields``: config keys of a cl-diag checkpoint that describe where and how
    a run ran rather than what it computed; they are left out of ``training_config``.
    """
    if file.kind == "cl-diag":
        return _cl_diag_subject(
            file,
            dataset=dataset,
            arch=arch,
            cifar_stem_padding=cifar_stem_padding,
            data_root=data_root,
            val_root=val_root,
            seed=seed,
            run_record_fields=run_record_fields,
        )
    return _foreign_subject(
        file,
        arch=arch,
        dataset=dataset,
        cifar_stem_padding=cifar_stem_padding,
        data_root=data_root,
        val_root=val_root,
        seed=seed,
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _as_str(path: Path | None, recorded: Any) -> str | None:
    return str(path) if path is not None else recorded


def _cl_diag_subject(
    file: CheckpointFile,
    *,
    dataset: str | None,
    arch: str | None,
    cifar_stem_padding: int | None,
    data_root: Path | None,
    val_root: Path | None,
    seed: int,
    run_record_fields: Collection[str],
) -> Subject:
    for option, value in (("--arch", arch), ("--cifar-stem-padding", cifar_stem_padding)):
        if value is not None:
            raise UserError(
                f"{option} applies to foreign checkpoints only; {file.path} is a cl-diag "
                "checkpoint, which records its model. Drop the option."
            )
    ck = check_checkpoint(file.payload, file.path)  # already read once: validate, do not reload
    cfg = dict(ck.get("config") or {})
    recorded_roots = {"data_root": cfg.get("data_root"), "val_root": cfg.get("val_root")}
    # Where and how the run ran (paths, device, workers) is not what it computed; leaving it
    # out keeps compare's run labels to the options that matter.
    cfg = {k: v for k, v in cfg.items() if k not in run_record_fields}
    trained_on = str(ck.get("dataset") or cfg.get("dataset"))
    if dataset is not None and dataset != trained_on:
        raise UserError(
            f"{file.path} was trained on {trained_on}; --dataset {dataset} cannot change that. "
            "Drop --dataset."
        )
    source = {
        "format": "cl-diag",
        "path": str(file.path),
        "arch": cfg.get("arch"),
        "dataset": trained_on,
        "n_train": ck.get("n_train"),
        "epoch": ck.get("epoch"),
        "step": ck.get("step"),
        "complete": ck.get("complete"),
        "versions": ck.get("versions"),
    }
    subject = Subject(
        source=source, training_config=cfg, n_train=ck.get("n_train"), dataset=trained_on
    )
    if trained_on == "toy":
        emb = ck.get("embeddings")
        if not isinstance(emb, dict) or "z1" not in emb or "z2" not in emb:
            raise UserError(
                f"{file.path} is a toy-dataset checkpoint without its 'embeddings'; it is damaged."
            )
        subject.embeddings = (emb["z1"].float(), emb["z2"].float())
        return subject

    try:
        model = build_model(cfg)
        random_model = build_model(cfg, seed=seed)
    except (ValueError, KeyError) as exc:
        raise UserError(
            f"The config stored in {file.path} does not describe a model cl-diag can build: {exc}."
        ) from None
    try:
        model.backbone.load_state_dict(ck["backbone"], strict=True)
        model.projector.load_state_dict(ck["projector"], strict=True)
    except RuntimeError as exc:
        raise UserError(
            f"The weights in {file.path} do not fit the model its config describes "
            f"({_first_line(exc)}); the checkpoint is damaged or from an incompatible cl-diag "
            "version."
        ) from None
    subject.backbone, subject.projector = model.backbone.eval(), model.projector.eval()
    subject.random_backbone = random_model.backbone.eval()
    subject.random_projector = random_model.projector.eval()
    source["arch"] = model.arch
    subject.data_spec = DataSpec(
        trained_on,
        data_root=_as_str(data_root, recorded_roots["data_root"]),
        val_root=_as_str(val_root, recorded_roots["val_root"]),
        image_size=cfg.get("image_size"),
        num_samples=cfg.get("num_samples"),
        split=ck.get("split"),
    )
    return subject


def _foreign_subject(
    file: CheckpointFile,
    *,
    arch: str | None,
    dataset: str | None,
    cifar_stem_padding: int | None,
    data_root: Path | None,
    val_root: Path | None,
    seed: int,
) -> Subject:
    encoder = load_foreign_encoder(
        file, arch=arch, dataset=dataset, cifar_stem_padding=cifar_stem_padding
    )
    trained_on = encoder.dataset
    if trained_on is None:
        raise UserError(
            f"{file.path} does not record its dataset (no args.json beside it): give --dataset "
            f"({', '.join(FOREIGN_DATASETS)}) and --data-root."
        )
    note = None
    if trained_on not in FOREIGN_DATASETS:
        if dataset is not None:
            raise UserError(
                f"--dataset {trained_on!r} is not one of {', '.join(FOREIGN_DATASETS)}."
            )
        # solo-learn's imagenet, imagenet100, stl10 and custom runs read class folders.
        note = (
            f"args.json names dataset {trained_on!r}; read as imagefolder from "
            "--data-root/--val-root"
        )
        trained_on = "imagefolder"
    if encoder.num_classes is not None and trained_on in ("cifar10", "cifar100"):
        expected = 10 if trained_on == "cifar10" else 100
        if encoder.num_classes != expected:
            raise UserError(
                f"The checkpoint's online classifier has {encoder.num_classes} classes but "
                f"{trained_on} has {expected}; give the --dataset it was trained on."
            )
    source = {
        "format": encoder.kind,
        "path": str(file.path),
        "arch": encoder.arch,
        "dataset": trained_on,
        "projector_layout": encoder.projector_layout,
        "cifar_stem_padding": encoder.cifar_stem_padding,
        "args_json": encoder.args_path,
        "provenance": encoder.provenance,
        "ignored_modules": encoder.ignored,
        **lightning_metadata(file.payload),
    }
    if note:
        source["note"] = note
    random_backbone, random_projector = encoder.random_init(seed)
    subject = Subject(
        source=source,
        training_config=dict(encoder.training_config),
        n_train=None,
        dataset=trained_on,
        backbone=encoder.backbone,
        projector=encoder.projector,
        random_backbone=random_backbone,
        random_projector=random_projector,
    )
    # A CIFAR-stem network measured on an image folder sees the images at CIFAR's size.
    size = 32 if get_arch(encoder.arch).cifar_stem and trained_on == "imagefolder" else None
    subject.data_spec = DataSpec(
        trained_on,
        data_root=_as_str(data_root, None),
        val_root=_as_str(val_root, None),
        image_size=size,
        num_samples=None,
    )
    return subject
