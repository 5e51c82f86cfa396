"""Pair masks: the bookkeeping for the losses that read labels (supcon, triplet, contrastive);
inside a loss, which rows of a batch form which pairs (not :mod:`cl_diag.measurement.pairs`).

The V views of B instances are stacked view by view, z = [view_1; ...; view_V], so row a is
view a // B of instance a % B, with an id: its label, else its instance index. For rows a, k:
``self_mask`` a == k; ``positive`` same id, a != k; ``negative`` different id;
``other_views`` the same *instance*, a != k (SimCLR's positives); ``cross_view`` different
views (InfoNCE's candidates). This is the one place that decides who is whose positive; under
DDP the masks are built on the gathered global batch (:mod:`cl_diag.losses.distributed`).

Example::

    >>> import torch
    >>> p = Pairs.of_views(batch=3, labels=torch.tensor([0, 0, 1]))
    >>> p.ids.tolist()
    [0, 0, 1, 0, 0, 1]
    >>> p.positive[0].tolist()   # row 0 = view 1 of instance 0, class 0: rows 1, 3, 4
    [False, True, False, True, True, False]
    >>> p.other_views[0].tolist()
    [False, False, False, True, False, False]
"""

from __future__ import annotations

from functools import cached_property

import torch

__all__ = ["Pairs"]


class Pairs:
    """Positive / negative / self masks of the stacked views of one batch."""

    def __init__(
        self, ids: torch.Tensor, instances: torch.Tensor, view: torch.Tensor | None = None
    ):
        if ids.shape != instances.shape or ids.dim() != 1:
            raise ValueError(
                f"Pairs: ids and instances must be 1-D of the same length, "
                f"got {tuple(ids.shape)} and {tuple(instances.shape)}"
            )
        if view is not None and view.shape != ids.shape:
            raise ValueError(f"Pairs: view must have shape {tuple(ids.shape)}")
        self.ids, self.instances, self.view = ids, instances, view

    @classmethod
    def of_views(
        cls,
        batch: int,
        labels: torch.Tensor | None = None,
        views: int = 2,
        device: torch.device | str | None = None,
    ) -> Pairs:
        """The bookkeeping of ``views`` stacked views of ``batch`` instances;
        ``labels`` (B,) give the classes, None makes each instance its own."""
        if views < 1:
            raise ValueError(f"Pairs: views must be >= 1, got {views}")
        instances = torch.arange(batch, device=device if labels is None else labels.device)
        ids = instances if labels is None else labels
        view = torch.arange(views, device=instances.device).repeat_interleave(batch)
        return cls(ids.repeat(views), instances.repeat(views), view)

    @property
    def size(self) -> int:
        """Rows of the stacked batch, V * B."""
        return self.ids.shape[0]

    @cached_property
    def self_mask(self) -> torch.Tensor:
        return torch.eye(self.size, dtype=torch.bool, device=self.ids.device)

    @cached_property
    def same_id(self) -> torch.Tensor:
        return self.ids[:, None] == self.ids[None, :]

    @cached_property
    def positive(self) -> torch.Tensor:
        return self.same_id & ~self.self_mask

    @cached_property
    def negative(self) -> torch.Tensor:
        return ~self.same_id

    @cached_property
    def other_views(self) -> torch.Tensor:
        return (self.instances[:, None] == self.instances[None, :]) & ~self.self_mask

    @cached_property
    def cross_view(self) -> torch.Tensor:
        """Rows of different views (any instance); needs the ``view`` of each row."""
        if self.view is None:
            raise ValueError("Pairs: cross_view needs the view of each row (use of_views)")
        return self.view[:, None] != self.view[None, :]
