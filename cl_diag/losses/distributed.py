"""Global-batch negatives under DistributedDataParallel.

Every rank gathers the embeddings of all ranks *with gradients* and computes the **same
global loss** on the concatenated batch::

    loss = global_loss(LOSSES[name], z1, z2, labels, **hparams)
    (loss + other_terms).backward()

Guarantee: with G = [z^(0); ...; z^(W-1)] the rank-ordered concatenation of the W local
batches (sizes may differ) and L(G) its loss in one process, ``global_loss`` equals L(G) on
every rank and the gradient DDP leaves (its average over ranks) is d L(G) / d theta, up to
summation order, for every loss in ``LOSSES``:

* forward: all_gather puts rank r's rows at global positions offset_r .. offset_r + B_r - 1,
  so row i of z1 and of z2 is one instance and masks are built on global indices;
* backward: :class:`_GatherWithGrad` sums dL/dG over ranks and returns rank r its rows; every
  rank computed the same L, so rank r receives W dL/dz^(r), and DDP's division by W gives
  sum_r dL/dz^(r) dz^(r)/dtheta = dL/dtheta. No rescaling by world size is needed.

Terms added outside ``global_loss`` keep the usual DDP meaning. Pass labels on every rank or
on none; without an initialised process group (or with one rank) everything here is a no-op.

Example (single process: the gather is the identity)::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> from cl_diag.losses.distributed import global_loss, gather_batch
    >>> z1, z2 = torch.randn(4, 8), torch.randn(4, 8)
    >>> bool(global_loss(LOSSES["simclr"], z1, z2, temperature=0.2)
    ...      == LOSSES["simclr"](z1, z2, temperature=0.2))
    True
    >>> gather_batch(z1, z2).index.tolist()
    [0, 1, 2, 3]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = [
    "GatheredBatch",
    "gather_batch",
    "gather_with_grad",
    "global_indices",
    "global_loss",
    "is_distributed",
]


def is_distributed() -> bool:
    """True when torch.distributed is initialised with more than one rank."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _local_sizes(n: int, device: torch.device) -> list[int]:
    """Row counts of every rank (a collective)."""
    mine = torch.tensor([n], dtype=torch.long, device=device)
    sizes = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, mine)
    return [int(s.item()) for s in sizes]


def _gather_rows(x: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """all_gather along dim 0 with uneven row counts (pad to the largest)."""
    longest = max(sizes)
    padded = x.new_zeros((longest, *x.shape[1:]))
    padded[: x.shape[0]] = x
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([p[:s] for p, s in zip(parts, sizes, strict=True)])


class _GatherWithGrad(torch.autograd.Function):
    """Forward: the rank-ordered concatenation of ``x`` from all ranks.
    Backward: the gradient w.r.t. the whole concatenation, summed over ranks,
    restricted to this rank's rows."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, sizes: tuple[int, ...]) -> torch.Tensor:
        rank = dist.get_rank()
        ctx.start = sum(sizes[:rank])
        ctx.stop = ctx.start + sizes[rank]
        return _gather_rows(x.detach(), list(sizes))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.start : ctx.stop], None


def gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` (rows) over all ranks in rank order, keeping the
    gradient path to every rank's rows. Collective: every rank must call it
    (and later run backward). Identity when not distributed."""
    if not is_distributed():
        return x
    sizes = tuple(_local_sizes(x.shape[0], x.device))
    return _GatherWithGrad.apply(x, sizes)


def global_indices(local_batch_size: int, device=None) -> torch.Tensor:
    """Positions of this rank's rows in the gathered global batch:
    arange(offset, offset + local_batch_size), offset = rows of lower ranks.
    Collective when distributed; arange(local_batch_size) otherwise."""
    if not is_distributed():
        return torch.arange(local_batch_size, device=device)
    probe_device = device if device is not None else _default_device()
    sizes = _local_sizes(local_batch_size, probe_device)
    start = sum(sizes[: dist.get_rank()])
    return torch.arange(start, start + local_batch_size, device=device)


def _default_device() -> torch.device:
    # NCCL needs CUDA tensors for collectives, gloo CPU ones.
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


@dataclass(frozen=True)
class GatheredBatch:
    z1: torch.Tensor  # (N, d) global view 1, gradients flow to every rank
    z2: torch.Tensor  # (N, d) global view 2
    labels: torch.Tensor | None  # (N,) global labels, or None
    index: torch.Tensor  # (B_local,) global positions of this rank's rows


def gather_batch(z1: torch.Tensor, z2: torch.Tensor, labels=None) -> GatheredBatch:
    """Gather both views (with gradients) and the labels (without) from all
    ranks, plus this rank's global row indices. Collective."""
    if z1.dim() != 2 or z1.shape != z2.shape:
        raise ValueError(
            f"gather_batch: z1 and z2 must be 2-D with the same shape, "
            f"got {tuple(z1.shape)} and {tuple(z2.shape)}"
        )
    if labels is not None:
        labels = torch.as_tensor(labels, device=z1.device)
        if labels.shape != (z1.shape[0],):
            raise ValueError(
                f"gather_batch: labels must have shape ({z1.shape[0]},), got {tuple(labels.shape)}"
            )
    if not is_distributed():
        return GatheredBatch(z1, z2, labels, torch.arange(z1.shape[0], device=z1.device))
    sizes = tuple(_local_sizes(z1.shape[0], z1.device))
    start = sum(sizes[: dist.get_rank()])
    g1 = _GatherWithGrad.apply(z1, sizes)
    g2 = _GatherWithGrad.apply(z2, sizes)
    gl = None if labels is None else _gather_rows(labels.long(), list(sizes))
    index = torch.arange(start, start + z1.shape[0], device=z1.device)
    return GatheredBatch(g1, g2, gl, index)


def global_loss(loss, z1: torch.Tensor, z2: torch.Tensor, labels=None, **hparams) -> torch.Tensor:
    """``loss`` (an entry of LOSSES, a configured loss module such as
    ``build_loss("simclr", temperature=0.2)``, or any ``(z1, z2, labels, **hp)``
    callable) on the global batch gathered from all ranks; see the module
    docstring for the gradient guarantee. Collective: call on every rank,
    with the same hyper-parameters. Equals ``loss(z1, z2, labels, **hparams)``
    when not distributed. A module with learnable parameters (the learnable
    sigmoid) gets the same gradient on every rank, since every rank computes
    the same global loss."""
    if hparams and hasattr(loss, "resolve"):
        loss.resolve(**hparams)  # fail before the collective, on every rank alike
    g = gather_batch(z1, z2, labels)
    return loss(g.z1, g.z2, g.labels, **hparams)
