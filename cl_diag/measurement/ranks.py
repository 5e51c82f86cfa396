"""Work spread over the ranks of a ``torchrun`` job, merged so the result does not depend on K.

The measurements that visit every pair (exact pair statistics, uniformity) and the encoding
of the views are lists of independent *tasks* (a similarity tile, a batch of images), each
identified by its position in the single-process order. With K ranks every rank holds the
same inputs, :meth:`Ranks.share` gives each rank a fixed subset of the tasks, each rank
computes its tasks exactly as a single process would (same shapes, same kernels), and
:meth:`Ranks.gather` hands every rank the partial results of all ranks. The caller then
reduces them *in task order*, as one process does, so K ranks produce the same bits as one:

* float64 sums and Chan's M2 are reduced from the per-task parts sorted by task key;
* below-threshold counts and histogram bins are integers, whose sum has no order;
* encoded batches are concatenated in batch order.

Every rank ends with the same result; the caller decides who writes (rank 0).

Collectives use the default process group of ``torch.distributed`` (gloo on CPU, NCCL on
CUDA, which is why only picklable objects are exchanged: ``all_gather_object`` moves them
to the current CUDA device itself). :class:`Ranks` with ``world == 1`` needs no process
group and never communicates.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["SINGLE", "Ranks", "RanksMismatch", "tensor_fingerprint"]


class RanksMismatch(ValueError):
    """The ranks of one job were given different inputs (they must all hold the same views)."""


@dataclass(frozen=True)
class Ranks:
    """This process's place in a job: ``rank`` of ``world`` processes (0 of 1 alone)."""

    rank: int = 0
    world: int = 1

    def __post_init__(self) -> None:
        if self.world < 1 or not 0 <= self.rank < self.world:
            raise ValueError(f"rank {self.rank} of world {self.world} is not a valid place.")

    @classmethod
    def of_process_group(cls) -> Ranks:
        """The default process group's rank and size, or 0 of 1 when none is initialised."""
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def share(self, costs: Sequence[float]) -> list[int]:
        """The indices of the tasks this rank runs, ascending.

        Tasks are dealt in order, each to the rank with the least cost so far (ties to the
        lowest rank): a pure function of ``costs`` and ``world``, so every rank computes the
        same deal without talking, and uneven tasks (a diagonal similarity tile does three
        matmuls, an off-diagonal one below it one) still spread evenly.
        """
        if self.world == 1:
            return list(range(len(costs)))
        load = [0.0] * self.world
        mine = []
        for index, cost in enumerate(costs):
            owner = min(range(self.world), key=lambda r: (load[r], r))
            load[owner] += float(cost)
            if owner == self.rank:
                mine.append(index)
        return mine

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank (``[obj]`` alone)."""
        if self.world == 1:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def check_same(self, what: str, fingerprint: Callable[[], Any]) -> None:
        """Raise :class:`RanksMismatch` on every rank unless ``fingerprint()`` (a digest of
        this rank's inputs, computed only when there are other ranks) is equal on all ranks
        (one collective; nothing alone).

        Work split over ranks assumes each rank holds the same inputs; different ones (each
        rank's own shard, say) would be merged into a silently wrong result.
        """
        if self.world == 1:
            return
        prints = self.gather(fingerprint())
        if any(p != prints[0] for p in prints[1:]):
            raise RanksMismatch(
                f"the {self.world} ranks hold different {what}; every rank must pass the same "
                "full inputs (the work is split over the ranks here, not by the caller)."
            )


#: one process, no communication
SINGLE = Ranks()


def tensor_fingerprint(*tensors: torch.Tensor | None) -> str:
    """A digest of the tensors' shapes, dtypes and bytes, to check that ranks agree.

    Hashing the bytes (moved to the CPU) is O(size) and exact: any differing element, or
    the same rows in another order, changes it.
    """
    digest = hashlib.sha256()
    for t in tensors:
        if t is None:
            digest.update(b"none")
            continue
        t = t.detach().contiguous().cpu()
        digest.update(f"{tuple(t.shape)}{t.dtype}".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
