"""Queue negatives (MoCo's memory bank) and the key encoder that fills the queue.

He et al., "Momentum Contrast for Unsupervised Visual Representation Learning", CVPR 2020
(MoCo), and Chen et al. 2020 (MoCo v2). ``cl-diag train --queue K`` keeps the last K *keys*
of each view in two ring buffers; the loss reads them as extra cross-view negatives: anchors
of view 1 see ``keys[1]``, of view 2 ``keys[0]`` (:data:`cl_diag.losses.QUEUE_LOSSES`). The
key encoder (``--key-encoder``) is ``momentum`` (MoCo v2: a copy updated as theta_k <- m
theta_k + (1 - m) theta_q, ``--key-momentum`` m, with its own BatchNorm statistics, no
gradients) or ``same`` (the step's own embeddings, detached). Under DDP the keys are the
global batch's, so every rank holds the same queue; the queue and key encoder are in the
checkpoint, so ``--resume`` continues bit-exactly.

Example::

    >>> import torch
    >>> q = KeyQueue(size=4, dim=2)
    >>> q.negatives() is None                      # empty: the first step has no queue
    True
    >>> q.push(torch.ones(3, 2), torch.zeros(3, 2))
    >>> [k.shape[0] for k in q.negatives()], int(q.pointer)
    ([3, 3], 3)
    >>> q.push(2 * torch.ones(3, 2), torch.zeros(3, 2))  # wraps: the oldest two are replaced
    >>> q.negatives()[0][:, 0].tolist(), int(q.pointer)
    ([2.0, 2.0, 1.0, 2.0], 2)
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

__all__ = ["KEY_ENCODERS", "KeyQueue", "MomentumEncoder"]

KEY_ENCODERS = ("momentum", "same")


class KeyQueue(nn.Module):
    """Two ring buffers of ``size`` keys of dimension ``dim``, one per view.

    Buffers (saved in the checkpoint): ``keys`` (2, K, d) float32, ``pointer`` (the next row to
    write) and ``filled`` (rows holding keys, up to K).
    """

    keys: torch.Tensor
    pointer: torch.Tensor
    filled: torch.Tensor

    def __init__(self, size: int, dim: int):
        super().__init__()
        if size < 1 or dim < 1:
            raise ValueError(f"KeyQueue: size and dim must be >= 1, got {size} and {dim}")
        self.size = int(size)
        self.register_buffer("keys", torch.zeros(2, self.size, int(dim)))
        self.register_buffer("pointer", torch.zeros((), dtype=torch.long))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))

    def negatives(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(keys of view 1, keys of view 2), (F, d) each with F the rows filled; None when empty.

        Rows are in buffer order, not age order: the losses sum over them, and a fixed order
        keeps a resumed run's sums in the same order as an uninterrupted run's."""
        filled = int(self.filled)
        if filled == 0:
            return None
        return self.keys[0, :filled], self.keys[1, :filled]

    @torch.no_grad()
    def push(self, k1: torch.Tensor, k2: torch.Tensor) -> None:
        """Write the keys of a batch's two views (B, d) each, oldest first out. A batch larger
        than the queue keeps its last K rows."""
        if k1.shape != k2.shape or k1.dim() != 2 or k1.shape[1] != self.keys.shape[2]:
            raise ValueError(
                f"KeyQueue.push: keys must be (B, {self.keys.shape[2]}) each, "
                f"got {tuple(k1.shape)} and {tuple(k2.shape)}"
            )
        new = torch.stack([k1, k2]).detach().to(self.keys.dtype)[:, -self.size :]
        b = new.shape[1]
        start = int(self.pointer)
        first = min(b, self.size - start)
        self.keys[:, start : start + first] = new[:, :first]
        if first < b:  # wrap around
            self.keys[:, : b - first] = new[:, first:]
        self.pointer.fill_((start + b) % self.size)
        self.filled.fill_(min(self.size, int(self.filled) + b))


class MomentumEncoder(nn.Module):
    """A momentum copy of ``model`` (MoCo v2's key encoder): no gradients, updated by
    :meth:`update` as theta_k <- m theta_k + (1 - m) theta_q after each optimiser step."""

    def __init__(self, model: nn.Module, momentum: float):
        super().__init__()
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"MomentumEncoder: momentum must lie in [0, 1), got {momentum}")
        self.momentum = float(momentum)
        self.model: Any = copy.deepcopy(model)  # a ContrastiveModel: backbone + projector
        for p in self.model.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, online: nn.Module) -> None:
        """theta_k <- m theta_k + (1 - m) theta_q, parameter by parameter (in place)."""
        m = self.momentum
        for k, q in zip(self.model.parameters(), online.parameters(), strict=True):
            k.mul_(m).add_(q.detach(), alpha=1.0 - m)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def checkpoint_state(self) -> dict[str, Any]:
        """The key encoder's weights and buffers, as the checkpoint stores them."""
        return {
            "backbone": self.model.backbone.state_dict(),
            "projector": self.model.projector.state_dict(),
        }

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        self.model.backbone.load_state_dict(state["backbone"])
        self.model.projector.load_state_dict(state["projector"])
