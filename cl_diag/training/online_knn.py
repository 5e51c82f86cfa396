"""The online kNN accuracy of ``cl-diag train --online-knn N``, as solo-learn's and lightly's
online kNN evaluations report it while a run trains.

Every N epochs (and at the last) the backbone, in eval mode, encodes the un-augmented train
split (the memory bank) and test split (the queries) of the run's data set, and the weighted
cosine kNN of :func:`cl_diag.measurement.probes.knn_probe` scores the test split (k = 20,
T = 0.07: InstDisc's vote, votes sum exp(s / T) over the k nearest). Its top-1 joins that
epoch's metrics row as ``knn_top1``.

It leaves the training as it was: the images are read in order without a DataLoader (which
draws its seed from the global generator), under ``torch.no_grad`` with the modules in eval mode
(no BatchNorm statistic moves), and the train mode is restored after.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from cl_diag.measurement.probes import knn_probe
from cl_diag.training.augment import eval_transform
from cl_diag.training.data import Transformed, load_dataset

#: the neighbours and the vote's temperature (solo-learn's online kNN defaults)
K = 20
TEMPERATURE = 0.07
#: the metrics row's column
COLUMN = "knn_top1"
#: images encoded per forward pass
BATCH = 256


class OnlineKnn:
    """The splits of ``dataset``, opened once (a missing test split fails before the first
    step); calling it with the backbone gives the kNN top-1 on the test split."""

    def __init__(
        self,
        dataset: str,
        *,
        data_root: str | None,
        val_root: str | None,
        image_size: int | None,
        device: torch.device,
        autocast: torch.dtype | None = None,
        channels_last: bool = False,
    ) -> None:
        transform = eval_transform(dataset, image_size)
        self.splits = {
            split: Transformed(
                load_dataset(dataset, split, data_root=data_root, val_root=val_root), transform
            )
            for split in ("train", "test")
        }
        self.device, self.autocast, self.channels_last = device, autocast, channels_last

    def _encode(self, backbone: nn.Module, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        images = self.splits[split]
        features: list[torch.Tensor] = []
        labels: list[int] = []
        for start in range(0, len(images), BATCH):
            items = [images[i] for i in range(start, min(start + BATCH, len(images)))]
            x = torch.stack([image for image, _ in items]).to(self.device, non_blocking=True)
            if self.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            amp = self.autocast
            with torch.autocast(self.device.type, dtype=amp, enabled=amp is not None):
                features.append(backbone(x).float().flatten(1).cpu())
            labels.extend(label for _, label in items)
        return torch.cat(features), torch.tensor(labels)

    def __call__(self, backbone: nn.Module) -> float:
        """The test split's kNN top-1 with ``backbone``'s features."""
        training = backbone.training
        backbone.eval()
        try:
            with torch.no_grad():
                (tx, ty), (vx, vy) = (self._encode(backbone, s) for s in ("train", "test"))
        finally:
            backbone.train(training)
        top1: Any = knn_probe(tx, ty, vx, vy, ks=(K,), temperature=TEMPERATURE).top1[K]
        return float(top1)
