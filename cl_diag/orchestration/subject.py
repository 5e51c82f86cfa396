"""A checkpoint made ready for measuring: its model rebuilt and the data it was trained on opened.

(One concept at two layers, with :mod:`cl_diag.models.subject` below.)

The two halves meet here, above both of their homes: :mod:`cl_diag.models` rebuilds the
encoder and names the data in a :class:`~cl_diag.models.subject.DataSpec`
(:func:`~cl_diag.models.subject.rebuild_subject`); :mod:`cl_diag.training.data` opens that
data (:func:`attach_data`). Models never import training, so the arrow runs one way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_diag.errors import UserError
from cl_diag.models.checkpoints import CheckpointFile, tensors_sha256, weights_sha256
from cl_diag.models.subject import DataSpec, Subject, module_subject, rebuild_subject
from cl_diag.runconfig import parse_run_config

__all__ = ["attach_data", "open_module_subject", "open_subject"]


def open_subject(file: CheckpointFile, *, seed: int = 0, **options: Any) -> Subject:
    """Rebuild the model in ``file`` and open the data it was trained on; UserError for
    every mismatch between the file, the options and the data found.

    ``options`` are :func:`~cl_diag.models.subject.rebuild_subject`'s (``arch``,
    ``dataset``, ``cifar_stem_padding``, ``data_root``, ``val_root``,
    ``run_record_fields``: declared there once); ``seed`` draws the random-init twin and
    the two augmented views. ``source`` gets ``kind`` first and the weights' fingerprint
    last.
    """
    subject = rebuild_subject(file, seed=seed, **options)
    if subject.data_spec is not None:  # toy runs carry their learned vectors instead
        attach_data(subject, subject.data_spec, seed=seed, where=file.path)
    elif subject.embeddings is not None:  # toy: --num-classes gave its instances classes
        num_classes = parse_run_config(subject.training_config).num_classes
        if num_classes is not None:
            from cl_diag.training.data import toy_labels

            subject.embedding_labels = toy_labels(subject.embeddings[0].shape[0], num_classes)
    fingerprint = weights_sha256(file)
    subject.source = {"kind": "checkpoint", **subject.source, "weights_sha256": fingerprint}
    return subject


def open_module_subject(
    backbone: nn.Module, projector: nn.Module | None, *, seed: int = 0, **options: Any
) -> Subject:
    """:func:`~cl_diag.models.subject.module_subject` (``options`` are its own) with the data
    it names opened, as :func:`open_subject` does for a file; ``source`` ends with the
    fingerprint of the modules' tensors (names, dtypes, shapes, bytes)."""
    subject = module_subject(backbone, projector, seed=seed, **options)
    assert subject.data_spec is not None  # a module is always measured on images
    attach_data(subject, subject.data_spec, seed=seed, where=Path(type(backbone).__name__))
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
    )
    subject.two_views = data.train_set
    recorded = subject.n_train
    if recorded is None:
        subject.n_train = data.n_train
    transform = eval_transform(spec.dataset, spec.image_size)

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
