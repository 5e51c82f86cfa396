"""A checkpoint made ready for measuring: its model rebuilt and the data it was trained on opened.

(One concept at two layers, with :mod:`cl_diag.models.subject` below.)

The two halves meet here, above both of their homes: :mod:`cl_diag.models` rebuilds the
encoder and names the data in a :class:`~cl_diag.models.subject.DataSpec`
(:func:`~cl_diag.models.subject.rebuild_subject`); :mod:`cl_diag.training.data` opens that
data (:func:`attach_data`). Models never import training, so the arrow runs one way.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_diag.errors import InputWarning, UserError
from cl_diag.models.checkpoints import CheckpointFile, tensors_sha256, weights_sha256
from cl_diag.models.subject import DataSpec, Subject, module_subject, rebuild_subject
from cl_diag.result import ImageSize
from cl_diag.runconfig import parse_run_config

__all__ = ["attach_data", "open_module_subject", "open_subject", "resolve_image_size"]


def resolve_image_size(
    spec: DataSpec, requested: int | None, *, where: object, option: str
) -> tuple[int, dict[str, Any]]:
    """The side the images of ``spec`` are encoded at, and result.json's record of it
    (``source.image_size``: ``value``, ``from``, ``trained``, ``channels``).

    In order: ``requested`` (``option``: ``--image-size`` or ``image_size``); a side the
    model takes only (a ViT's fixed input: another request is refused); the training side
    the checkpoint's config records (``cl-diag train``'s default when it records none); a
    side the model asks for (a CIFAR stem on an image folder: 32); the dataset's own size (32
    for CIFAR, 8 for digits). An image folder with none of these is read at 224 px,
    ImageNet's crop, with an :class:`~cl_diag.errors.InputWarning` that it is a guess; a
    request that differs from the recorded training side is measured, with a warning.
    """
    from cl_diag.training.augment import DATA_CHANNELS, default_image_size

    trained = spec.trained_size
    if trained is None and spec.trained_size_from is not None:
        trained = default_image_size(spec.dataset)  # trained without --image-size
    trained_from = spec.trained_size_from
    if spec.fixed_size and requested is not None and requested != spec.image_size:
        raise UserError(
            f"{option} {requested}: {where} takes {spec.image_size}-px images only "
            f"({spec.image_size_from}); drop {option} or give {spec.image_size}."
        )
    if requested is not None:
        side, why = int(requested), option
    elif spec.fixed_size and spec.image_size is not None:
        side, why = spec.image_size, spec.image_size_from or "the model's input size"
    elif trained is not None:
        side, why = trained, f"the training size ({trained_from})"
    elif spec.image_size is not None:
        side, why = spec.image_size, spec.image_size_from or "the model's input size"
    elif spec.dataset == "imagefolder":
        side = default_image_size(spec.dataset)
        why = "a guess: ImageNet's crop (nothing records the training size)"
        warnings.warn(
            f"{where} records no training image size: the image folder is read at {side} px, "
            f"a guess (ImageNet's crop); give {option} with the side it was trained at.",
            InputWarning,
            stacklevel=2,
        )
    else:
        side, why = default_image_size(spec.dataset), f"the {spec.dataset} images' own size"
        usual = spec.smallest_usual_size
        if usual is not None and 2 * side <= usual:  # 8-px digits into a ResNet
            example = f"{option} {usual}" if option.startswith("--") else f"{option}={usual}"
            warnings.warn(
                f"{where} records no training image size and is analysed at {side} px ({why}), "
                f"far below {usual} px ({spec.smallest_usual_from}): if it was trained at another "
                f"side, its similarities at {side} px are not the ones it learned; give "
                f"{option} with that side, e.g. {example}.",
                InputWarning,
                stacklevel=2,
            )
    if trained is not None and side != trained:
        fix = (
            f"drop {option} to analyse at {trained} px"
            if requested is not None
            else f"the side is {why}"
        )
        warnings.warn(
            f"{where} was trained at {trained} px ({trained_from}) but is analysed at {side} px "
            f"({why}): its similarities at another resolution are not the ones it learned; "
            f"{fix}.",
            InputWarning,
            stacklevel=2,
        )
    channels = spec.channels if spec.channels != DATA_CHANNELS[spec.dataset] else None
    record = ImageSize(value=side, source=why, trained=trained, channels=channels)
    return side, record.to_dict()


def _open_data(
    subject: Subject, requested: int | None, *, seed: int, where: Path, option: str
) -> None:
    """Resolve the side of ``subject``'s images, record it in ``source`` and open its data."""
    assert subject.data_spec is not None
    side, record = resolve_image_size(subject.data_spec, requested, where=where, option=option)
    subject.data_spec = replace(subject.data_spec, image_size=side)
    subject.source["image_size"] = record
    attach_data(subject, subject.data_spec, seed=seed, where=where)


def open_subject(
    file: CheckpointFile, *, seed: int = 0, image_size: int | None = None, **options: Any
) -> Subject:
    """Rebuild the model in ``file`` and open the data it was trained on; UserError for every
    mismatch between the file, the options and the data found. ``options`` are
    :func:`~cl_diag.models.subject.rebuild_subject`'s; ``seed`` draws the random-init twin and the
    augmented views; ``image_size`` is ``--image-size`` (:func:`resolve_image_size`).
    """
    subject = rebuild_subject(file, seed=seed, **options)
    if subject.data_spec is not None:  # toy runs carry their learned vectors instead
        _open_data(subject, image_size, seed=seed, where=file.path, option="--image-size")
    elif image_size is not None:
        raise UserError(
            f"--image-size applies to models of images; {file.path} holds the toy dataset's "
            "learned vectors. Drop --image-size."
        )
    elif subject.embeddings is not None:  # toy: --num-classes gave its instances classes
        num_classes = parse_run_config(subject.training_config).num_classes
        if num_classes is not None:
            from cl_diag.training.data import toy_labels

            subject.embedding_labels = toy_labels(subject.embeddings[0].shape[0], num_classes)
    fingerprint = weights_sha256(file)
    subject.source = {"kind": "checkpoint", **subject.source, "weights_sha256": fingerprint}
    return subject


def open_module_subject(
    backbone: nn.Module,
    projector: nn.Module | None,
    *,
    seed: int = 0,
    image_size: int | None = None,
    **options: Any,
) -> Subject:
    """:func:`~cl_diag.models.subject.module_subject` (``options`` are its own) with the data
    it names opened at ``image_size`` (:func:`resolve_image_size`), as :func:`open_subject`
    does for a file; ``source`` ends with the fingerprint of the modules' tensors (names,
    dtypes, shapes, bytes)."""
    subject = module_subject(backbone, projector, seed=seed, **options)
    assert subject.data_spec is not None  # a module is always measured on images
    where = Path(f"the {type(backbone).__name__} passed to cl_diag.analyze")
    _open_data(subject, image_size, seed=seed, where=where, option="image_size")
    parts = {"encoder": backbone, "projector": projector}
    subject.source["weights_sha256"] = tensors_sha256(
        {name: module.state_dict() for name, module in parts.items() if module is not None}
    )
    return subject


def attach_data(subject: Subject, spec: DataSpec, *, seed: int, where: Path) -> None:
    """Give ``subject`` the data ``spec`` names: the training set as two augmented views
    (``two_views``, seeded by ``seed``) and an opener of the un-augmented train/test splits
    (``eval_split``). UserError where the records of the checkpoint at ``where`` (its digits
    split, its number of training images) disagree with the data found."""
    # imported here: analysing an embeddings file needs neither torchvision nor scikit-learn
    from cl_diag.training.augment import eval_transform
    from cl_diag.training.data import Transformed, load_dataset, training_data

    _check_recorded_split(spec, where)
    data = training_data(
        spec.dataset,
        seed=seed,
        data_root=spec.data_root,
        val_root=spec.val_root,
        num_samples=spec.num_samples,
        image_size=spec.image_size,
        channels=spec.channels,
    )
    subject.two_views = data.train_set
    recorded = subject.n_train
    if recorded is None:
        subject.n_train = data.n_train
    transform = eval_transform(spec.dataset, spec.image_size, channels=spec.channels)

    def eval_split(split: str) -> Any:
        images = load_dataset(spec.dataset, split, data_root=spec.data_root, val_root=spec.val_root)
        return Transformed(images, transform)

    subject.eval_split = eval_split
    if isinstance(recorded, int) and recorded != len(subject.two_views):
        raise UserError(
            f"{where} was trained on {recorded} images but the training set found now has "
            f"{len(subject.two_views)}; point --data-root at the data it was trained on."
        )
    # A foreign checkpoint records no training-set size: the data found gives it.
    subject.source.setdefault("n_train", subject.n_train)


def _check_recorded_split(spec: DataSpec, path: Path) -> None:
    """The digits split is fixed; a checkpoint whose recorded split differs from today's
    (another scikit-learn, say) would be probed on its own training images."""
    split = spec.split or {}
    if spec.dataset != "digits" or "train_indices" not in split:
        return
    from cl_diag.training.data import digits_split

    train, _ = digits_split()
    recorded = torch.as_tensor(split["train_indices"])
    if recorded.shape != train.shape or not bool((recorded == train).all()):
        raise UserError(
            f"{path} records a digits train/test split that differs from the one this "
            "installation makes; its probes would mix training and test images. Analyse it with "
            "the scikit-learn version it was trained with."
        )
